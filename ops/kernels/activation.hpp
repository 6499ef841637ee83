#pragma once
// GELU (tanh form) over contiguous memory, vectorised with xsimd: one pass forward, one
// pass backward (tanh recomputed rather than stored). Written as xtensor expressions the
// two took about 6 % of a TOY-GPT training step: xtensor evaluates tanh one scalar at a
// time and builds the backward's several temporaries.
#include <cstddef>

namespace tapegrad::kernels {

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise over n values.
template <class T>
void gelu_forward(const T* x, T* y, std::size_t n);

// dx = dy * dGELU/dx (x), elementwise over n values.
template <class T>
void gelu_backward(const T* x, const T* dy, T* dx, std::size_t n);

}  // namespace tapegrad::kernels
