#pragma once
// The products that BLAS does badly: a small inner dimension K, or little work in all.
//
// - The attention scores q @ k^T have K = d_head (8 to 32 in the benchmark shapes and the
//   tiny GPTs). OpenBLAS packs both operands for every call, and with K this small the
//   packing and the write-back of the (M, N) result dominate: a batch of (T, 32) @ (32, T)
//   products reached 55-70 % of one square sgemm's GFLOP/s.
// - The per-head products of a small model's attention ((64, 64) @ (64, 32) in TOY-GPT,
//   five per head per step) cost OpenBLAS several microseconds of set-up each.
//
// The kernel keeps an 8-row by 2-vector tile of C in registers over all of K, reading B
// (or B^T, transposed once into a panel) a row of vectors at a time and broadcasting A,
// and writes each tile once; results of 64 KiB or more go straight to memory with
// non-temporal stores (a batch of them does not stay in the cache anyway, and a normal
// store first reads the line it overwrites).
#include <cstddef>

namespace tapegrad::kernels {

// A @ B^T is taken up to this K (B^T is copied into a panel first; above it BLAS is as fast).
inline constexpr std::size_t kSmallK = 32;
// A @ B and A^T @ B are taken up to this much work (M * N * K multiply-adds).
inline constexpr std::size_t kSmallWork = std::size_t(1) << 19;

// What causal attention knows to be zero, so that the kernel skips it (about half the work
// of every product with the (T, T) weights or their gradient):
// - a_lower: op(A)(i, k) = 0 for k > i (the weights, the softmax gradient ds);
// - a_upper: op(A)(i, k) = 0 for k < i (their transposes);
// - c_lower: only C(i, j) with j <= i is wanted (the scores); register tiles lying wholly
//   above the diagonal are not written, and the caller fills them (with -inf).
enum class Triangle { none, a_lower, a_upper, c_lower };

// Whether gemm_small computes C = alpha * op(A) @ op(B) + beta * C for these sizes: beta 0,
// N a multiple of the SIMD width (16 floats or 8 doubles with AVX-512), and either
// op(B) = B^T with 1 <= K <= kSmallK, or op(B) = B with M * N * K <= kSmallWork (any size
// with a triangle, which BLAS cannot skip).
template <class T>
bool gemm_small_applies(bool trans_a, bool trans_b, std::size_t M, std::size_t N,
                        std::size_t K, T beta, Triangle structure = Triangle::none);

// C (M x N, row stride ldc) = alpha * op(A) @ op(B), operands row-major with row strides
// lda and ldb as in BLAS. C is overwritten. Requires gemm_small_applies. Single-threaded.
template <class T>
void gemm_small(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                T alpha, const T* A, std::size_t lda, const T* B, std::size_t ldb, T* C,
                std::size_t ldc, Triangle structure = Triangle::none);

}  // namespace tapegrad::kernels
