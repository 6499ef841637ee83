#pragma once
// Moved to platform/file_io.hpp (below nn/, so that text/ and tasks/ read and write files
// without the file formats), which this header forwards to. Deprecated: it is removed
// after one release (0.1.x); it prints no note yet because nn/io/pretrained.cpp and the
// programs' shared code still include it while they are rewritten and moved.
#include "platform/file_io.hpp"
