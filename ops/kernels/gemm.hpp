#pragma once
// Matrix products on contiguous row-major memory, split over the kernels' threads; each block
// runs on the kernel ops/kernels/dispatch.hpp picks (OpenBLAS, tapegrad's small-K kernel,
// or under bf16 precision a bf16 kernel). No autograd, no xtensor.
#include <cstddef>
#include <vector>

#include "ops/kernels/gemm_small.hpp"  // Triangle
#include "ops/kernels/parallel.hpp"    // set_num_threads

namespace tapegrad::kernels {

// C (M x N) = alpha * op(A) @ op(B) + beta * C, with op(X) = X or X^T. A, B and C are
// contiguous row-major; a transposed operand is read through BLAS's transpose flag,
// never copied.
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, T alpha,
          const T* A, const T* B, T beta, T* C);

// The same with explicit leading dimensions, for operands that are column blocks of a
// wider row-major matrix (one head's (T, dh) slice of a (T, D) projection: ld = D).
// `structure` names zeros of causal attention that the product may skip (see Triangle);
// such a product runs on the calling thread.
template <class T>
void gemm_strided(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                  T alpha, const T* A, std::size_t lda, const T* B, std::size_t ldb, T beta,
                  T* C, std::size_t ldc, Triangle structure = Triangle::none);

// A batch of equally sized products C[i] = op(A[a_off[i]]) @ op(B[b_off[i]]) (+ beta C[i]),
// offsets in elements. Products that write distinct C blocks run in parallel.
struct GemmBatch {
  std::size_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  std::vector<std::size_t> a_offset, b_offset, c_offset;
};
template <class T>
void gemm_batch(const GemmBatch& batch, T alpha, const T* A, const T* B, T beta, T* C);


}  // namespace tapegrad::kernels
