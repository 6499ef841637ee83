#include "autograd/shape.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "autograd/errors.hpp"

namespace tapegrad {

std::string shape_str(const Shape& shape) {
  return fmt::format("({})", fmt::join(shape, ","));
}

std::size_t numel(const Shape& shape) {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    // align from the right, as NumPy does
    const std::size_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::size_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(op, "shapes {} and {} do not broadcast (dimension {} is {} vs {})", shape_str(a),
           shape_str(b), static_cast<long>(i) - static_cast<long>(rank), da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::size_t normalize_axis(std::string_view op, long axis, const Shape& shape) {
  const long rank = static_cast<long>(shape.size());
  if (axis < -rank || axis >= rank)
    fail(op, "axis {} is out of range for a tensor of shape {} (rank {})", axis, shape_str(shape),
         rank);
  return static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
}

std::vector<std::size_t> row_major_strides(const Shape& shape) {
  std::vector<std::size_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

}  // namespace tapegrad
