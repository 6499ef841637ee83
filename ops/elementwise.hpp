#pragma once
// Elementwise ops with NumPy broadcasting. Binary ops accept (tensor, tensor),
// (tensor, scalar) and (scalar, tensor); the scalar is a constant, not on the tape, of any
// arithmetic type, converted to the tensor's (Scalar<T>, autograd/tensor.hpp).
#include "autograd/tensor.hpp"

namespace tapegrad {

template <class T> Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b);
template <class T> Tensor<T> add(const Tensor<T>& a, Scalar<T> b);
template <class T> Tensor<T> sub(const Tensor<T>& a, const Tensor<T>& b);
template <class T> Tensor<T> sub(const Tensor<T>& a, Scalar<T> b);
template <class T> Tensor<T> sub(Scalar<T> a, const Tensor<T>& b);
template <class T> Tensor<T> mul(const Tensor<T>& a, const Tensor<T>& b);
template <class T> Tensor<T> mul(const Tensor<T>& a, Scalar<T> b);
template <class T> Tensor<T> div(const Tensor<T>& a, const Tensor<T>& b);
template <class T> Tensor<T> div(const Tensor<T>& a, Scalar<T> b);
template <class T> Tensor<T> div(Scalar<T> a, const Tensor<T>& b);

template <class T> Tensor<T> neg(const Tensor<T>& a);
template <class T> Tensor<T> exp(const Tensor<T>& a);
template <class T> Tensor<T> log(const Tensor<T>& a);
template <class T> Tensor<T> sqrt(const Tensor<T>& a);
template <class T> Tensor<T> pow(const Tensor<T>& a, Scalar<T> exponent);
// a^b as NumPy and PyTorch give it: nan where the real power is undefined (a < 0, b not an
// integer), inf for 0^(b < 0); the gradients there are PyTorch's (kernels::power_grads).
template <class T> Tensor<T> pow(const Tensor<T>& a, const Tensor<T>& exponent);
template <class T> Tensor<T> pow(Scalar<T> base, const Tensor<T>& exponent);
template <class T> Tensor<T> tanh(const Tensor<T>& a);
template <class T> Tensor<T> relu(const Tensor<T>& a);
template <class T> Tensor<T> sigmoid(const Tensor<T>& a);
// SiLU (swish, the gate of SwiGLU): x * sigmoid(x). Finite for any finite x.
template <class T> Tensor<T> silu(const Tensor<T>& a);
// GELU, tanh approximation (as GPT-2 and PyTorch's approximate="tanh"):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <class T> Tensor<T> gelu(const Tensor<T>& a);
// The logit soft-cap c * tanh(a / c): every value kept inside (-c, c), near-linear well
// inside it. c > 0 as valid_softcap (ops/attention_spec.hpp) allows, else a ShapeError.
template <class T> Tensor<T> softcap(const Tensor<T>& a, double c);

template <class T> Tensor<T> operator+(const Tensor<T>& a, const Tensor<T>& b) { return add(a, b); }
template <class T> Tensor<T> operator-(const Tensor<T>& a, const Tensor<T>& b) { return sub(a, b); }
template <class T> Tensor<T> operator*(const Tensor<T>& a, const Tensor<T>& b) { return mul(a, b); }
template <class T> Tensor<T> operator/(const Tensor<T>& a, const Tensor<T>& b) { return div(a, b); }
template <class T> Tensor<T> operator-(const Tensor<T>& a) { return neg(a); }
template <class T> Tensor<T> operator+(const Tensor<T>& a, Scalar<T> b) { return add(a, b); }
template <class T> Tensor<T> operator+(Scalar<T> a, const Tensor<T>& b) { return add(b, a); }
template <class T> Tensor<T> operator-(const Tensor<T>& a, Scalar<T> b) { return sub(a, b); }
template <class T> Tensor<T> operator-(Scalar<T> a, const Tensor<T>& b) { return sub(a, b); }
template <class T> Tensor<T> operator*(const Tensor<T>& a, Scalar<T> b) { return mul(a, b); }
template <class T> Tensor<T> operator*(Scalar<T> a, const Tensor<T>& b) { return mul(b, a); }
template <class T> Tensor<T> operator/(const Tensor<T>& a, Scalar<T> b) { return div(a, b); }
template <class T> Tensor<T> operator/(Scalar<T> a, const Tensor<T>& b) { return div(a, b); }

}  // namespace tapegrad
