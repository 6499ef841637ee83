#pragma once
// Deprecated: moved to platform/file_io.hpp (by way of nn/io/file_io.hpp), which this header
// forwards to for one release (0.1.x); it is removed after that.
#pragma message("tapegrad: \"nn/file_io.hpp\" is deprecated and will be removed: include \"platform/file_io.hpp\"")
#include "platform/file_io.hpp"
