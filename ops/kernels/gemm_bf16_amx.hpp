#pragma once
// Deprecated: moved to ops/kernels/isa/gemm_bf16_amx.hpp, which this header forwards to for one
// release (0.1.x); it is removed after that.
#pragma message("tapegrad: \"ops/kernels/gemm_bf16_amx.hpp\" is deprecated and will be removed: include \"ops/kernels/isa/gemm_bf16_amx.hpp\"")
#include "ops/kernels/isa/gemm_bf16_amx.hpp"
