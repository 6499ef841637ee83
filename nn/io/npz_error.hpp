#pragma once
// The error of the npz layer, in a header of its own so that its byte-level parts
// (zip_archive, npy) report through it without including the npz reader and xtensor.
#include <stdexcept>

#include "platform/io_error.hpp"

namespace tapegrad {

// Every failure of this layer: a missing, damaged or unwritable file, a bad entry name, a
// dtype mismatch. The message names the file, the member and what is wrong. An IoError (so
// a std::system_error and a std::runtime_error): code() holds the errno where a system
// call failed (load_npz of a missing file), 0 for a file that is there but does not read.
class NpzError : public IoError {
 public:
  using IoError::IoError;
};

}  // namespace tapegrad
