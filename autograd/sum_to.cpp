#include <xtensor/xbuilder.hpp>
#include <xtensor/xreducer.hpp>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"

namespace tapegrad {

// grad has the broadcast (output) shape; `shape` is the input's. Sum over the leading
// axes the input did not have and over the axes where the input had size 1, evaluated
// into a container (a lazy keep_dims reducer inside an expression is wrong in xtensor
// 0.24.3), then reshape to the input's shape.
template <class T>
Array<T> sum_to(Array<T> grad, const Shape& shape) {
  const Shape from = shape_of(grad);
  if (from == shape) return grad;
  if (from.size() < shape.size())
    fail("sum_to", "cannot reduce a gradient of shape {} to the larger shape {}",
         shape_str(from), shape_str(shape));
  const std::size_t lead = from.size() - shape.size();
  std::vector<std::size_t> axes;
  for (std::size_t i = 0; i < from.size(); ++i) {
    const bool leading = i < lead;
    if (leading || (shape[i - lead] == 1 && from[i] != 1)) {
      axes.push_back(i);
    } else if (shape[i - lead] != from[i]) {
      fail("sum_to", "a gradient of shape {} does not broadcast from shape {}",
           shape_str(from), shape_str(shape));
    }
  }
  // xtensor 0.24.3's immediate reducer reads out of bounds (segfault) when the reduced
  // input is empty; the sum over nothing is zero.
  if (grad.size() == 0) return Array<T>(xt::zeros<T>(shape));
  Array<T> reduced = xt::sum(grad, axes, xt::evaluation_strategy::immediate);
  reduced.reshape(shape);
  return reduced;
}

template Array<float> sum_to(Array<float>, const Shape&);
template Array<double> sum_to(Array<double>, const Shape&);

}  // namespace tapegrad
