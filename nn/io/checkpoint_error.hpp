#pragma once
// The checkpoints' error, in a header of its own: the readers that refuse a file that does
// not fit (the checkpoint loaders, the training state, the Hugging Face folders) and the
// code that only catches or maps it (the Python bindings) include it without the loaders,
// the model and xtensor.
#include <stdexcept>

namespace tapegrad {

// A checkpoint that does not fit: a missing or unexpected name, a wrong shape or dtype,
// a missing or invalid config entry. The message names the file and the entry. (A file
// that is not a readable npz at all raises NpzError from nn/io/npz.)
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tapegrad
