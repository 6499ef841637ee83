#pragma once
// Deprecated: moved to nn/io/untrusted_text.hpp, which this header forwards to for one
// release (0.1.x); it is removed after that.
#pragma message("tapegrad: \"nn/untrusted_text.hpp\" is deprecated and will be removed: include \"nn/io/untrusted_text.hpp\"")
#include "nn/io/untrusted_text.hpp"
