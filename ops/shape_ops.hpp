#pragma once
// Ops that move data without arithmetic. Every result is a new contiguous array.
#include <vector>

#include "autograd/tensor.hpp"

namespace tapegrad {

// Same elements in row-major order, new shape of equal size.
template <class T> Tensor<T> reshape(const Tensor<T>& a, const Shape& shape);
// Permutes the axes: result axis i is input axis perm[i] (NumPy's transpose(a, perm)).
template <class T> Tensor<T> transpose(const Tensor<T>& a, const std::vector<std::size_t>& perm);
// Exchanges two axes (negative axes count from the end).
template <class T> Tensor<T> swapaxes(const Tensor<T>& a, long axis1, long axis2);
// Joins tensors whose shapes agree except along `axis`.
template <class T> Tensor<T> concatenate(const std::vector<Tensor<T>>& parts, long axis);
// Elements [start, stop) along `axis`.
template <class T> Tensor<T> slice(const Tensor<T>& a, long axis, std::size_t start, std::size_t stop);
// Each element along `axis` repeated `repeats` times in place (torch.repeat_interleave with
// an int): [a, b] -> [a, a, b, b], NOT the tiling [a, b, a, b]. The gradient of an element
// is the sum over its copies.
template <class T> Tensor<T> repeat_interleave(const Tensor<T>& a, std::size_t repeats, long axis);

}  // namespace tapegrad
