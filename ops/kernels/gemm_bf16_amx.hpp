#pragma once
// gemm_bf16's amx path (Intel's AMX tiles): its packing, its tiles and its threads.
#include <cstddef>

namespace tapegrad::kernels {

// C (M x N) = alpha * bf16(op(A)) @ bf16(op(B)) + beta * C, as gemm_bf16 with
// Bf16Path::amx; the caller has checked cpu_has_amx_bf16().
void gemm_bf16_amx(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                   float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb,
                   float beta, float* C, std::size_t ldc);

// C[r0 : r0 + rows, c0 : c0 + 32] (clipped to M x N) = alpha * tile + beta * C (with beta 0,
// C is not read), the tile 32 floats a row: where both paths' blocks meet C's edges.
void store_tile(const float* tile, std::size_t r0, std::size_t rows, std::size_t c0,
                std::size_t M, std::size_t N, float alpha, float beta, float* C,
                std::size_t ldc);

}  // namespace tapegrad::kernels
