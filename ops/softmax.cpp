#include "ops/softmax.hpp"

#include <xtensor/xbroadcast.hpp>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/kernels/softmax.hpp"

namespace tapegrad {

namespace {
kernels::RowLayout rows_along(const char* op, const Shape& s, long axis) {
  if (s.empty()) fail(op, "needs a tensor of rank >= 1, got shape ()");
  const std::size_t ax = normalize_axis(op, axis, s);
  kernels::RowLayout r;
  for (std::size_t i = 0; i < ax; ++i) r.outer *= s[i];
  r.length = s[ax];
  for (std::size_t i = ax + 1; i < s.size(); ++i) r.inner *= s[i];
  return r;
}

// The mask as bytes, addressed as mask[flat_index % period]. When the mask only lacks
// (or has size 1 in) leading axes of x, it repeats with period = its own size and is used
// as it is; any other broadcast is materialised to x's shape.
struct MaskBytes {
  std::vector<std::uint8_t> bytes;
  std::size_t period = 1;
};
MaskBytes mask_bytes(const char* op, const Mask& mask, const Shape& x) {
  const Shape m(mask.shape().begin(), mask.shape().end());
  Shape b;
  try {
    b = broadcast_shapes(op, x, m);
  } catch (const ShapeError&) {
    fail(op, "mask of shape {} does not broadcast to the scores' shape {}", shape_str(m),
         shape_str(x));
  }
  if (b != x)
    fail(op, "mask of shape {} would broadcast the scores' shape {} up to {}", shape_str(m),
         shape_str(x), shape_str(b));
  // strip leading size-1 axes, then check it is a suffix of x's shape
  std::size_t first = 0;
  while (first < m.size() && m[first] == 1) ++first;
  const Shape core(m.begin() + first, m.end());
  const bool suffix =
      core.size() <= x.size() && std::equal(core.begin(), core.end(), x.end() - core.size());
  MaskBytes out;
  if (suffix) {
    out.bytes.assign(mask.begin(), mask.end());
    out.period = std::max<std::size_t>(1, numel(core));
  } else {
    auto full = xt::broadcast(mask, x);
    out.bytes.assign(full.begin(), full.end());
    out.period = std::max<std::size_t>(1, numel(x));
  }
  return out;
}

template <class T>
Tensor<T> softmax_impl(const char* op, const Tensor<T>& x, long axis, const Mask* mask) {
  const Shape s = x.shape();
  const kernels::RowLayout r = rows_along(op, s, axis);
  MaskBytes mb;
  if (mask) mb = mask_bytes(op, *mask, s);
  Array<T> y = Array<T>::from_shape(s);
  kernels::softmax_forward<T>(r, x.data(), mask ? mb.bytes.data() : nullptr, mb.period,
                              y.data());
  // backward: dx = y * (dy - sum(dy * y)); masked entries have y = 0, and dx = 0 there
  // exactly, also in a row whose sum is NaN (0 * NaN would reach what the mask hides)
  return record<T>(op, {x}, std::move(y), [r, mb = std::move(mb), masked = mask != nullptr](
                                              BackwardContext<T>& c) {
    Array<T> dx = Array<T>::from_shape(c.grad().shape());
    kernels::softmax_backward<T>(r, c.output().data(), c.grad().data(), dx.data());
    if (masked)
      for (std::size_t i = 0; i < dx.size(); ++i)
        if (!mb.bytes[i % mb.period]) dx.data()[i] = T(0);
    c.accumulate(0, std::move(dx));
  });
}
}  // namespace

// y = exp(x - max) / sum(exp(x - max)) along axis
template <class T>
Tensor<T> softmax(const Tensor<T>& x, long axis) {
  return softmax_impl<T>("softmax", x, axis, nullptr);
}

// scores (..., Tq, Tk), mask broadcastable -> weights (..., Tq, Tk)
template <class T>
Tensor<T> masked_softmax(const Tensor<T>& x, const Mask& mask) {
  return softmax_impl<T>("masked_softmax", x, -1, &mask);
}

// y = x - max - log(sum(exp(x - max))) along axis
// backward: dx = dy - softmax(x) * sum(dy)
template <class T>
Tensor<T> log_softmax(const Tensor<T>& x, long axis) {
  const kernels::RowLayout r = rows_along("log_softmax", x.shape(), axis);
  Array<T> y = Array<T>::from_shape(x.shape());
  kernels::log_softmax_forward<T>(r, x.data(), y.data());
  return record<T>("log_softmax", {x}, std::move(y), [r](BackwardContext<T>& c) {
    Array<T> dx = Array<T>::from_shape(c.grad().shape());
    kernels::log_softmax_backward<T>(r, c.output().data(), c.grad().data(), dx.data());
    c.accumulate(0, std::move(dx));
  });
}

#define TAPEGRAD_INSTANTIATE(T)                                  \
  template Tensor<T> softmax(const Tensor<T>&, long);           \
  template Tensor<T> log_softmax(const Tensor<T>&, long);       \
  template Tensor<T> masked_softmax(const Tensor<T>&, const Mask&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
