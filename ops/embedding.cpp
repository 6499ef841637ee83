#include "ops/embedding.hpp"

#include <algorithm>
#include <vector>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"

namespace tapegrad {

namespace {

// The ids of a lookup into `table` (V, D), called `name`, as row numbers, each checked once
// here, so the copy loops (and the backward) index without checks.
template <class T>
std::vector<std::size_t> checked_rows(const char* op, const char* name, const Tensor<T>& table,
                                      const Indices& ids) {
  const Shape ws = table.shape();
  const Shape is(ids.shape().begin(), ids.shape().end());
  if (ws.size() != 2)
    fail(op, "{} must be 2-D (V, D), got {} (ids are {})", name, shape_str(ws), shape_str(is));
  std::vector<std::size_t> rows(ids.size());
  for (std::size_t n = 0; n < rows.size(); ++n) {
    const std::int64_t id = ids.data()[n];
    if (id < 0 || static_cast<std::uint64_t>(id) >= ws[0])
      fail(op, "id {} at flat position {} is out of range [0, V={}) ({} {}, ids {})", id, n,
           ws[0], name, shape_str(ws), shape_str(is));
    rows[n] = static_cast<std::size_t>(id);
  }
  return rows;
}

}  // namespace

// weight (V, D), ids (...) -> y (..., D):  y[n, :] = weight[ids[n], :]
template <class T>
Tensor<T> embedding(const Tensor<T>& weight, const Indices& ids) {
  std::vector<std::size_t> rows = checked_rows("embedding", "weight", weight, ids);
  const std::size_t V = weight.shape()[0], D = weight.shape()[1];
  Shape out_shape(ids.shape().begin(), ids.shape().end());
  out_shape.push_back(D);
  Array<T> y = Array<T>::from_shape(out_shape);
  const T* w = weight.data();
  T* yp = y.data();
  for (std::size_t n = 0; n < rows.size(); ++n)
    std::copy_n(w + rows[n] * D, D, yp + n * D);
  // backward of y[n, :] = weight[ids[n], :]: dweight[ids[n], :] += dy[n, :], a scatter-add,
  // so a row picked twice gets both gradients.
  return record<T>("embedding", {weight}, std::move(y),
                   [rows = std::move(rows), V, D](BackwardContext<T>& c) {
                     Array<T> dw = zeros_array<T>({V, D});
                     T* d = dw.data();
                     const T* g = c.grad().data();
                     for (std::size_t n = 0; n < rows.size(); ++n) {
                       T* dst = d + rows[n] * D;
                       const T* src = g + n * D;
#pragma omp simd
                       for (std::size_t j = 0; j < D; ++j) dst[j] += src[j];
                     }
                     c.accumulate(0, std::move(dw));
                   });
}

// rows (S, D), ids (N, k), weights (N, k) -> y (N, D):
// y[n, :] = sum_j weights[n, j] * rows[ids[n, j], :]
template <class T>
Tensor<T> weighted_row_sum(const Tensor<T>& rows, const Indices& ids, const Tensor<T>& weights) {
  const Shape is(ids.shape().begin(), ids.shape().end());
  if (is.size() != 2 || weights.shape() != is)
    fail("weighted_row_sum", "ids {} and weights {} must both be (N, k) (rows {})", shape_str(is),
         weights.shape_string(), rows.shape_string());
  std::vector<std::size_t> picked = checked_rows("weighted_row_sum", "rows", rows, ids);
  const std::size_t S = rows.shape()[0], D = rows.shape()[1], N = is[0], k = is[1];
  Array<T> y = zeros_array<T>({N, D});
  const T *r = rows.data(), *w = weights.data();
  for (std::size_t n = 0; n < N; ++n) {
    T* out = y.data() + n * D;
    for (std::size_t j = 0; j < k; ++j) {
      const T wj = w[n * k + j], *src = r + picked[n * k + j] * D;
#pragma omp simd
      for (std::size_t d = 0; d < D; ++d) out[d] += wj * src[d];
    }
  }
  // backward: drows[ids[n, j], :] += weights[n, j] * dy[n, :];
  //           dweights[n, j] = <dy[n, :], rows[ids[n, j], :]>
  return record<T>("weighted_row_sum", {rows, weights}, std::move(y),
                   [picked = std::move(picked), S, D, N, k](BackwardContext<T>& c) {
                     const T* g = c.grad().data();
                     if (c.wants(0)) {
                       Array<T> dr = zeros_array<T>({S, D});
                       const T* w = c.input(1).data();
                       for (std::size_t i = 0; i < N * k; ++i) {
                         T* dst = dr.data() + picked[i] * D;
                         const T wi = w[i], *src = g + (i / k) * D;
#pragma omp simd
                         for (std::size_t d = 0; d < D; ++d) dst[d] += wi * src[d];
                       }
                       c.accumulate(0, std::move(dr));
                     }
                     if (c.wants(1)) {
                       Array<T> dw = Array<T>::from_shape({N, k});
                       const T* r = c.input(0).data();
                       for (std::size_t i = 0; i < N * k; ++i) {
                         const T *a = g + (i / k) * D, *b = r + picked[i] * D;
                         T dot = 0;
#pragma omp simd reduction(+ : dot)
                         for (std::size_t d = 0; d < D; ++d) dot += a[d] * b[d];
                         dw.data()[i] = dot;
                       }
                       c.accumulate(1, std::move(dw));
                     }
                   });
}

template Tensor<float> embedding(const Tensor<float>&, const Indices&);
template Tensor<double> embedding(const Tensor<double>&, const Indices&);
template Tensor<float> weighted_row_sum(const Tensor<float>&, const Indices&, const Tensor<float>&);
template Tensor<double> weighted_row_sum(const Tensor<double>&, const Indices&, const Tensor<double>&);

}  // namespace tapegrad
