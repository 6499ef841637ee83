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

// rows (S, D), ids (N, k) with values in [0, S), weights (N, k) -> (N, D):
// out[n, :] = sum_j weights[n, j] * rows[ids[n, j], :], each output a weighted sum of k rows
// (a mixture of experts' combine: a token's k expert outputs by their router weights).
// Backward: drows[ids[n, j], :] += weights[n, j] * dy[n, :], a scatter-add, and
// dweights[n, j] = <dy[n, :], rows[ids[n, j], :]>. ShapeError as embedding's, and when
// weights' shape is not ids'.
template <class T>
Tensor<T> weighted_row_sum(const Tensor<T>& rows, const Indices& ids, const Tensor<T>& weights);

}  // namespace tapegrad
