#pragma once
// Deprecated: moved to nn/io/npy.hpp, which this header forwards to for one
// release (0.1.x); it is removed after that.
#pragma message("tapegrad: \"nn/npy.hpp\" is deprecated and will be removed: include \"nn/io/npy.hpp\"")
#include "nn/io/npy.hpp"
