#pragma once
// Deprecated: moved to platform/file_io.hpp (below nn/, so that text/ and tasks/ read and
// write files without the file formats), which this header forwards to for one release
// (0.1.x); it is removed after that.
#pragma message("tapegrad: \"nn/io/file_io.hpp\" is deprecated and will be removed: include \"platform/file_io.hpp\"")
#include "platform/file_io.hpp"
