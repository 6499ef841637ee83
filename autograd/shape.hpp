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

// The walk of an array of `shape`, in row-major order, against another array in which one
// step along axis i moves step[i] numbers (0 along an axis it is broadcast over): calls
// row(at, n, along) for each row of the last axis, whose n numbers pair with the other
// array's from `at` on, `along` = step[last] apart. shape has rank >= 1 and no zero extent.
template <class Row>
void for_each_row(const Shape& shape, const std::vector<std::size_t>& step, const Row& row) {
  const std::size_t rank = shape.size(), n = shape[rank - 1], along = step[rank - 1];
  std::vector<std::size_t> index(rank, 0);
  std::size_t at = 0;
  for (std::size_t r = 0, rows = numel(shape) / n; r < rows; ++r) {
    row(at, n, along);
    for (std::size_t a = rank - 1; a-- > 0;) {  // the other axes count like an odometer
      at += step[a];
      if (++index[a] < shape[a]) break;
      at -= step[a] * shape[a];
      index[a] = 0;
    }
  }
}

}  // namespace tapegrad
