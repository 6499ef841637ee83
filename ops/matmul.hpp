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

}  // namespace tapegrad
