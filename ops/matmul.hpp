#pragma once
// Matrix product with NumPy's matmul semantics: the last two axes multiply, the leading
// (batch) axes broadcast; a 1-D operand is promoted to a matrix and the added axis
// removed again. Every product runs through BLAS gemm on contiguous memory.
#include "autograd/tensor.hpp"

namespace tapegrad {

template <class T>
Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b);

// a @ swapaxes(b, -1, -2) without materialising the transpose (BLAS's transpose flag):
// a (..., M, K), b (..., N, K) -> (..., M, N). This is attention's q @ k^T.
template <class T>
Tensor<T> matmul_nt(const Tensor<T>& a, const Tensor<T>& b);

// x @ weight + bias, a Linear layer as one op: x (..., K), weight (K, N), bias (N) ->
// (..., N). The numbers of matmul(x, weight) + bias bit for bit, forward and backward, but
// the product before the bias is never a tensor of its own: add would keep it, as its
// input, until the backward (a layer's output again per Linear, 4 x d_model wide in an MLP).
// A 1-D x or a batched weight takes matmul and add; an undefined bias, matmul alone.
template <class T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias);

}  // namespace tapegrad
