#pragma once
// C = alpha * A @ B^T for a small inner dimension K: the attention scores q @ k^T, whose K
// is the head width d_head (8 to 32 in the benchmark shapes and the tiny GPTs).
//
// OpenBLAS packs both operands for every call, and with K this small the packing and the
// write-back of the (M, N) result dominate: a batch of (T, 32) @ (32, T) products reached
// 55-70 % of one square sgemm's GFLOP/s. This kernel transposes B once into a (K, N) panel,
// keeps an 8-row by 2-vector tile of C in registers over all of K, and writes each tile
// once; results of 64 KiB or more go straight to memory with non-temporal stores (a batch
// of them does not stay in the cache anyway, and a normal store first reads the line it
// overwrites).
#include <cstddef>

namespace tapegrad::kernels {

// The largest K the kernel takes; above it BLAS is as fast.
inline constexpr std::size_t kSmallK = 32;

// Whether gemm_small_k_nt handles these sizes: 1 <= K <= kSmallK and N a multiple of the
// SIMD width (16 floats or 8 doubles with AVX-512).
template <class T>
bool small_k_applies(std::size_t M, std::size_t N, std::size_t K);

// C (M x N, row stride ldc) = alpha * A (M x K, row stride lda) @ B^T, B (N x K, row stride
// ldb). C is overwritten (beta = 0). Requires small_k_applies(M, N, K). Single-threaded.
template <class T>
void gemm_small_k_nt(std::size_t M, std::size_t N, std::size_t K, T alpha, const T* A,
                     std::size_t lda, const T* B, std::size_t ldb, T* C, std::size_t ldc);

}  // namespace tapegrad::kernels
