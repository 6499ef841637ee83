#pragma once
// Shape arithmetic shared by every op: NumPy broadcasting and axis normalisation.
#include <cstddef>
#include <string_view>
#include <vector>

#include "autograd/errors.hpp"

namespace tapegrad {

std::size_t numel(const Shape& shape);

// NumPy broadcasting of two shapes; throws ShapeError naming `op` and both shapes.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);

// Maps a possibly negative axis into [0, rank); throws naming `op` and the shape.
std::size_t normalize_axis(std::string_view op, long axis, const Shape& shape);

// Row-major strides in elements.
std::vector<std::size_t> row_major_strides(const Shape& shape);

}  // namespace tapegrad
