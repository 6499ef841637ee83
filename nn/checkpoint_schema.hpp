#pragma once
// Deprecated: moved to nn/io/checkpoint_schema.hpp, which this header forwards to for one
// release (0.1.x); it is removed after that.
#pragma message("tapegrad: \"nn/checkpoint_schema.hpp\" is deprecated and will be removed: include \"nn/io/checkpoint_schema.hpp\"")
#include "nn/io/checkpoint_schema.hpp"
