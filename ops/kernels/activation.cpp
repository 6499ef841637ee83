#include "ops/kernels/activation.hpp"

#include <algorithm>
#include <cmath>

#include "platform/simd.hpp"

#include "ops/kernels/parallel.hpp"

namespace tapegrad::kernels {

namespace {

template <class T>
constexpr T kGeluK = T(0.7978845608028654);  // sqrt(2/pi)
template <class T>
constexpr T kGeluC = T(0.044715);

// One formula for a SIMD batch and for a scalar (the tail): the tanh, the forward value
// and the derivative of the tanh-form GELU.
template <class T, class V>
V gelu_tanh(const V& x) {
  using std::tanh;
  using xsimd::tanh;
  return tanh(V(kGeluK<T>) * (x + V(kGeluC<T>) * x * x * x));
}

template <class T, class V>
V gelu_value(const V& x, const V& t) {
  return V(T(0.5)) * x * (V(T(1)) + t);
}

template <class T, class V>
V gelu_derivative(const V& x, const V& t) {
  return V(T(0.5)) * (V(T(1)) + t) +
         V(T(0.5)) * x * (V(T(1)) - t * t) * V(kGeluK<T>) * (V(T(1)) + V(T(3) * kGeluC<T>) * x * x);
}

}  // namespace

template <class T>
void gelu_forward(const T* x, T* y, T* tanh_out, std::size_t n) {
  using batch = xsimd::batch<T>;
  parallel_blocks_if_worth(n, batch::size, n, [&](std::size_t begin, std::size_t end) {
    std::size_t i = begin;
    for (; i + batch::size <= end; i += batch::size) {
      const batch xi = batch::load_unaligned(x + i), t = gelu_tanh<T>(xi);
      gelu_value<T>(xi, t).store_unaligned(y + i);
      if (tanh_out) t.store_unaligned(tanh_out + i);
    }
    for (; i < end; ++i) {
      const T t = gelu_tanh<T>(x[i]);
      y[i] = gelu_value<T>(x[i], t);
      if (tanh_out) tanh_out[i] = t;
    }
  });
}

template <class T>
void gelu_backward(const T* x, const T* t, const T* dy, T* dx, std::size_t n) {
  using batch = xsimd::batch<T>;
  parallel_blocks_if_worth(n, batch::size, n, [&](std::size_t begin, std::size_t end) {
    std::size_t i = begin;
    for (; i + batch::size <= end; i += batch::size)
      (batch::load_unaligned(dy + i) *
       gelu_derivative<T>(batch::load_unaligned(x + i), batch::load_unaligned(t + i)))
          .store_unaligned(dx + i);
    for (; i < end; ++i) dx[i] = dy[i] * gelu_derivative<T>(x[i], t[i]);
  });
}

template void gelu_forward(const float*, float*, float*, std::size_t);
template void gelu_forward(const double*, double*, double*, std::size_t);
template void gelu_backward(const float*, const float*, const float*, float*, std::size_t);
template void gelu_backward(const double*, const double*, const double*, double*, std::size_t);

}  // namespace tapegrad::kernels
