#include "ops/kernels/rope.hpp"

#include "ops/kernels/parallel.hpp"

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
  const std::size_t positions = L.outer * L.length, row_size = L.groups * L.head_dim;
  const auto rotate_positions = [&](std::size_t first, std::size_t last) {
    for (std::size_t p = first; p < last; ++p) {
      const std::size_t t = p % L.length;
      const double* c = cos + t * h;
      const double* s = sin + t * h;
      for (std::size_t g = 0; g < L.groups; ++g) {
        const T* x = in + p * row_size + g * L.head_dim;
        T* y = out + p * row_size + g * L.head_dim;
        for (std::size_t i = 0; i < h; ++i) {
          const std::size_t a = i * stride, b = a + partner;
          const T ci = static_cast<T>(c[i]), si = sign * static_cast<T>(s[i]);
          const T xa = x[a], xb = x[b];  // read both first: in may alias out
          y[a] = xa * ci - xb * si;
          y[b] = xb * ci + xa * si;
        }
      }
    }
  };
  parallel_blocks_if_worth(positions, 1, positions * row_size, rotate_positions);
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
