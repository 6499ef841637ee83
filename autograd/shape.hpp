#pragma once
// Shapes: the type, how it prints, and the arithmetic shared by every op (NumPy
// broadcasting, axis normalisation).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad {

using Shape = std::vector<std::size_t>;

// "(2,6,16)"; a scalar (rank 0) prints as "()".
std::string shape_str(const Shape& shape);

std::size_t numel(const Shape& shape);

// NumPy broadcasting of two shapes; throws ShapeError naming `op` and both shapes.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);

// Maps a possibly negative axis into [0, rank); throws naming `op` and the shape.
std::size_t normalize_axis(std::string_view op, long axis, const Shape& shape);

// Row-major strides in elements.
std::vector<std::size_t> row_major_strides(const Shape& shape);

}  // namespace tapegrad
