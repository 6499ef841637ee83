#include "ops/kernels/dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <cblas.h>

#include "ops/kernels/cpu_features.hpp"
#include "ops/kernels/gemm.hpp"
#include "ops/kernels/gemm_bf16.hpp"
#include "ops/kernels/isa/gemm_bf16_amx.hpp"
#include "platform/execution.hpp"

namespace tapegrad::kernels {

Bf16Path resolve_bf16_path(Bf16Path requested) {
  if (requested != Bf16Path::automatic) return requested;
  static const Bf16Path chosen = [] {
    const CpuFeatures& cpu = cpu_features();
    if (cpu.amx_bf16) return Bf16Path::amx;
    if (cpu.avx512_bf16 && cpu.amd) return Bf16Path::avx512_bf16;
    return Bf16Path::rounded;
  }();
  return chosen;
}

bool bf16_products_are_fast() {
  const Bf16Path path = resolve_bf16_path(Bf16Path::automatic);
  return path == Bf16Path::amx || path == Bf16Path::avx512_bf16;
}

namespace {

// bf16 where no bf16 kernel is faster than float32 (VDPBF16PS missing or at half the FMAs'
// rate, and no AMX tiles) rounds the operands and multiplies in float32 (dispatch.hpp):
// bf16's numbers, the rounding pass costing a little more than float32 alone. Said once per
// process, when first asked for: set_matmul_precision(bf16) calls this (platform/execution.hpp),
// which this file sets when the library's static objects are made.
void warn_bf16_is_not_faster() {
  static std::once_flag warned;
  if (!bf16_products_are_fast())
    std::call_once(warned, [] {
      std::fprintf(stderr, "tapegrad: warning: bf16 matrix products: no faster bf16 "
                           "instruction on this CPU (%s), so the operands are rounded to bf16 "
                           "and multiplied in float32: bf16's results, no faster than float32\n",
                   cpu_features().avx512_bf16
                       ? "its VDPBF16PS runs at half its float32 FMA rate, and it has no AMX "
                         "tiles this process may use"
                       : "it has no AVX512_BF16");
    });
}
const bool g_bf16_notice_set = (set_bf16_notice(&warn_bf16_is_not_faster), true);

}  // namespace

bool bf16_kernel_pays(std::size_t M, std::size_t N) {
  const Bf16Path path = resolve_bf16_path(Bf16Path::automatic);
  return path == Bf16Path::avx512_bf16 || (path == Bf16Path::amx && M >= 16 && N >= 16);
}

namespace {

inline CBLAS_TRANSPOSE flag(bool t) { return t ? CblasTrans : CblasNoTrans; }

void gemm_call(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, float alpha,
               const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta,
               float* C, std::size_t ldc) {
  cblas_sgemm(CblasRowMajor, flag(ta), flag(tb), int(M), int(N), int(K), alpha, A, int(lda), B,
              int(ldb), beta, C, int(ldc));
}
void gemm_call(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, double alpha,
               const double* A, std::size_t lda, const double* B, std::size_t ldb, double beta,
               double* C, std::size_t ldc) {
  cblas_dgemm(CblasRowMajor, flag(ta), flag(tb), int(M), int(N), int(K), alpha, A, int(lda), B,
              int(ldb), beta, C, int(ldc));
}
// C (1 x N) = alpha * op(A) @ op(B) + beta * C as BLAS's matrix-vector product: a decode
// step's projections are one row against a weight matrix, where gemm_small's 8-row tile
// wastes 7 rows and sgemm packs a whole panel for one row. Row-major op(B) (K x N) times
// the row x is op(B)^T x: B itself (N x K) when transposed, else B read transposed.
// op(A)'s one row is A's row, or A's first column (stride lda) when A is transposed.
void gemv_call(bool ta, bool tb, std::size_t N, std::size_t K, float alpha, const float* A,
               std::size_t lda, const float* B, std::size_t ldb, float beta, float* C) {
  cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, int(tb ? N : K), int(tb ? K : N),
              alpha, B, int(ldb), A, ta ? int(lda) : 1, beta, C, 1);
}
void gemv_call(bool ta, bool tb, std::size_t N, std::size_t K, double alpha, const double* A,
               std::size_t lda, const double* B, std::size_t ldb, double beta, double* C) {
  cblas_dgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, int(tb ? N : K), int(tb ? K : N),
              alpha, B, int(ldb), A, ta ? int(lda) : 1, beta, C, 1);
}

