#include "ops/kernels/rope.hpp"

namespace tapegrad::kernels {

namespace {
// sign = +1 rotates by the table's angle, -1 by its negative (the transpose). The pair of
// index i is (i * stride, i * stride + partner): stride 1, partner h for the half pairing;
// stride 2, partner 1 for the interleaved one.
template <class T>
void rotate(const RopeLayout& L, const double* cos, const double* sin, const T* in, T* out,
            T sign) {
  const std::size_t h = L.head_dim / 2;
  const std::size_t stride = L.interleaved ? 2 : 1, partner = L.interleaved ? 1 : h;
  for (std::size_t o = 0; o < L.outer; ++o) {
    for (std::size_t t = 0; t < L.length; ++t) {
      const double* c = cos + t * h;
      const double* s = sin + t * h;
      const std::size_t row = (o * L.length + t) * L.groups * L.head_dim;
      for (std::size_t g = 0; g < L.groups; ++g) {
        const T* x = in + row + g * L.head_dim;
        T* y = out + row + g * L.head_dim;
        for (std::size_t i = 0; i < h; ++i) {
          const std::size_t a = i * stride, b = a + partner;
          const T ci = static_cast<T>(c[i]), si = sign * static_cast<T>(s[i]);
          const T xa = x[a], xb = x[b];  // read both first: in may alias out
          y[a] = xa * ci - xb * si;
          y[b] = xb * ci + xa * si;
        }
      }
    }
  }
}
}  // namespace

template <class T>
void rope_forward(const RopeLayout& L, const double* cos, const double* sin, const T* x, T* y) {
  rotate(L, cos, sin, x, y, T(1));
}

template <class T>
void rope_backward(const RopeLayout& L, const double* cos, const double* sin, const T* dy,
                   T* dx) {
  rotate(L, cos, sin, dy, dx, T(-1));
}

template void rope_forward(const RopeLayout&, const double*, const double*, const float*, float*);
template void rope_forward(const RopeLayout&, const double*, const double*, const double*,
                           double*);
template void rope_backward(const RopeLayout&, const double*, const double*, const float*,
                            float*);
template void rope_backward(const RopeLayout&, const double*, const double*, const double*,
                            double*);

}  // namespace tapegrad::kernels
