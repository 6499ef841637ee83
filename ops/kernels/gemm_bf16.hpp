#pragma once
// Matrix products on bfloat16 operands with float32 accumulation: the operands are float32
// in memory, rounded to bf16 (round to nearest, ties to even) while they are packed, their
// products summed in float32, the result float32. No autograd, no xtensor.
//
// Two paths compute the same sums in the same order:
// - avx512_bf16: VDPBF16PS, 32 bf16 multiply-adds per instruction into 16 float32 sums,
//   compiled for that instruction set alone and chosen at run time, so one build runs on
//   every x86-64 CPU;
// - portable: plain float32 arithmetic on the same rounded operands.
// - amx: Intel's AMX tiles (TDPBF16PS: a 16 x 16 block of float32 sums from 16 x 32 bf16
//   operands per instruction), on the same packed pairs; the same products, each pair's two
//   added in the instruction's order, so within float32's accumulation bound of the other
//   paths rather than equal to them.
// A fourth, `rounded`, rounds copies of the operands and multiplies them with the float32
// product (kernels::gemm_strided: OpenBLAS's sgemm or tapegrad's small-K kernel): the same
// products, summed in that product's order, so within float32's accumulation bound of the
// other two rather than equal to them. It runs at float32's rate, which is where bf16
// products go on CPUs whose VDPBF16PS is no faster than their float32 FMAs.
// A product of two bf16 numbers is exact in float32 (8 + 8 significant bits), so each step
// is one float32 addition in both paths, adding the odd k of a pair before the even one as
// the instruction does. They differ only where the instruction flushes subnormal numbers to
// zero (inputs and results below 2^-126 in magnitude).
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

enum class Bf16Path { automatic, portable, avx512_bf16, rounded, amx };

// Whether this CPU executes VDPBF16PS (cpuid's AVX512_BF16 with AVX512F).
bool cpu_has_avx512_bf16();
// Whether this process may use AMX's bf16 tiles: the CPU has AMX-TILE and AMX-BF16, the
// operating system saves their state, and Linux granted the process its use (asked once).
bool cpu_has_amx_bf16();
// The path `automatic` takes here: amx where the process may use it (measured on a Xeon:
// 3.9x OpenBLAS's sgemm at 1024^3, one core); else avx512_bf16 on an AMD CPU that has
// VDPBF16PS, where it does twice the multiply-adds of a 512-bit FMA per cycle (measured:
// 2.0x sgemm at 1024^3); `rounded` elsewhere: on Intel's cores with two 512-bit FMA units
// VDPBF16PS issues at half their rate (0.57x sgemm), and a CPU without it would otherwise
// take the portable path, several times slower than float32.
Bf16Path resolve_bf16_path(Bf16Path requested);
// Whether bf16 products run faster than float32 ones here (automatic resolves to amx or
// avx512_bf16).
bool bf16_products_are_fast();
// Whether the automatic path's kernel is worth packing both operands for an M x N product
// (bf16_products_are_fast, and for AMX both at least one tile of 16): a decode step's
// one-row products cost 2.7 times as much on the tiles as rounded copies multiplied in
// float32 (measured, decode_ctx1024_bf16).
bool bf16_kernel_pays(std::size_t M, std::size_t N);

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

// The one-row product (a decode step's): C (1 x N) = alpha * bf16(op(A)) @ bf16(op(B)) +
// beta * C, rounding B's numbers as it reads them, so it reads B once as float32's product
// does instead of writing a rounded copy first. op(A)'s row is A's first row, or A's first
// column (stride lda) when A is transposed; with beta 0, C is not read. Two paths: VDPBF16PS
// on pairs where the CPU has it (avx512_bf16 or amx asked, or automatic), float32 sums of
// the rounded numbers otherwise (portable or rounded asked); within float32's accumulation
// bound of each other.
void gemv_bf16(bool trans_a, bool trans_b, std::size_t N, std::size_t K, float alpha,
               const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta,
               float* C, Bf16Path path = Bf16Path::automatic);

// C (M x N) = alpha * bf16(op(A)) @ bf16(op(B)) + beta * C, op(X) = X or X^T, row-major with
// leading dimensions (lda, ldb: of A and B as stored); with beta 0, C is overwritten, never
// read. Asking for avx512_bf16 on a CPU without it throws std::runtime_error.
void gemm_bf16(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
               float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb,
               float beta, float* C, std::size_t ldc, Bf16Path path = Bf16Path::automatic);

}  // namespace tapegrad::kernels
