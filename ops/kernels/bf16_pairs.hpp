#pragma once
// Deprecated: moved to ops/kernels/isa/bf16_pairs.hpp, which this header forwards to for one
// release (0.1.x); it is removed after that.
#pragma message("tapegrad: \"ops/kernels/bf16_pairs.hpp\" is deprecated and will be removed: include \"ops/kernels/isa/bf16_pairs.hpp\"")
#include "ops/kernels/isa/bf16_pairs.hpp"
