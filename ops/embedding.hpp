#pragma once
// Row lookup: the differentiable gather behind token and positional embeddings.
#include <cstdint>

#include <xtensor/xarray.hpp>

#include "autograd/tensor.hpp"

namespace tapegrad {

using Indices = xt::xarray<std::int64_t>;

// weight (V, D), ids (...) with values in [0, V) -> (..., D)
template <class T>
Tensor<T> embedding(const Tensor<T>& weight, const Indices& ids);

}  // namespace tapegrad
