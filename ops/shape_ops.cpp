#include "ops/shape_ops.hpp"

#include <algorithm>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"

namespace tapegrad {

// y = a.reshape(shape): (n...) -> (m...) with the same number of elements
// backward: da = dy.reshape(a.shape)
template <class T>
Tensor<T> reshape(const Tensor<T>& a, const Shape& shape) {
  const Shape from = a.shape();
  if (numel(from) != numel(shape))
    fail("reshape", "cannot reshape {} ({} elements) to {} ({} elements)", shape_str(from),
         numel(from), shape_str(shape), numel(shape));
  Array<T> y = a.value();
  y.reshape(shape);
  return record<T>("reshape", {a}, std::move(y), [from](BackwardContext<T>& c) {
    Array<T> g = c.take_grad();
    g.reshape(from);
    c.accumulate(0, std::move(g));
  });
}

namespace {
std::vector<std::size_t> inverse_permutation(const std::vector<std::size_t>& perm) {
  std::vector<std::size_t> inv(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = i;
  return inv;
}

// x: shape s (row-major) -> y: shape (s[perm[0]], ..., s[perm[r-1]]), row-major, with
// y[i_0, ..., i_{r-1}] = x at index i_k on axis perm[k]: y written in order, x read with the
// stride of axis perm[k] for y's axis k.
template <class T>
Array<T> permuted(const Array<T>& x, const std::vector<std::size_t>& perm) {
  const Shape s = shape_of(x);
  const std::vector<std::size_t> x_strides = row_major_strides(s);
  Shape ys(s.size());
  std::vector<std::size_t> step(s.size());
  for (std::size_t k = 0; k < s.size(); ++k) {
    ys[k] = s[perm[k]];
    step[k] = x_strides[perm[k]];
  }
  return strided_copy(x, ys, step);
}
}  // namespace

// y = a.transpose(perm): y.shape[i] = a.shape[perm[i]]
// backward: da = dy.transpose(inverse(perm))
template <class T>
Tensor<T> transpose(const Tensor<T>& a, const std::vector<std::size_t>& perm) {
  const Shape s = a.shape();
  std::vector<std::size_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool valid = perm.size() == s.size();
  for (std::size_t i = 0; valid && i < sorted.size(); ++i) valid = sorted[i] == i;
  if (!valid)
    fail("transpose", "({}) is not a permutation of the {} axes of {}", fmt::join(perm, ","),
         s.size(), shape_str(s));
  // Copied into a row-major array: a transposed view passed on as a buffer would be read
  // in the wrong order.
  return record<T>("transpose", {a}, permuted(a.value(), perm),
                   [inv = inverse_permutation(perm)](BackwardContext<T>& c) {
                     c.accumulate(0, permuted(c.grad(), inv));
                   });
}

// y = swapaxes(a, axis1, axis2), a transpose that exchanges two axes
template <class T>
Tensor<T> swapaxes(const Tensor<T>& a, long axis1, long axis2) {
  const Shape s = a.shape();
  const std::size_t i = normalize_axis("swapaxes", axis1, s);
  const std::size_t j = normalize_axis("swapaxes", axis2, s);
  std::vector<std::size_t> perm(s.size());
  for (std::size_t k = 0; k < perm.size(); ++k) perm[k] = k;
  std::swap(perm[i], perm[j]);
  return transpose(a, perm);
}

namespace {

// A row-major shape seen along axis ax as (outer, s[ax], inner): a range of the axis is
// `outer` contiguous runs of (stop - start) * inner values, copied with plain copies.
struct AxisRuns {
  std::size_t outer = 1, inner = 1;
  AxisRuns(const Shape& s, std::size_t ax) {
    for (std::size_t i = 0; i < ax; ++i) outer *= s[i];
    for (std::size_t i = ax + 1; i < s.size(); ++i) inner *= s[i];
  }
  // `count` positions of the axis from src (its axis src_len long, from src_at) into dst
  // (its axis dst_len long, at dst_at).
  template <class T>
  void copy(const T* src, std::size_t src_len, std::size_t src_at, T* dst, std::size_t dst_len,
            std::size_t dst_at, std::size_t count) const {
    for (std::size_t o = 0; o < outer; ++o)
      std::copy_n(src + (o * src_len + src_at) * inner, count * inner,
                  dst + (o * dst_len + dst_at) * inner);
  }
};

}  // namespace

// y = a[..., start:stop, ...] along axis
// backward: da = zeros(a.shape); da[..., start:stop, ...] = dy
template <class T>
Tensor<T> slice(const Tensor<T>& a, long axis, std::size_t start, std::size_t stop) {
  const Shape s = a.shape();
  if (s.empty()) fail("slice", "cannot slice a rank-0 tensor");
  const std::size_t ax = normalize_axis("slice", axis, s);
  if (start > stop || stop > s[ax])
    fail("slice", "range [{}, {}) is out of bounds for axis {} of {}", start, stop, axis,
         shape_str(s));
  const AxisRuns runs(s, ax);
  const std::size_t n = stop - start;
  Shape ys = s;
  ys[ax] = n;
  Array<T> y = Array<T>::from_shape(ys);
  runs.copy(a.data(), s[ax], start, y.data(), n, 0, n);
  return record<T>("slice", {a}, std::move(y), [s, ax, start, n, runs](BackwardContext<T>& c) {
    Array<T> g = zeros_array<T>(s);
    runs.copy(c.grad().data(), n, 0, g.data(), s[ax], start, n);
    c.accumulate(0, std::move(g));
  });
}

// y = concatenate(parts, axis)
// backward: d(part k) = dy[..., offset_k : offset_k + size_k, ...]
template <class T>
Tensor<T> concatenate(const std::vector<Tensor<T>>& parts, long axis) {
  if (parts.empty()) fail("concatenate", "needs at least one tensor");
  const Shape first = parts[0].shape();
  if (first.empty()) fail("concatenate", "cannot concatenate rank-0 tensors");
  const std::size_t ax = normalize_axis("concatenate", axis, first);
  Shape out = first;
  out[ax] = 0;
  std::vector<std::size_t> offsets, sizes;
  for (const Tensor<T>& p : parts) {
    Shape ps = p.shape();
    Shape a = ps, b = first;
    bool ok = ps.size() == first.size();
    if (ok) {
      a[ax] = b[ax] = 0;
      ok = a == b;
    }
    if (!ok)
      fail("concatenate", "shape {} does not match {} outside axis {}", shape_str(ps),
           shape_str(first), axis);
    offsets.push_back(out[ax]);
    sizes.push_back(ps[ax]);
    out[ax] += ps[ax];
  }
  const AxisRuns runs(out, ax);
  Array<T> y = Array<T>::from_shape(out);
  for (std::size_t k = 0; k < parts.size(); ++k)
    runs.copy(parts[k].data(), sizes[k], 0, y.data(), out[ax], offsets[k], sizes[k]);
  return record<T>("concatenate", parts, std::move(y),
                   [out, ax, offsets, sizes, runs](BackwardContext<T>& c) {
                     for (std::size_t k = 0; k < offsets.size(); ++k) {
                       if (!c.wants(k)) continue;
                       Shape ps = out;
                       ps[ax] = sizes[k];
                       Array<T> g = Array<T>::from_shape(ps);
                       runs.copy(c.grad().data(), out[ax], offsets[k], g.data(), sizes[k], 0, sizes[k]);
                       c.accumulate(k, std::move(g));
                     }
                   });
}

namespace {
// a viewed as (outer, n, inner) around `axis`
struct AxisSplit {
  std::size_t outer = 1, n = 0, inner = 1;
};
AxisSplit split_at(const Shape& s, std::size_t axis) {
  AxisSplit p;
  for (std::size_t i = 0; i < axis; ++i) p.outer *= s[i];
  p.n = s[axis];
  for (std::size_t i = axis + 1; i < s.size(); ++i) p.inner *= s[i];
  return p;
}
}  // namespace

// y = repeat_interleave(a, r, axis): a viewed (outer, n, inner) -> y (outer, n*r, inner),
// y[o, i*r + t, :] = a[o, i, :] for t < r
// backward: da[o, i, :] = sum over t < r of dy[o, i*r + t, :]
template <class T>
Tensor<T> repeat_interleave(const Tensor<T>& a, std::size_t repeats, long axis) {
  const Shape s = a.shape();
  if (s.empty()) fail("repeat_interleave", "cannot repeat a rank-0 tensor along an axis");
  const std::size_t ax = normalize_axis("repeat_interleave", axis, s);
  const AxisSplit p = split_at(s, ax);
  Shape out = s;
  out[ax] *= repeats;
  Array<T> y = Array<T>::from_shape(out);
  const T* src = a.data();
  T* dst = y.data();
  for (std::size_t o = 0; o < p.outer; ++o)
    for (std::size_t i = 0; i < p.n; ++i)
      for (std::size_t t = 0; t < repeats; ++t)
        std::copy_n(src + (o * p.n + i) * p.inner, p.inner,
                    dst + ((o * p.n + i) * repeats + t) * p.inner);
  return record<T>("repeat_interleave", {a}, std::move(y), [s, p, repeats](BackwardContext<T>& c) {
    Array<T> g = zeros_array<T>(s);
    const T* dy = c.grad().data();
    for (std::size_t o = 0; o < p.outer; ++o)
      for (std::size_t i = 0; i < p.n; ++i)
        for (std::size_t t = 0; t < repeats; ++t) {
          const T* from = dy + ((o * p.n + i) * repeats + t) * p.inner;
          T* to = g.data() + (o * p.n + i) * p.inner;
          for (std::size_t e = 0; e < p.inner; ++e) to[e] += from[e];
        }
    c.accumulate(0, std::move(g));
  });
}

#define TAPEGRAD_INSTANTIATE(T)                                                       \
  template Tensor<T> reshape(const Tensor<T>&, const Shape&);                        \
  template Tensor<T> transpose(const Tensor<T>&, const std::vector<std::size_t>&);   \
  template Tensor<T> swapaxes(const Tensor<T>&, long, long);                         \
  template Tensor<T> concatenate(const std::vector<Tensor<T>>&, long);               \
  template Tensor<T> slice(const Tensor<T>&, long, std::size_t, std::size_t);          \
  template Tensor<T> repeat_interleave(const Tensor<T>&, std::size_t, long);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
