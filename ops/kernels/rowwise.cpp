#include "ops/kernels/rowwise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/simd.hpp"

namespace tapegrad::kernels {

template <class T>
void softmax_row_inplace(T* row, std::size_t L) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t W = batch::size;
  T m = -std::numeric_limits<T>::infinity();
  for (std::size_t k = 0; k < L; ++k) m = row[k] > m ? row[k] : m;
  if (m == -std::numeric_limits<T>::infinity()) {  // nothing to attend to: zeros, not NaN
    std::fill(row, row + L, T(0));
    return;
  }
  // subtracting the row max keeps every exponent <= 0, so nothing overflows;
  // exp(-inf - m) = 0 drops masked entries out of the sum
  const batch mb(m);
  batch acc(T(0));
  std::size_t k = 0;
  for (; k + W <= L; k += W) {
    const batch e = xsimd::exp(batch::load_unaligned(row + k) - mb);
    e.store_unaligned(row + k);
    acc += e;
  }
  T sum = xsimd::hadd(acc);
  for (; k < L; ++k) {
    row[k] = std::exp(row[k] - m);
    sum += row[k];
  }
  const T inv = T(1) / sum;
  const batch ib(inv);
  k = 0;
  for (; k + W <= L; k += W) (batch::load_unaligned(row + k) * ib).store_unaligned(row + k);
  for (; k < L; ++k) row[k] *= inv;
}

template <class T>
void softmax_backward_row(const T* y, const T* dy, T* dx, std::size_t L, T scale) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t W = batch::size;
  batch acc(T(0));
  std::size_t k = 0;
  for (; k + W <= L; k += W) acc += batch::load_unaligned(y + k) * batch::load_unaligned(dy + k);
  T dot = xsimd::hadd(acc);
  for (; k < L; ++k) dot += y[k] * dy[k];
  const batch db(dot), sb(scale);
  k = 0;
  for (; k + W <= L; k += W)
    (batch::load_unaligned(y + k) * (batch::load_unaligned(dy + k) - db) * sb)
        .store_unaligned(dx + k);
  for (; k < L; ++k) dx[k] = y[k] * (dy[k] - dot) * scale;
}

template void softmax_row_inplace(float*, std::size_t);
template void softmax_row_inplace(double*, std::size_t);
template void softmax_backward_row(const float*, const float*, float*, std::size_t, float);
template void softmax_backward_row(const double*, const double*, double*, std::size_t, double);

}  // namespace tapegrad::kernels
