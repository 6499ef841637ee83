#include "ops/linear_cross_entropy.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/attention_spec.hpp"  // valid_softcap
#include "ops/kernels/elementwise.hpp"
#include "ops/kernels/gemm.hpp"
#include "ops/kernels/rowwise.hpp"

namespace tapegrad {

namespace {

constexpr std::size_t kRowMultiple = 16;  // chunks of rows: see run_head's softcap

std::size_t round_up(std::size_t n, std::size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// What the forward checked and the backward reuses.
struct HeadShape {
  std::size_t N = 0, d = 0, V = 0, rows = 0;  // rows: per chunk
  bool transposed = false;
  double softcap = 0;
};

// chunk (m, V) = h[r0 : r0 + m] (m, d) @ W (d, V), or @ E^T for E (V, d) when transposed, each
// product the rows r0.. of the whole product's (matmul's, matmul_nt's: the same flags);
// then, with a soft-cap c, chunk = c * tanh(chunk * (1 / c)) in the softcap op's three
// passes. Those take xsimd's tanh over whole vectors and std's over the tail of the array
// they are given: a chunk of a multiple of 16 rows holds a multiple of every vector width,
// so only the last chunk has a tail, and it is the whole array's.
template <class T>
void run_head(const HeadShape& s, const T* h, const T* w, std::size_t r0, std::size_t m, T* chunk) {
  kernels::gemm<T>(false, s.transposed, m, s.V, s.d, T(1), h + r0 * s.d, w, T(0), chunk);
  if (s.softcap <= 0) return;
  const T cap = T(s.softcap), inv = T(1 / s.softcap);
  const std::size_t n = m * s.V;
  const std::size_t dims[1] = {n};
  const kernels::Extents e{dims, 1};
  kernels::binary(kernels::Binary::mul, chunk, e, &inv, kernels::kScalarShape, chunk, e);
  kernels::unary(kernels::Unary::tanh, chunk, chunk, n);
  kernels::binary(kernels::Binary::mul, chunk, e, &cap, kernels::kScalarShape, chunk, e);
}

// The gradient of one chunk of rows r0 .. r0 + m from its logits z (m, V) and the rows' lse:
//   dz[n, :] = scale * (softmax(z[n, :]) - onehot(t_n)) on kept rows, 0 on ignored
//   with a soft-cap: dlogits = dz * (1 - (z / c)^2), the softcap op's backward
//   dh[chunk] = dlogits (m, V) @ W^T (V, d)            (tied: dlogits @ E)
//   dW += h[chunk]^T (d, m) @ dlogits (m, V)            (tied: dE += dlogits^T @ h[chunk])
// the first chunk writes dW (beta 0), the others add to it (beta 1): each a part of the
// whole product's sum over the rows. dz is z itself without a soft-cap (whose backward
// reads z); z is spent either way.
template <class T>
struct HeadGradients {
  Array<T> dh, dw;  // h's and W's shapes; either may be empty when not wanted
  bool has_h = false, has_w = false;
};

template <class T>
void add_chunk_gradient(const HeadShape& s, const std::vector<std::int64_t>& kept,
                        const std::vector<T>& lse, T scale, const T* h, const T* w,
                        std::size_t r0, std::size_t m, T* z, T* dz_own, HeadGradients<T>& g) {
  const std::size_t V = s.V, d = s.d;
  T* dz = s.softcap > 0 ? dz_own : z;
  for (std::size_t n = r0; n < r0 + m; ++n) {
    T* dr = dz + (n - r0) * V;
    if (kept[n] < 0) {
      std::fill(dr, dr + V, T(0));
      continue;
    }
    kernels::softmax_row_from_lse(z + (n - r0) * V, V, lse[n], scale, dr);
    dr[kept[n]] -= scale;
  }
  if (s.softcap > 0) kernels::softcap_backward_inplace(z, dz, m * V, T(s.softcap));
  if (g.has_h) kernels::gemm<T>(false, !s.transposed, m, d, V, T(1), dz, w, T(0), g.dh.data() + r0 * d);
  if (g.has_w) {
    const T beta = r0 == 0 ? T(0) : T(1);
    if (s.transposed)
      kernels::gemm<T>(true, false, V, d, m, T(1), dz, h + r0 * d, beta, g.dw.data());
    else
      kernels::gemm<T>(true, false, d, V, m, T(1), h + r0 * d, dz, beta, g.dw.data());
  }
}

// Room for the gradients asked for; all zeros when no row is kept (nothing writes them).
template <class T>
HeadGradients<T> head_gradients(const Shape& h_shape, const Shape& w_shape, bool want_h,
                                bool want_w, std::size_t count) {
  HeadGradients<T> g;
  g.has_h = want_h, g.has_w = want_w;
  auto make = [count](const Shape& shape) {
    return count > 0 ? Array<T>::from_shape(shape) : zeros_array<T>(shape);
  };
  if (want_h) g.dh = make(h_shape);
  if (want_w) g.dw = make(w_shape);
  return g;
}

// The rows' chunks again, their logits computed a second time, for the gradients times
// `upstream`: what the backward runs when the forward's gradients are gone (a second
// backward through a retained graph) or were not made for an input that now wants one.
template <class T>
HeadGradients<T> recompute_gradients(const HeadShape& s, const std::vector<std::int64_t>& kept,
                                     const std::vector<T>& lse, std::size_t count, T upstream,
                                     const Array<T>& h, const Array<T>& w, bool want_h, bool want_w) {
  HeadGradients<T> g = head_gradients<T>(shape_of(h), shape_of(w), want_h, want_w, count);
  if (count == 0) return g;
  const std::size_t rows = std::min(s.rows, s.N);
  Array<T> z = Array<T>::from_shape({rows, s.V});
  Array<T> dz_own = s.softcap > 0 ? Array<T>::from_shape({rows, s.V}) : Array<T>();
  const T scale = upstream / static_cast<T>(count);
  for (std::size_t r0 = 0; r0 < s.N; r0 += s.rows) {
    const std::size_t m = std::min(s.rows, s.N - r0);
    run_head(s, h.data(), w.data(), r0, m, z.data());
    add_chunk_gradient(s, kept, lse, scale, h.data(), w.data(), r0, m, z.data(), dz_own.data(), g);
  }
  return g;
}

// a *= factor, with + 0 turning a -0 (an ignored row's +0 times a negative factor) into the
// +0 that the products give when the factor is folded into dz before them
template <class T>
void scale_in_place(Array<T>& a, T factor) {
  T* p = a.data();
  const std::size_t n = a.size();
#pragma omp simd
  for (std::size_t i = 0; i < n; ++i) p[i] = p[i] * factor + T(0);
}

}  // namespace

std::size_t default_chunk_rows(std::size_t vocab, std::size_t bytes_per_value) {
  const std::size_t budget = std::size_t(32) << 20;
  const std::size_t rows = budget / std::max<std::size_t>(1, vocab * bytes_per_value);
  return round_up(std::max<std::size_t>(rows, 256), kRowMultiple);
}

// h: (N, d) @ W: (d, V) -> logits (chunk of rows, V) [-> c tanh(logits / c)] -> loss ():
//   loss = (1/count) * sum over kept rows n of (logsumexp(z[n, :]) - z[n, t_n]),
//   z the (capped) logits, kept = target != ignore_index, count = number of kept rows;
// the rows a chunk at a time, each chunk's logits dropped once its rows' lse are taken.
template <class T>
Tensor<T> linear_cross_entropy(const Tensor<T>& h, const Tensor<T>& weight, const Indices& targets,
                               const LinearCrossEntropyOptions& o) {
  const Shape hs = h.shape(), ws = weight.shape();
  const Shape ts(targets.shape().begin(), targets.shape().end());
  if (hs.empty() || ws.size() != 2)
    fail("linear_cross_entropy", "h must be (..., d) and weight a matrix, got h {} and weight {}",
         shape_str(hs), shape_str(ws));
  HeadShape s;
  s.transposed = o.transposed;
  s.d = hs.back();
  s.V = o.transposed ? ws[0] : ws[1];
  if ((o.transposed ? ws[1] : ws[0]) != s.d)
    fail("linear_cross_entropy", "h {} does not fit weight {}: expected weight {}", shape_str(hs),
         shape_str(ws), o.transposed ? fmt::format("(V, {})", s.d) : fmt::format("({}, V)", s.d));
  if (ts != Shape(hs.begin(), hs.end() - 1))
    fail("linear_cross_entropy", "targets of shape {} do not match h {}: expected targets of shape {}",
         shape_str(ts), shape_str(hs), shape_str(Shape(hs.begin(), hs.end() - 1)));
  if (!(o.softcap >= 0) || !valid_softcap(o.softcap))
    fail("linear_cross_entropy", "softcap must be 0 (off) or in [{}, {}], got {}", kMinSoftcap,
         kMaxSoftcap, o.softcap);
  s.softcap = o.softcap;
  s.N = targets.size();
  const std::size_t V = s.V;
  s.rows = std::min(round_up(o.chunk_rows > 0 ? o.chunk_rows : default_chunk_rows(V, sizeof(T)),
                             kRowMultiple),
                    round_up(std::max<std::size_t>(s.N, 1), kRowMultiple));
  // kept[n] = target class, or -1 for an ignored row (cross_entropy's checks and message)
  std::vector<std::int64_t> kept(s.N);
  std::size_t count = 0;
  for (std::size_t n = 0; n < s.N; ++n) {
    const std::int64_t t = targets.data()[n];
    if (t == o.ignore_index) {
      kept[n] = -1;
      continue;
    }
    if (t < 0 || static_cast<std::uint64_t>(t) >= V)
      fail("linear_cross_entropy",
           "target {} at flat position {} is out of range [0, V={}) and is not ignore_index={} "
           "(h {}, weight {})",
           t, n, V, o.ignore_index, shape_str(hs), shape_str(ws));
    kept[n] = t;
    ++count;
  }
  std::vector<T> lse(s.N, T(0));
  double total = 0.0;  // in row order, in double, as cross_entropy sums
  // When the loss will be differentiated, each chunk's gradient for an upstream gradient of
  // 1 is taken while its logits are at hand, so the backward never computes them again
  // (the head's products cost 3 times the forward's, not 4)
  const bool record_grad = will_record<T>({h, weight});
  auto made = std::make_shared<HeadGradients<T>>();
  if (record_grad)
    *made = head_gradients<T>(hs, ws, h.requires_grad(), weight.requires_grad(), count);
  if (count > 0) {
    const std::size_t rows = std::min(s.rows, s.N);
    Array<T> chunk = Array<T>::from_shape({rows, V});
    Array<T> dz_own = record_grad && s.softcap > 0 ? Array<T>::from_shape({rows, V}) : Array<T>();
    for (std::size_t r0 = 0; r0 < s.N; r0 += s.rows) {
      const std::size_t m = std::min(s.rows, s.N - r0);
      run_head(s, h.data(), weight.data(), r0, m, chunk.data());
      for (std::size_t n = r0; n < r0 + m; ++n) {
        if (kept[n] < 0) continue;
        const T* zr = chunk.data() + (n - r0) * V;
        lse[n] = kernels::logsumexp_row(zr, V);
        total += static_cast<double>(lse[n]) - static_cast<double>(zr[kept[n]]);
      }
      if (record_grad)
        add_chunk_gradient(s, kept, lse, T(1) / static_cast<T>(count), h.data(), weight.data(), r0,
                           m, chunk.data(), dz_own.data(), *made);
    }
  }
  Array<T> loss = Array<T>::from_shape(Shape{});
  loss() = count == 0 ? T(0) : static_cast<T>(total / static_cast<double>(count));
  // backward: the forward's gradients times the upstream gradient g (bit for bit the
  // gradients for g folded into dz when g is 1 or a power of two, else to rounding); a
  // second backward, or an input that asks only now, takes the chunks again
  return record<T>(
      "linear_cross_entropy", {h, weight}, std::move(loss),
      [s, kept = std::move(kept), lse = std::move(lse), count, made](BackwardContext<T>& c) {
        const bool want_h = c.wants(0), want_w = c.wants(1);
        const T upstream = c.grad().data()[0];
        HeadGradients<T> g;
        if ((made->has_h || !want_h) && (made->has_w || !want_w)) {
          g = std::move(*made);
          *made = HeadGradients<T>();
          if (upstream != T(1) && count > 0) {
            if (g.has_h) scale_in_place(g.dh, upstream);
            if (g.has_w) scale_in_place(g.dw, upstream);
          }
        } else {
          g = recompute_gradients(s, kept, lse, count, upstream, c.input(0), c.input(1), want_h, want_w);
        }
        if (want_h) c.accumulate(0, std::move(g.dh));
        if (want_w) c.accumulate(1, std::move(g.dw));
      });
}

template Tensor<float> linear_cross_entropy(const Tensor<float>&, const Tensor<float>&,
                                            const Indices&, const LinearCrossEntropyOptions&);
template Tensor<double> linear_cross_entropy(const Tensor<double>&, const Tensor<double>&,
                                             const Indices&, const LinearCrossEntropyOptions&);

}  // namespace tapegrad
