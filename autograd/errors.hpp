#pragma once
// The one place that formats errors. Every op reports bad input through `fail(op, ...)`,
// so messages always read "op: what is wrong (shapes)"; the tape (GraphError), the npz layer
// (NpzError) and checkpoints (CheckpointError) build theirs with fail_with<Error>(op, ...).
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "autograd/shape.hpp"  // messages name shapes with shape_str

namespace tapegrad {

// Thrown for every user error: a wrong shape, rank, axis or argument.
class ShapeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Thrown when a graph is used in a way its gradient cannot survive: a backward through
// history an earlier backward freed, through another thread's tape, or after a value the
// backward needs was edited in place. Not an argument error: the same call is right on a
// graph used correctly, so a logic_error (PyTorch raises RuntimeError for these).
class GraphError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Thrown when a Tensor handle that holds nothing (default-constructed) is used: a field
// never assigned, an optional bias that is absent. Not an argument's shape or value, so a
// logic_error of its own.
class UndefinedTensorError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Thrown when grad() is read on a tensor no gradient has reached: backward has not run
// yet, the tensor does not require grad, or the loss does not depend on it.
class NoGradientError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

template <class Error, class... Args>
[[noreturn]] void fail_with(std::string_view op, fmt::format_string<Args...> format,
                            Args&&... args) {
  throw Error(fmt::format("{}: {}", op, fmt::format(format, std::forward<Args>(args)...)));
}

template <class... Args>
[[noreturn]] void fail(std::string_view op, fmt::format_string<Args...> format, Args&&... args) {
  fail_with<ShapeError>(op, format, std::forward<Args>(args)...);
}

}  // namespace tapegrad
