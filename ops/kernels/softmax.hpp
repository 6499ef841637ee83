#pragma once
// Row-wise softmax kernels on contiguous memory, no autograd and no xtensor. A tensor is
// viewed as (outer, L, inner): softmax runs along L, whose elements are `inner` apart.
#include <cstddef>
#include <cstdint>

namespace tapegrad::kernels {

struct RowLayout {
  std::size_t outer = 1, length = 1, inner = 1;
};

// y = softmax(x) along L. mask (may be null): element e is allowed when
// mask[e % mask_period] != 0; disallowed scores count as -inf. A row with no allowed
// element gives all zeros.
template <class T>
void softmax_forward(const RowLayout& r, const T* x, const std::uint8_t* mask,
                     std::size_t mask_period, T* y);
// dx = y * (dy - sum_L(dy * y))
template <class T>
void softmax_backward(const RowLayout& r, const T* y, const T* dy, T* dx);
// y = x - max - log(sum(exp(x - max)))
template <class T>
void log_softmax_forward(const RowLayout& r, const T* x, T* y);
// dx = dy - exp(y) * sum_L(dy)
template <class T>
void log_softmax_backward(const RowLayout& r, const T* y, const T* dy, T* dx);

}  // namespace tapegrad::kernels
