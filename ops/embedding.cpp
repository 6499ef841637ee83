#include "ops/embedding.hpp"

#include <algorithm>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"

namespace tapegrad {

// weight (V, D), ids (...) -> y (..., D):  y[n, :] = weight[ids[n], :]
template <class T>
Tensor<T> embedding(const Tensor<T>& weight, const Indices& ids) {
  const Shape ws = weight.shape();
  const Shape is(ids.shape().begin(), ids.shape().end());
  if (ws.size() != 2)
    fail("embedding", "weight must be 2-D (V, D), got {} (ids are {})", shape_str(ws),
         shape_str(is));
  const std::size_t V = ws[0], D = ws[1];
  // Checked once here, so the copy loops below (and the backward) index without checks.
  std::vector<std::size_t> rows(ids.size());
  for (std::size_t n = 0; n < rows.size(); ++n) {
    const std::int64_t id = ids.data()[n];
    if (id < 0 || static_cast<std::uint64_t>(id) >= V)
      fail("embedding", "id {} at flat position {} is out of range [0, V={}) (weight {}, ids {})",
           id, n, V, shape_str(ws), shape_str(is));
    rows[n] = static_cast<std::size_t>(id);
  }
  Shape out_shape = is;
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
                     Array<T> dw = xt::zeros<T>({V, D});
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

template Tensor<float> embedding(const Tensor<float>&, const Indices&);
template Tensor<double> embedding(const Tensor<double>&, const Indices&);

}  // namespace tapegrad
