#pragma once
// Deprecated: moved to nn/io/training_state.hpp, which this header forwards to for one
// release (0.1.x); it is removed after that.
#pragma message("tapegrad: \"nn/training_state.hpp\" is deprecated and will be removed: include \"nn/io/training_state.hpp\"")
#include "nn/io/training_state.hpp"
