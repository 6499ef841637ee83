#pragma once
// The one place that formats argument and shape errors. Every op reports bad input
// through `fail(op, ...)`, so messages always read "op: what is wrong (shapes)".
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace tapegrad {

using Shape = std::vector<std::size_t>;

// Thrown for every user error: a wrong shape, rank, axis or argument.
class ShapeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// "(2,6,16)"; a scalar (rank 0) prints as "()".
std::string shape_str(const Shape& shape);

template <class... Args>
[[noreturn]] void fail(std::string_view op, fmt::format_string<Args...> format, Args&&... args) {
  throw ShapeError(fmt::format("{}: {}", op, fmt::format(format, std::forward<Args>(args)...)));
}

}  // namespace tapegrad
