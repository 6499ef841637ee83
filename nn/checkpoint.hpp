#pragma once
// Deprecated: moved to nn/io/checkpoint.hpp, which this header forwards to for one
// release (0.1.x); it is removed after that.
#pragma message("tapegrad: \"nn/checkpoint.hpp\" is deprecated and will be removed: include \"nn/io/checkpoint.hpp\"")
#include "nn/io/checkpoint.hpp"
