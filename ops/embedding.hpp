#pragma once
// Row lookup: the differentiable gather behind token and positional embeddings.
#include <cstdint>

#include <xtensor/xarray.hpp>

#include "autograd/tensor.hpp"

namespace tapegrad {

using Indices = xt::xarray<std::int64_t>;

// weight (V, D), ids (...) with values in [0, V) -> (..., D); out[..., :] = weight[id, :].
// Backward scatter-adds each output row's gradient into weight's row `id` (an id that
// appears k times collects k contributions). ShapeError when weight is not 2-D or an id
// is outside [0, V) (the message names the bad id, V and both shapes).
template <class T>
Tensor<T> embedding(const Tensor<T>& weight, const Indices& ids);

}  // namespace tapegrad
