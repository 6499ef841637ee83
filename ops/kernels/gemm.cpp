#include "ops/kernels/gemm.hpp"

#include <set>
#include <type_traits>
#include <vector>

#include "ops/kernels/dispatch.hpp"
#include "ops/kernels/parallel.hpp"
#include "platform/execution.hpp"

namespace tapegrad::kernels {

namespace {
// Below this many flops a gemm is not worth splitting over threads.
constexpr double kParallelFlops = 4.0e6;
}  // namespace

template <class T>
void gemm_strided(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                  T alpha, const T* A, std::size_t lda, const T* B, std::size_t ldb, T beta,
                  T* C, std::size_t ldc, Triangle structure) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: C = beta * C
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j)
        C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
    return;
  }
  // a triangle is stated for the whole product's rows and columns, so it is not split; the
  // bf16 kernels split their own work (each block here would pack all of the other operand)
  const bool splits_itself = std::is_same_v<T, float> &&
                             matmul_precision() == MatmulPrecision::bf16 && bf16_kernel_pays(M, N);
  if (num_threads() <= 1 || 2.0 * M * N * K < kParallelFlops || structure != Triangle::none ||
      splits_itself) {
    product(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, structure);
    return;
  }
  // One gemm split into independent blocks of C: rows of op(A) when C is tall, columns of
  // op(B) otherwise. Each block is an ordinary single-threaded gemm on the same buffers.
  const bool by_rows = M >= N;
  // blocks a multiple of 16 wide, so that column blocks keep the small-K kernel's SIMD width
  parallel_blocks(by_rows ? M : N, 16, [&](std::size_t lo, std::size_t hi) {
    if (by_rows)  // row r of op(A) starts at A + r (stored transposed) or A + r * lda
      product(trans_a, trans_b, hi - lo, N, K, alpha, trans_a ? A + lo : A + lo * lda, lda, B,
              ldb, beta, C + lo * ldc, ldc);
    else  // column c of op(B) starts at B + c * ldb (stored transposed) or B + c
      product(trans_a, trans_b, M, hi - lo, K, alpha, A, lda, trans_b ? B + lo * ldb : B + lo,
              ldb, beta, C + lo, ldc);
  });
}

template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, T alpha,
          const T* A, const T* B, T beta, T* C) {
  gemm_strided(trans_a, trans_b, M, N, K, alpha, A, trans_a ? M : K, B, trans_b ? K : N, beta,
               C, N);
}

template <class T>
void gemm_batch(const GemmBatch& b, T alpha, const T* A, const T* B, T beta, T* C) {
  const std::size_t count = b.c_offset.size();
  // Parallel over the batch: independent products, each single-threaded, when they write
  // distinct blocks of C. A batch of tiny products (attention at T = 16) would cost more
  // in waking the pool than it saves.
  const double flops = 2.0 * double(count) * double(b.M) * double(b.N) * double(b.K);
  const bool worth_threads = count > 1 && num_threads() > 1 && flops >= kParallelFlops;
  if (worth_threads &&
      std::set<std::size_t>(b.c_offset.begin(), b.c_offset.end()).size() == count) {
    parallel_for(count, [&](std::size_t i) {
      gemm(b.trans_a, b.trans_b, b.M, b.N, b.K, alpha, A + b.a_offset[i], B + b.b_offset[i],
           beta, C + b.c_offset[i]);
    });
  } else {
    for (std::size_t i = 0; i < count; ++i)
      gemm(b.trans_a, b.trans_b, b.M, b.N, b.K, alpha, A + b.a_offset[i], B + b.b_offset[i],
           beta, C + b.c_offset[i]);
  }
}

template void gemm_strided(bool, bool, std::size_t, std::size_t, std::size_t, float,
                           const float*, std::size_t, const float*, std::size_t, float, float*,
                           std::size_t, Triangle);
template void gemm_strided(bool, bool, std::size_t, std::size_t, std::size_t, double,
                           const double*, std::size_t, const double*, std::size_t, double,
                           double*, std::size_t, Triangle);
template void gemm(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*,
                   const float*, float, float*);
template void gemm(bool, bool, std::size_t, std::size_t, std::size_t, double, const double*,
                   const double*, double, double*);
template void gemm_batch(const GemmBatch&, float, const float*, const float*, float, float*);
template void gemm_batch(const GemmBatch&, double, const double*, const double*, double,
                         double*);

}  // namespace tapegrad::kernels
