#pragma once
// bf16 matrix products, as users set them: MatmulPrecisionGuard bf16(MatmulPrecision::bf16)
// for a scope; ops/kernels/precision.hpp says what is rounded and what stays float32.
#include "ops/kernels/gemm_bf16.hpp"  // to_bf16, from_bf16
#include "ops/kernels/precision.hpp"

namespace tapegrad {

using kernels::matmul_precision;
using kernels::MatmulPrecision;
using kernels::MatmulPrecisionGuard;
using kernels::set_matmul_precision;
using kernels::from_bf16;
using kernels::to_bf16;

}  // namespace tapegrad
