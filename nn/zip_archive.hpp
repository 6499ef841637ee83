#pragma once
// Deprecated: moved to nn/io/zip_archive.hpp, which this header forwards to for one
// release (0.1.x); it is removed after that.
#pragma message("tapegrad: \"nn/zip_archive.hpp\" is deprecated and will be removed: include \"nn/io/zip_archive.hpp\"")
#include "nn/io/zip_archive.hpp"
