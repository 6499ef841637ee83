#pragma once
// The error of the file-format layer, in a header of its own so that the byte-level parts
// (file_io, zip_archive) report through it without including the npz reader and xtensor.
#include <stdexcept>

namespace tapegrad {

// Every failure of this layer: a missing, damaged or unwritable file, a bad entry name, a
// dtype mismatch. The message names the file, the member and what is wrong.
class NpzError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tapegrad