// The reference kernel (platform/execution.hpp's reference_products): C(i, j) = one chain of fused
// multiply-adds over k in order, from beta * C(i, j) when alpha is 1 (so that a sum over K
// split into parts, each added with beta 1, is the whole chain), else alpha times the chain
// from 0 plus beta * C(i, j). std::fma rounds once, as every FMA instruction does.
template <class T>
void reference_product(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, T alpha,
                       const T* A, std::size_t lda, const T* B, std::size_t ldb, T beta, T* C,
                       std::size_t ldc) {
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      T& c = C[i * ldc + j];
      const T from = beta == T(0) ? T(0) : beta * c;  // beta 0: C is not read
      T acc = alpha == T(1) ? from : T(0);
      for (std::size_t k = 0; k < K; ++k)
        acc = std::fma(ta ? A[k * lda + i] : A[i * lda + k], tb ? B[j * ldb + k] : B[k * ldb + j], acc);
      c = alpha == T(1) ? acc : alpha * acc + from;
    }
}

}  // namespace

// tapegrad's own kernel where BLAS does badly (a small K against B^T, little work in all, a
// causal triangle to skip; gemm_small.hpp), BLAS for the rest (which computes the
// triangle's zeros too).
template <class T>
void product(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, T alpha,
             const T* A, std::size_t lda, const T* B, std::size_t ldb, T beta, T* C,
             std::size_t ldc, Triangle structure) {
  if (reference_products())  // computes a triangle's zeros too
    return reference_product(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if constexpr (std::is_same_v<T, float>) {
    if (matmul_precision() == MatmulPrecision::bf16) {
      if (bf16_kernel_pays(M, N))  // computes a triangle's zeros too
        return gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      if (M == 1 && structure == Triangle::none)
        return gemv_bf16(ta, tb, N, K, alpha, A, lda, B, ldb, beta, C);
      // where the bf16 kernels are no faster: the float32 kernels below, on copies of the
      // operands rounded to bf16
      thread_local std::vector<float> a, b;
      const RoundedOperands r = round_operands(ta, tb, M, N, K, A, lda, B, ldb, a, b);
      A = r.A, lda = r.lda, B = r.B, ldb = r.ldb;
    }
  }
  if (M == 1 && structure == Triangle::none) {
    // beta 0 means C is not read: clear it, so no NaN left in it can survive a 0 * NaN
    if (beta == T(0)) std::fill(C, C + N, T(0));
    return gemv_call(ta, tb, N, K, alpha, A, lda, B, ldb, beta, C);
  }
  if (gemm_small_applies<T>(ta, tb, M, N, K, beta, structure))
    gemm_small(ta, tb, M, N, K, alpha, A, lda, B, ldb, C, ldc, structure);
  else
    gemm_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template void product(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*,
                      std::size_t, const float*, std::size_t, float, float*, std::size_t,
                      Triangle);
template void product(bool, bool, std::size_t, std::size_t, std::size_t, double,
                      const double*, std::size_t, const double*, std::size_t, double, double*,
                      std::size_t, Triangle);

void gemm_bf16(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
               float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb,
               float beta, float* C, std::size_t ldc, Bf16Path path) {
  path = resolve_bf16_path(path);
  if (path == Bf16Path::avx512_bf16 && !cpu_features().avx512_bf16)
    throw std::runtime_error("gemm_bf16: the avx512_bf16 path needs a CPU with AVX512_BF16");
  if (path == Bf16Path::amx && !cpu_features().amx_bf16)
    throw std::runtime_error("gemm_bf16: the amx path needs a CPU with AMX-BF16 that this "
                             "process may use");
  if (M == 0 || N == 0) return;
  switch (path) {
    case Bf16Path::rounded: {
      // the float32 product of rounded copies: what a float32 matmul under bf16 precision
      // computes where this is the automatic path (product() above rounds the same way)
      thread_local std::vector<float> a, b;
      const RoundedOperands r = round_operands(trans_a, trans_b, M, N, K, A, lda, B, ldb, a, b);
      MatmulPrecisionGuard f32(MatmulPrecision::f32);
      return gemm_strided<float>(trans_a, trans_b, M, N, K, alpha, r.A, r.lda, r.B, r.ldb, beta,
                                 C, ldc);
    }
    case Bf16Path::amx:
      return gemm_bf16_amx(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    default:
      return gemm_bf16_pairs(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                             path == Bf16Path::avx512_bf16);
  }
}

void gemv_bf16(bool trans_a, bool trans_b, std::size_t N, std::size_t K, float alpha,
               const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta,
               float* C, Bf16Path path) {
  const bool pairs = path == Bf16Path::automatic
                         ? cpu_features().avx512_bf16
                         : path == Bf16Path::avx512_bf16 || path == Bf16Path::amx;
  if (pairs && !cpu_features().avx512_bf16)
    throw std::runtime_error("gemv_bf16: the avx512_bf16 path needs a CPU with AVX512_BF16");
  gemv_bf16_kernel(trans_a, trans_b, N, K, alpha, A, lda, B, ldb, beta, C, pairs);
}

}  // namespace tapegrad::kernels
