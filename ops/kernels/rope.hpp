#pragma once
// The rotation of RoPE over contiguous memory, no autograd and no xtensor. x is viewed as
// (outer, length, groups, head_dim) row-major: `length` positions, and at each of them
// `groups` heads of head_dim = 2h values (groups = 1 for a tensor already split into heads;
// groups = heads for a (B, T, heads * head_dim) projection, read in place).
#include <cstddef>

namespace tapegrad::kernels {

struct RopeLayout {
  std::size_t outer = 1, length = 1, groups = 1, head_dim = 2;
  bool interleaved = false;  // pairs (2i, 2i + 1); otherwise (i, i + head_dim / 2)
};

// cos and sin are (length, head_dim / 2) tables in double, already scaled by the attention
// factor; pair (a, b) of position t is rotated by the table's entry (t, i):
//   y[a] = x[a] cos - x[b] sin,   y[b] = x[b] cos + x[a] sin
template <class T>
void rope_forward(const RopeLayout& L, const double* cos, const double* sin, const T* x, T* y);
// The transpose of that map (a rotation by minus the angle, scaled alike):
//   dx[a] = dy[a] cos + dy[b] sin,   dx[b] = dy[b] cos - dy[a] sin
template <class T>
void rope_backward(const RopeLayout& L, const double* cos, const double* sin, const T* dy,
                   T* dx);

}  // namespace tapegrad::kernels
