#pragma once
// The loops of the elementwise ops (ops/elementwise.cpp) over contiguous row-major memory:
// + - * / and powers with NumPy broadcasting, and the unary functions with their derivatives.
// Written as xtensor expressions, every op's forward and backward instantiated xtensor's
// broadcasting assignment for its own expression type, in float and double: about 13 CPU
// seconds to compile one file. Here one broadcasting routine serves the four operators, and
// the transcendental functions are xsimd's over whole vectors and std's over the tail, as
// xtensor evaluated them, so they give the numbers they gave.
#include <cstddef>

namespace tapegrad::kernels {

// A shape as these kernels take it: `rank` extents, outermost first. It points into the
// caller's shape (an xarray's or a Shape) and copies nothing; a scalar is {nullptr, 0}.
struct Extents {
  const std::size_t* dims;
  std::size_t rank;
};

// The Extents of a shape that has data() and size() (an xarray's, a Shape); a scalar's.
template <class S>
Extents extents(const S& shape) {
  return {shape.data(), shape.size()};
}
inline constexpr Extents kScalarShape{nullptr, 0};

enum class Binary { add, sub, mul, div, pow };

// a: shape A, b: shape B broadcastable -> z: broadcast(A, B), given as z_shape
// z = a op b (pow: std::pow's a^b, nan for a < 0 and a fractional b, inf for 0^(b < 0)), each operand read with stride 0 along the axes it is broadcast over. The
// caller has checked that the shapes broadcast (broadcast_shapes, autograd/shape.hpp).
// z may be a or b when that operand has z's shape (a gradient computed in place).
template <class T>
void binary(Binary op, const T* a, Extents a_shape, const T* b, Extents b_shape, T* z,
            Extents z_shape);

// dz, z: shape Z, b: shape B broadcastable to Z -> db: shape Z (sum_to then folds it to B)
// db = -dz * z / b, the gradient of z = a / b, computed as ((-dz) * z) / b: the product
// over a stretch of z, then its quotient by b through binary's broadcast, while the stretch
// is still in cache. db may be dz or z.
template <class T>
void quotient_grad(const T* dz, const T* z, Extents z_shape, const T* b, Extents b_shape,
                   T* db);

// dz, z: shape Z; a: shape A, b: shape B, both broadcastable to Z -> da, db: shape Z (sum_to
// then folds each to its operand's), the gradients of z = a^b; either may be null, unwanted:
//   da = dz * b * a^(b-1), 0 where b == 0;  db = dz * z * ln a, 0 where a == 0 and b >= 0.
// The zeros are PyTorch's where a formula would meet 0 * inf: a^0 is flat in a, even at
// a == 0, and 0^b for b >= 0 has the slope in b of its limit from a > 0.
template <class T>
void power_grads(const T* dz, const T* z, Extents z_shape, const T* a, Extents a_shape,
                 const T* b, Extents b_shape, T* da, T* db);

enum class Unary { neg, exp, log, sqrt, tanh, relu, sigmoid, silu };

// x: n values -> z: n values, z = op(x). z may be x.
template <class T>
void unary(Unary op, const T* x, T* z, std::size_t n);

// saved, dz: n values each -> dx: n values, dx = dz * op'(x). `saved` is what the op's
// backward reads, so that an in-place edit of the other tensor is no error: the output z
// for exp, sqrt, tanh and sigmoid, the input x for log, relu and silu; neg reads neither
// (saved may be null). dx may be dz.
template <class T>
void unary_backward(Unary op, const T* saved, const T* dz, T* dx, std::size_t n);

// x: n values -> z: n values, z = x^p. z may be x.
template <class T>
void power(const T* x, T p, T* z, std::size_t n);

// x, dz: n values each -> dx: n values, dx = dz * p * x^(p-1). dx may be dz.
template <class T>
void power_backward(const T* x, T p, const T* dz, T* dx, std::size_t n);

}  // namespace tapegrad::kernels
