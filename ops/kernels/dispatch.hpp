#pragma once
// The one place that picks a matrix product's kernel, from what this CPU has
// (cpu_features.hpp) and the calling thread's precision (platform/execution.hpp):
// - float32 (and float64) operands: OpenBLAS's gemm and gemv, or tapegrad's small-K kernel
//   (gemm_small.hpp), by shape;
// - bf16 operands (gemm_bf16.hpp's kernels): AMX's tiles, VDPBF16PS, the same sums in plain
//   float32 arithmetic (`portable`), or operands rounded to bf16 and multiplied by the
//   float32 kernels (`rounded`).
// gemm.hpp's products and the bf16 entry points below come here; the kernels themselves
// know nothing of each other or of the CPU.
#include <cstddef>

#include "ops/kernels/gemm_small.hpp"  // Triangle

namespace tapegrad::kernels {

// The bf16 kernels (gemm_bf16.hpp):
// - amx: Intel's AMX tiles (TDPBF16PS: a 16 x 16 block of float32 sums from 16 x 32 bf16
//   operands per instruction), on the same packed pairs as avx512_bf16; the same products,
//   each pair's two added in the instruction's order, so within float32's accumulation
//   bound of the other paths rather than equal to them;
// - avx512_bf16: VDPBF16PS, 32 bf16 multiply-adds per instruction into 16 float32 sums;
// - portable: plain float32 arithmetic, the same sums in the same order as avx512_bf16;
// - rounded: copies of the operands rounded to bf16, multiplied by the float32 product
//   (OpenBLAS's sgemm or tapegrad's small-K kernel): the same products, summed in that
//   product's order, so within float32's accumulation bound of the others. It runs at
//   float32's rate, which is where bf16 products go on CPUs whose VDPBF16PS is no faster
//   than their float32 FMAs.
enum class Bf16Path { automatic, portable, avx512_bf16, rounded, amx };

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

// C (M x N) = alpha * op(A) @ op(B) + beta * C on the calling thread, row-major with leading
// dimensions, on the kernel this product takes: under bf16 precision (float only) the
// automatic bf16 kernel where it pays, gemv_bf16 for one row, else rounded copies; then one
// row through BLAS's gemv, gemm_small where it applies, BLAS's gemm for the rest; while
// reference_products() (platform/execution.hpp) is on, the reference kernel instead, whose numbers
// do not depend on the shape (one FMA chain per number, continued from C with beta 1).
// `structure` names zeros the small kernel may skip (see Triangle).
template <class T>
void product(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K, T alpha,
             const T* A, std::size_t lda, const T* B, std::size_t ldb, T beta, T* C,
             std::size_t ldc, Triangle structure = Triangle::none);

// C (M x N) = alpha * bf16(op(A)) @ bf16(op(B)) + beta * C, op(X) = X or X^T, row-major with
// leading dimensions (lda, ldb: of A and B as stored); with beta 0, C is overwritten, never
// read. Asking for avx512_bf16 or amx on a CPU without it throws std::runtime_error.
void gemm_bf16(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
               float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb,
               float beta, float* C, std::size_t ldc, Bf16Path path = Bf16Path::automatic);

// The one-row product (a decode step's): C (1 x N) = alpha * bf16(op(A)) @ bf16(op(B)) +
// beta * C, rounding B's numbers as it reads them, so it reads B once as float32's product
// does instead of writing a rounded copy first. op(A)'s row is A's first row, or A's first
// column (stride lda) when A is transposed; with beta 0, C is not read. Two kernels:
// VDPBF16PS on pairs where the CPU has it (avx512_bf16 or amx asked, or automatic), float32
// sums of the rounded numbers otherwise (portable or rounded asked); within float32's
// accumulation bound of each other.
void gemv_bf16(bool trans_a, bool trans_b, std::size_t N, std::size_t K, float alpha,
               const float* A, std::size_t lda, const float* B, std::size_t ldb, float beta,
               float* C, Bf16Path path = Bf16Path::automatic);

}  // namespace tapegrad::kernels
