#include "ops/kernels/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/kernels/rowwise.hpp"

namespace tapegrad::kernels {

template <class T>
void softmax_forward(const RowLayout& r, const T* x, const std::uint8_t* mask,
                     std::size_t mask_period, T* y) {
  const std::size_t L = r.length, I = r.inner;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  // A row the mask hides entirely gives zeros, not 0/0. That is decided from the mask
  // alone: a NaN or infinite score in a row with an allowed key is plain softmax's NaN.
  if (I == 1) {  // contiguous rows (the last axis): the vectorised row kernel
    for (std::size_t o = 0; o < r.outer; ++o) {
      T* row = y + o * L;
      bool any_allowed = mask == nullptr;
      for (std::size_t k = 0; k < L; ++k) {
        const bool allowed = mask == nullptr || mask[(o * L + k) % mask_period] != 0;
        row[k] = allowed ? x[o * L + k] : neg_inf;
        any_allowed |= allowed;
      }
      if (!any_allowed) {
        std::fill(row, row + L, T(0));
        continue;
      }
      softmax_row_inplace(row, L);
      // a masked key's weight is exactly 0, also in a row whose scores hold a NaN
      if (mask)
        for (std::size_t k = 0; k < L; ++k)
          if (mask[(o * L + k) % mask_period] == 0) row[k] = T(0);
    }
    return;
  }
  for (std::size_t o = 0; o < r.outer; ++o) {
    for (std::size_t i = 0; i < I; ++i) {
      const std::size_t base = o * L * I + i;
      auto allowed = [&](std::size_t k) {
        return mask == nullptr || mask[(base + k * I) % mask_period] != 0;
      };
      // Masked scores are -inf *before* the exponential, so they drop out of the sum.
      T m = neg_inf;
      bool any_allowed = false;
      for (std::size_t k = 0; k < L; ++k) {
        if (!allowed(k)) continue;
        any_allowed = true;
        if (x[base + k * I] > m) m = x[base + k * I];
      }
      if (!any_allowed) {
        for (std::size_t k = 0; k < L; ++k) y[base + k * I] = T(0);
        continue;
      }
      T sum = T(0);
      for (std::size_t k = 0; k < L; ++k) {
        const T e = allowed(k) ? std::exp(x[base + k * I] - m) : T(0);
        y[base + k * I] = e;
        sum += e;
      }
      const T inv = T(1) / sum;
      for (std::size_t k = 0; k < L; ++k)
        if (allowed(k)) y[base + k * I] *= inv;  // masked: exactly 0, whatever inv is
    }
  }
}

template <class T>
void softmax_backward(const RowLayout& r, const T* y, const T* dy, T* dx) {
  const std::size_t L = r.length, I = r.inner;
  if (I == 1) {
    for (std::size_t o = 0; o < r.outer; ++o)
      softmax_backward_row(y + o * L, dy + o * L, dx + o * L, L, T(1));
    return;
  }
  for (std::size_t o = 0; o < r.outer; ++o) {
    for (std::size_t i = 0; i < I; ++i) {
      const std::size_t base = o * L * I + i;
      T dot = T(0);
      for (std::size_t k = 0; k < L; ++k) dot += dy[base + k * I] * y[base + k * I];
      for (std::size_t k = 0; k < L; ++k)
        dx[base + k * I] = y[base + k * I] * (dy[base + k * I] - dot);
    }
  }
}

template <class T>
void log_softmax_forward(const RowLayout& r, const T* x, T* y) {
  const std::size_t L = r.length, I = r.inner;
  for (std::size_t o = 0; o < r.outer; ++o) {
    for (std::size_t i = 0; i < I; ++i) {
      const std::size_t base = o * L * I + i;
      T m = -std::numeric_limits<T>::infinity();
      for (std::size_t k = 0; k < L; ++k) m = std::max(m, x[base + k * I]);
      if (!std::isfinite(m)) m = T(0);
      T sum = T(0);
      for (std::size_t k = 0; k < L; ++k) sum += std::exp(x[base + k * I] - m);
      if (sum == T(0)) {  // an all -inf row stays -inf: -inf - log(0) would be NaN
        for (std::size_t k = 0; k < L; ++k) y[base + k * I] = -std::numeric_limits<T>::infinity();
        continue;
      }
      // (x - m) - log(sum), not x - (m + log(sum)): near a large m the rounded m + log(sum)
      // would cost float its digits (log_softmax([1000, 1001]) off by 3e-5)
      const T log_sum = std::log(sum);
      for (std::size_t k = 0; k < L; ++k) y[base + k * I] = (x[base + k * I] - m) - log_sum;
    }
  }
}

template <class T>
void log_softmax_backward(const RowLayout& r, const T* y, const T* dy, T* dx) {
  const std::size_t L = r.length, I = r.inner;
  for (std::size_t o = 0; o < r.outer; ++o) {
    for (std::size_t i = 0; i < I; ++i) {
      const std::size_t base = o * L * I + i;
      T sum = T(0);
      for (std::size_t k = 0; k < L; ++k) sum += dy[base + k * I];
      for (std::size_t k = 0; k < L; ++k)
        dx[base + k * I] = dy[base + k * I] - std::exp(y[base + k * I]) * sum;
    }
  }
}

#define TAPEGRAD_INSTANTIATE(T)                                                             \
  template void softmax_forward(const RowLayout&, const T*, const std::uint8_t*, std::size_t, \
                                T*);                                                         \
  template void softmax_backward(const RowLayout&, const T*, const T*, T*);                  \
  template void log_softmax_forward(const RowLayout&, const T*, T*);                         \
  template void log_softmax_backward(const RowLayout&, const T*, const T*, T*);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad::kernels
