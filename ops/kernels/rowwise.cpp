#include "ops/kernels/rowwise.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/simd.hpp"

namespace tapegrad::kernels {

// Short rows go through each phase (max, exponentials and sum, scaling) several at a
// time: one short row alone is a chain of dependent steps (max, exp, sum, divide), and a
// causal attention row at T = 16 spent most of its time waiting on it. Long rows go one at
// a time, so that each stays in L1 from one phase to the next.
std::size_t softmax_row_group(std::size_t row_length) {
  return row_length <= 64 ? kMaxSoftmaxRowGroup : 1;
}

template <class T>
void softmax_rows_inplace(T* rows, std::size_t count, std::size_t stride,
                          const std::size_t* lengths) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t W = batch::size;
  constexpr std::size_t kGroup = kMaxSoftmaxRowGroup;
  const std::size_t group = softmax_row_group(stride);
  for (std::size_t r0 = 0; r0 < count; r0 += group) {
    const std::size_t n = std::min(group, count - r0);
    T m[kGroup], inv[kGroup];
    for (std::size_t r = 0; r < n; ++r) {
      const T* row = rows + (r0 + r) * stride;
      const std::size_t L = lengths[r0 + r];
      T mr = -std::numeric_limits<T>::infinity();
      for (std::size_t k = 0; k < L; ++k) mr = row[k] > mr ? row[k] : mr;
      m[r] = mr;
    }
    for (std::size_t r = 0; r < n; ++r) {
      T* row = rows + (r0 + r) * stride;
      const std::size_t L = lengths[r0 + r];
      if (m[r] == -std::numeric_limits<T>::infinity()) {  // all masked: zeros, not 0/0
        std::fill(row, row + L, T(0));
        continue;
      }
      // subtracting the row max keeps every exponent <= 0, so nothing overflows;
      // exp(-inf - m) = 0 drops masked entries out of the sum
      const batch mb(m[r]);
      batch acc(T(0));
      std::size_t k = 0;
      for (; k + W <= L; k += W) {
        const batch e = xsimd::exp(batch::load_unaligned(row + k) - mb);
        e.store_unaligned(row + k);
        acc += e;
      }
      T sum = xsimd::hadd(acc);
      for (; k < L; ++k) {
        row[k] = std::exp(row[k] - m[r]);
        sum += row[k];
      }
      inv[r] = T(1) / sum;
    }
    for (std::size_t r = 0; r < n; ++r) {
      if (m[r] == -std::numeric_limits<T>::infinity()) continue;
      T* row = rows + (r0 + r) * stride;
      const std::size_t L = lengths[r0 + r];
      const batch ib(inv[r]);
      std::size_t k = 0;
      for (; k + W <= L; k += W) (batch::load_unaligned(row + k) * ib).store_unaligned(row + k);
      for (; k < L; ++k) row[k] *= inv[r];
    }
  }
}

template <class T>
void softmax_row_inplace(T* row, std::size_t L) {
  softmax_rows_inplace(row, 1, L, &L);
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
template void softmax_rows_inplace(float*, std::size_t, std::size_t, const std::size_t*);
template void softmax_rows_inplace(double*, std::size_t, std::size_t, const std::size_t*);
template void softmax_row_inplace(double*, std::size_t);
template void softmax_backward_row(const float*, const float*, float*, std::size_t, float);
template void softmax_backward_row(const double*, const double*, double*, std::size_t, double);

}  // namespace tapegrad::kernels
