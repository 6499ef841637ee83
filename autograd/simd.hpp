#pragma once
// Deprecated: moved to platform/simd.hpp, which this header forwards to for one
// release (0.1.x); it is removed after that.
#pragma message("tapegrad: \"autograd/simd.hpp\" is deprecated and will be removed: include \"platform/simd.hpp\"")
#include "platform/simd.hpp"
