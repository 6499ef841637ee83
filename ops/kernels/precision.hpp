#pragma once
// Deprecated: moved to platform/execution.hpp (below the tape, which records the precision,
// and the kernels, which read it), which this header forwards to for one release (0.1.x);
// it is removed after that.
#pragma message("tapegrad: \"ops/kernels/precision.hpp\" is deprecated and will be removed: include \"platform/execution.hpp\"")
#include "platform/execution.hpp"
