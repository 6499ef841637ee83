#pragma once
// Deprecated: moved to nn/io/npz.hpp, which this header forwards to for one
// release (0.1.x); it is removed after that.
#pragma message("tapegrad: \"nn/npz.hpp\" is deprecated and will be removed: include \"nn/io/npz.hpp\"")
#include "nn/io/npz.hpp"
