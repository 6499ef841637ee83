#pragma once
// gemm_bf16's amx path (Intel's AMX tiles): its packing, its tiles and its threads.
// Compiled for AMX alone: call it only where cpu_features().amx_bf16 (ops/kernels/dispatch.cpp
// decides).
#include <cstddef>

namespace tapegrad::kernels {

// C (M x N) = alpha * bf16(op(A)) @ bf16(op(B)) + beta * C, as gemm_bf16 with
// Bf16Path::amx; the caller has checked cpu_features().amx_bf16.
void gemm_bf16_amx(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                   float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb,
                   float beta, float* C, std::size_t ldc);

}  // namespace tapegrad::kernels
