#include <algorithm>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"

namespace tapegrad {

// Plain loops: xtensor's reducer and broadcast cost this file 4.8 CPU seconds to compile,
// and its immediate reducer read out of bounds on an empty input.
namespace {

// How a shape `small` that broadcasts to `big` (rank <= big's) lines up with it: step[i] is
// how far one step along big's axis i moves in small, 0 along the axes broadcast over (the
// leading ones small lacks and those where it has size 1). `op` names the caller in errors.
std::vector<std::size_t> broadcast_steps(const char* op, const Shape& big, const Shape& small) {
  if (big.size() < small.size())
    fail(op, "shape {} does not broadcast to shape {} of lower rank", shape_str(small),
         shape_str(big));
  const std::size_t lead = big.size() - small.size();
  std::vector<std::size_t> step(big.size(), 0);
  std::size_t stride = 1;
  for (std::size_t i = big.size(); i-- > lead;) {
    const std::size_t have = small[i - lead];
    if (have == big[i]) {
      step[i] = stride;
    } else if (have != 1) {
      fail(op, "shape {} does not broadcast to shape {}", shape_str(small), shape_str(big));
    }
    stride *= have;
  }
  return step;
}

}  // namespace

template <class T>
Array<T> sum_to(Array<T> grad, const Shape& shape) {
  const auto& from = grad.shape();
  if (std::equal(from.begin(), from.end(), shape.begin(), shape.end())) return grad;
  return summed_to<T>(grad, shape);
}

// grad: the broadcast shape -> `shape`: each number of the result is the sum of the numbers
// broadcasting copied it to, added in grad's row-major order.
template <class T>
Array<T> summed_to(const Array<T>& grad, const Shape& shape) {
  const Shape from = shape_of(grad);
  const std::vector<std::size_t> step = broadcast_steps("sum_to", from, shape);
  if (from.empty()) return grad;  // a rank-0 gradient to a rank-0 shape: itself
  Array<T> out = zeros_array<T>(shape);
  if (grad.size() == 0) return out;
  const T* g = grad.data();
  for_each_row(from, step, [&](std::size_t at, std::size_t n, std::size_t along) {
    T* to = out.data() + at;
    if (along == 0) {
      T total = *to;
      for (std::size_t k = 0; k < n; ++k) total += g[k];
      *to = total;
    } else {
      for (std::size_t k = 0; k < n; ++k) to[k] += g[k];
    }
    g += n;
  });
  return out;
}

template <class T>
Array<T> strided_copy(const Array<T>& x, const Shape& shape, const std::vector<std::size_t>& step) {
  Array<T> out = Array<T>::from_shape(shape);
  if (shape.empty()) {
    out.data()[0] = x.data()[0];
    return out;
  }
  if (out.size() == 0) return out;
  T* to = out.data();
  for_each_row(shape, step, [&](std::size_t at, std::size_t n, std::size_t along) {
    for (std::size_t k = 0; k < n; ++k) to[k] = x.data()[at + k * along];
    to += n;
  });
  return out;
}

// x: `from` -> `shape`, which `from` broadcasts to: each number copied to every place
// broadcasting puts it.
template <class T>
Array<T> broadcast_to(const Array<T>& x, const Shape& shape) {
  return strided_copy(x, shape, broadcast_steps("broadcast_to", shape, shape_of(x)));
}

template Array<float> sum_to(Array<float>, const Shape&);
template Array<double> sum_to(Array<double>, const Shape&);
template Array<float> summed_to(const Array<float>&, const Shape&);
template Array<double> summed_to(const Array<double>&, const Shape&);
template Array<float> strided_copy(const Array<float>&, const Shape&, const std::vector<std::size_t>&);
template Array<double> strided_copy(const Array<double>&, const Shape&,
                                    const std::vector<std::size_t>&);
template Array<float> broadcast_to(const Array<float>&, const Shape&);
template Array<double> broadcast_to(const Array<double>&, const Shape&);

}  // namespace tapegrad
