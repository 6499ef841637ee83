#pragma once
// The kernels of matrix products on bfloat16 operands with float32 accumulation: the
// operands are float32 in memory, rounded to bf16 (round to nearest, ties to even) while
// they are packed, their products summed in float32, the result float32. No autograd, no
// xtensor. Which kernel a product runs on, and the entry points gemm_bf16 and gemv_bf16,
// are ops/kernels/dispatch.hpp's; the AMX and VDPBF16PS kernels are in ops/kernels/isa/.
//
// A product of two bf16 numbers is exact in float32 (8 + 8 significant bits), so each step
// of the packed-pairs kernel below is one float32 addition whether VDPBF16PS or plain
// float32 arithmetic does it, adding the odd k of a pair before the even one as the
// instruction does: the two give the same sums, but where the instruction flushes
// subnormal numbers to zero (inputs and results below 2^-126 in magnitude).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tapegrad::kernels {

// float32 -> bf16: the upper 16 bits after rounding to nearest even; infinities stay, a NaN
// stays a (quiet) NaN, a finite number above bf16's largest rounds to infinity.
std::uint16_t to_bf16(float x);
// Exact: bf16 is float32's upper half. Inline, so that loops widening rows vectorise.
inline float from_bf16(std::uint16_t b) {
  const std::uint32_t u = std::uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
inline float round_to_bf16(float x) { return from_bf16(to_bf16(x)); }

// dst[i] = round_to_bf16(src[i]) for i < n, as a float32 (dst may be src).
void round_to_bf16(const float* src, float* dst, std::size_t n);
// The operands of op(A) @ op(B) (as stored: A is M x K, or K x M when transposed, B K x N
// or N x K) rounded the same way into compact copies in `a` and `b` (grown as needed, never
// shrunk): the rounded path's operands, with their leading dimensions.
struct RoundedOperands {
  const float* A;
  std::size_t lda;
  const float* B;
  std::size_t ldb;
};
RoundedOperands round_operands(bool trans_a, bool trans_b, std::size_t M, std::size_t N,
                               std::size_t K, const float* A, std::size_t lda, const float* B,
                               std::size_t ldb, std::vector<float>& a, std::vector<float>& b);

// C (M x N, M and N > 0) = alpha * bf16(op(A)) @ bf16(op(B)) + beta * C on operands packed
// as bf16 pairs, summed by VDPBF16PS (`vdpbf16ps`: the caller has checked the CPU has it)
// or by plain float32 arithmetic in the same order. With beta 0, C is not read.
void gemm_bf16_pairs(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                     float alpha, const float* A, std::size_t lda, const float* B,
                     std::size_t ldb, float beta, float* C, std::size_t ldc, bool vdpbf16ps);

// C (1 x N) = alpha * bf16(op(A)) @ bf16(op(B)) + beta * C (dispatch.hpp's gemv_bf16),
// on VDPBF16PS pairs (`pairs`: the caller has checked the CPU has it) or as float32 sums of
// the rounded numbers.
void gemv_bf16_kernel(bool trans_a, bool trans_b, std::size_t N, std::size_t K, float alpha,
                      const float* A, std::size_t lda, const float* B, std::size_t ldb,
                      float beta, float* C, bool pairs);

// C[r0 : r0 + rows, c0 : c0 + 32] (clipped to M x N) = alpha * tile + beta * C (with beta 0,
// C is not read), the tile 32 floats a row: where the pairs' and the AMX kernels' blocks
// meet C's edges.
void store_tile(const float* tile, std::size_t r0, std::size_t rows, std::size_t c0,
                std::size_t M, std::size_t N, float alpha, float beta, float* C,
                std::size_t ldc);

}  // namespace tapegrad::kernels
