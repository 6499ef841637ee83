#pragma once
// Reductions: sum and mean over all elements or over axes, max along one axis.
#include <vector>

#include "autograd/tensor.hpp"

namespace tapegrad {

// Over every element: a rank-0 result.
template <class T> Tensor<T> sum(const Tensor<T>& a);
template <class T> Tensor<T> mean(const Tensor<T>& a);
// Over the listed axes (negative count from the end); keepdims keeps them as size 1.
template <class T> Tensor<T> sum(const Tensor<T>& a, const std::vector<long>& axes, bool keepdims = false);
template <class T> Tensor<T> mean(const Tensor<T>& a, const std::vector<long>& axes, bool keepdims = false);
// Largest element along one axis; the gradient goes to the first maximal element.
template <class T> Tensor<T> max(const Tensor<T>& a, long axis, bool keepdims = false);

}  // namespace tapegrad
