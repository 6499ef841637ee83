#pragma once
// GELU (tanh form) over contiguous memory, vectorised with xsimd: one pass forward, one
// pass backward (from the tanh the forward kept: computing it is most of the cost).
// Written as xtensor expressions the two took about 6 % of a TOY-GPT training step:
// xtensor evaluates tanh one scalar at a time and builds the backward's temporaries.
#include <cstddef>

namespace tapegrad::kernels {

// y = 0.5 x (1 + t), t = tanh(sqrt(2/pi) (x + 0.044715 x^3)), elementwise over n values.
// When tanh_out is not null, t is stored there for the backward.
template <class T>
void gelu_forward(const T* x, T* y, T* tanh_out, std::size_t n);

// dx = dy * dGELU/dx (x), elementwise over n values, from the t the forward stored.
template <class T>
void gelu_backward(const T* x, const T* t, const T* dy, T* dx, std::size_t n);

}  // namespace tapegrad::kernels
