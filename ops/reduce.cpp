#include "ops/reduce.hpp"

#include <algorithm>
#include <set>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/kernels/elementwise.hpp"
#include "ops/kernels/softmax.hpp"

namespace tapegrad {

namespace {
// Sorted, distinct, non-negative axes, and the result shape with them kept as size 1.
struct Reduction {
  std::vector<std::size_t> axes;
  Shape kept;     // input shape with reduced axes set to 1
  Shape result;   // kept, or with the reduced axes removed
  std::size_t count = 1;  // elements folded into each result element
};
Reduction plan(const char* op, const Shape& s, const std::vector<long>& axes, bool keepdims) {
  std::set<std::size_t> unique;
  for (long a : axes) {
    if (!unique.insert(normalize_axis(op, a, s)).second)
      fail(op, "axis {} is listed twice for shape {}", a, shape_str(s));
  }
  Reduction r;
  r.axes.assign(unique.begin(), unique.end());
  r.kept = s;
  for (auto a : r.axes) {
    r.count *= s[a];
    r.kept[a] = 1;
  }
  for (std::size_t i = 0; i < s.size(); ++i)
    if (keepdims || !unique.count(i)) r.result.push_back(r.kept[i]);
  return r;
}

// a *= factor in place (the mean's 1/n), through the elementwise kernel
template <class T>
void scale_inplace(Array<T>& a, T factor) {
  using kernels::extents;
  kernels::binary(kernels::Binary::mul, a.data(), extents(a.shape()), &factor,
                  kernels::kScalarShape, a.data(), extents(a.shape()));
}

// a: shape S -> y: S with the reduced axes 1 (kept) -> r.result; y = factor * sum
// backward: dy (kept) broadcast back to S, times factor
template <class T>
Tensor<T> sum_impl(const char* op, const Tensor<T>& a, const Reduction& r, T factor) {
  const Shape s = a.shape();
  Array<T> y = summed_to<T>(a.value(), r.kept);
  if (factor != T(1)) scale_inplace(y, factor);
  y.reshape(r.result);
  return record<T>(op, {a}, std::move(y), [s, kept = r.kept, factor](BackwardContext<T>& c) {
    Array<T> g = c.take_grad();
    g.reshape(kept);
    Array<T> da = broadcast_to(g, s);
    if (factor != T(1)) scale_inplace(da, factor);
    c.accumulate(0, std::move(da));
  });
}
}  // namespace

// y = sum(a over axes)
template <class T>
Tensor<T> sum(const Tensor<T>& a, const std::vector<long>& axes, bool keepdims) {
  return sum_impl<T>("sum", a, plan("sum", a.shape(), axes, keepdims), T(1));
}

// y = sum(a over axes) / count
template <class T>
Tensor<T> mean(const Tensor<T>& a, const std::vector<long>& axes, bool keepdims) {
  const Reduction r = plan("mean", a.shape(), axes, keepdims);
  if (r.count == 0) fail("mean", "cannot average over an empty axis of {}", a.shape_string());
  return sum_impl<T>("mean", a, r, T(1) / static_cast<T>(r.count));
}

namespace {
std::vector<long> all_axes(std::size_t rank) {
  std::vector<long> axes(rank);
  for (std::size_t i = 0; i < rank; ++i) axes[i] = static_cast<long>(i);
  return axes;
}
}  // namespace

template <class T>
Tensor<T> sum(const Tensor<T>& a) { return sum(a, all_axes(a.dim()), false); }
template <class T>
Tensor<T> mean(const Tensor<T>& a) { return mean(a, all_axes(a.dim()), false); }

// y = max(a along axis); backward: da[argmax] = dy (first maximal element per row)
template <class T>
Tensor<T> max(const Tensor<T>& a, long axis, bool keepdims) {
  const Shape s = a.shape();
  if (s.empty()) fail("max", "needs a tensor of rank >= 1, got shape ()");
  const std::size_t ax = normalize_axis("max", axis, s);
  if (s[ax] == 0) fail("max", "axis {} of {} is empty", axis, shape_str(s));
  kernels::RowLayout r;
  for (std::size_t i = 0; i < ax; ++i) r.outer *= s[i];
  r.length = s[ax];
  for (std::size_t i = ax + 1; i < s.size(); ++i) r.inner *= s[i];
  Shape out;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (i != ax) out.push_back(s[i]);
    else if (keepdims) out.push_back(1);
  Array<T> y = Array<T>::from_shape(out);
  std::vector<std::size_t> argmax(r.outer * r.inner);
  const T* x = a.data();
  for (std::size_t o = 0; o < r.outer; ++o)
    for (std::size_t i = 0; i < r.inner; ++i) {
      const std::size_t base = o * r.length * r.inner + i;
      std::size_t best = 0;
      for (std::size_t k = 1; k < r.length; ++k)
        if (x[base + k * r.inner] > x[base + best * r.inner]) best = k;
      argmax[o * r.inner + i] = base + best * r.inner;
      y.data()[o * r.inner + i] = x[base + best * r.inner];
    }
  return record<T>("max", {a}, std::move(y), [s, argmax](BackwardContext<T>& c) {
    Array<T> da = Array<T>::from_shape(s);
    da.fill(T(0));
    const T* dy = c.grad().data();
    for (std::size_t j = 0; j < argmax.size(); ++j) da.data()[argmax[j]] += dy[j];
    c.accumulate(0, std::move(da));
  });
}

#define TAPEGRAD_INSTANTIATE(T)                                                   \
  template Tensor<T> sum(const Tensor<T>&);                                      \
  template Tensor<T> mean(const Tensor<T>&);                                     \
  template Tensor<T> sum(const Tensor<T>&, const std::vector<long>&, bool);      \
  template Tensor<T> mean(const Tensor<T>&, const std::vector<long>&, bool);     \
  template Tensor<T> max(const Tensor<T>&, long, bool);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
