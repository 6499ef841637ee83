// Attention as a composition of differentiable ops (matmul_nt, mul, masked_softmax,
// matmul, reshape, transpose): backward is the chain rule through those ops, each of which
// is gradchecked on its own, so nothing here needs a hand-written derivative.
#include "ops/attention.hpp"

#include <cmath>

#include "autograd/shape.hpp"
#include "ops/attention_fused.hpp"
#include "ops/elementwise.hpp"
#include "ops/matmul.hpp"
#include "ops/shape_ops.hpp"

namespace tapegrad {

namespace {

Shape leading(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

Shape mask_shape(const Mask& mask) { return Shape(mask.shape().begin(), mask.shape().end()); }

// Q, K, V and the mask checked up front, so a mistake is reported as the caller's call
// with every shape in it, not as a failure deep inside matmul or softmax.
// Returns the scores' shape: broadcast(Q lead, K lead) + (Tq, Tk).
Shape check_attention_args(const char* op, const Shape& q, const Shape& k, const Shape& v,
                           const Mask* mask) {
  const std::string shapes =
      fmt::format("Q is {}, K is {}, V is {}", shape_str(q), shape_str(k), shape_str(v));
  if (q.size() < 2 || k.size() < 2 || v.size() < 2)
    fail(op, "Q, K and V need rank >= 2 (..., T, d) ({})", shapes);
  const std::size_t Tq = q[q.size() - 2], dk = q.back();
  const std::size_t Tk = k[k.size() - 2];
  if (k.back() != dk) fail(op, "d_k differs between Q ({}) and K ({}) ({})", dk, k.back(), shapes);
  if (v[v.size() - 2] != Tk)
    fail(op, "K has Tk={} keys but V has {} values ({})", Tk, v[v.size() - 2], shapes);
  Shape lead;
  try {
    lead = broadcast_shapes(op, broadcast_shapes(op, leading(q), leading(k)), leading(v));
  } catch (const ShapeError&) {
    fail(op, "leading dimensions {}, {} and {} do not broadcast together ({})",
         shape_str(leading(q)), shape_str(leading(k)), shape_str(leading(v)), shapes);
  }
  Shape scores = broadcast_shapes(op, leading(q), leading(k));
  scores.push_back(Tq);
  scores.push_back(Tk);
  if (mask) {
    const Shape m = mask_shape(*mask);
    bool fits = m.size() <= scores.size();
    for (std::size_t i = 0; fits && i < m.size(); ++i) {
      const std::size_t d = m[m.size() - 1 - i], s = scores[scores.size() - 1 - i];
      fits = d == s || d == 1;
    }
    if (!fits)
      fail(op, "mask of shape {} does not broadcast to the scores' shape {} ({})", shape_str(m),
           shape_str(scores), shapes);
  }
  return scores;
}

template <class T>
AttentionResult<T> attention(const char* op, const Tensor<T>& Q, const Tensor<T>& K,
                             const Tensor<T>& V, const Mask* mask, std::optional<double> scale) {
  const Shape qs = Q.shape();
  check_attention_args(op, qs, K.shape(), V.shape(), mask);
  const std::size_t dk = qs.back();
  if (!scale && dk == 0)
    fail(op, "the default scale 1/sqrt(d_k) is undefined for d_k=0 (Q is {}, K is {})",
         shape_str(qs), K.shape_string());
  const T s = scale ? T(*scale) : T(1) / std::sqrt(T(dk));
  if (!std::isfinite(s)) fail(op, "scale must be finite, got {}", s);

  // scores = Q @ swapaxes(K, -1, -2) * scale: Q (..., Tq, d_k), K (..., Tk, d_k)
  //   -> (..., Tq, Tk); matmul_nt reads K through BLAS's transpose flag, no copy
  Tensor<T> scores = mul(matmul_nt(Q, K), s);
  // weights = softmax(scores, -1), masked scores -inf *before* the exponential (inside
  // masked_softmax), so they drop out of the denominator; a row with nothing allowed is 0
  Tensor<T> weights = mask ? masked_softmax(scores, *mask) : softmax(scores, -1);
  // out = weights @ V: (..., Tq, Tk) @ (..., Tk, d_v) -> (..., Tq, d_v)
  Tensor<T> out = matmul(weights, V);
  return {out, weights};
}

// The shared body of both multi-head entry points; `op` names the one the user called.
template <class T>
AttentionResult<T> multi_head(const char* op, const Tensor<T>& x, const Tensor<T>& Wq,
                              const Tensor<T>& Wk, const Tensor<T>& Wv, const Tensor<T>& Wo,
                              std::size_t heads, const MultiHeadOptions& options) {
  const Shape xs = x.shape();
  if (xs.size() != 3) fail(op, "x must be (B, T, D), got {}", shape_str(xs));
  const std::size_t B = xs[0], T_ = xs[1], D = xs[2];
  const std::pair<const char*, const Tensor<T>*> weights[] = {
      {"Wq", &Wq}, {"Wk", &Wk}, {"Wv", &Wv}, {"Wo", &Wo}};
  for (const auto& [name, w] : weights)
    if (!w->has_shape({D, D}))
      fail(op, "{} must be (D, D) = ({},{}), got {} (x is {})", name, D, D, w->shape_string(),
           shape_str(xs));
  if (heads == 0) fail(op, "heads must be at least 1, got 0 (x is {})", shape_str(xs));
  if (D % heads != 0)
    fail(op, "D={} is not divisible by heads={} (x is {})", D, heads, shape_str(xs));
  const std::size_t dh = D / heads;
  if (!options.scale && dh == 0)
    fail(op, "the default scale 1/sqrt(D/heads) is undefined for D=0 (x is {})", shape_str(xs));
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(double(dh));

  if (options.fused) {
    // The same computation without the split/merge copies: the fused ops read head h as
    // the column block [h*dh, (h+1)*dh) of each (B, T, D) projection, which is exactly
    // what reshape (B, T, heads, dh) + transpose (0, 2, 1, 3) select (tested equal).
    // (B, T, D) @ (D, D) -> (B, T, D)
    const Tensor<T> q = matmul(x, Wq), k = matmul(x, Wk), v = matmul(x, Wv);
    // -> weights (B, heads, T, T); -> heads' outputs merged into (B, T, D)
    const Tensor<T> w = attention_weights(q, k, heads, static_cast<T>(scale), options.causal);
    return {matmul(attention_mix(w, v, heads, options.causal), Wo), w};
  }

  // (B, T, D) @ (D, D) -> (B, T, D) -> (B, T, heads, dh) -> (B, heads, T, dh): the head
  // axis must sit in front of the token axis, or attention would mix heads as if they
  // were tokens (the trap of np-05 check 8)
  auto split = [&](const Tensor<T>& w) {
    return transpose(reshape(matmul(x, w), Shape{B, T_, heads, dh}), {0, 2, 1, 3});
  };
  const Tensor<T> q = split(Wq), k = split(Wk), v = split(Wv);
  // one (T, T) triangle broadcast over batch and heads: masking is about token position
  const Mask causal = causal_mask(T_);
  // (B, heads, T, dh) -> out (B, heads, T, dh), weights (B, heads, T, T)
  AttentionResult<T> r = attention<T>(op, q, k, v, options.causal ? &causal : nullptr, scale);
  // (B, heads, T, dh) -> (B, T, heads, dh) -> (B, T, D): transpose back before the merge,
  // or the reshape interleaves positions and heads
  const Tensor<T> merged = reshape(transpose(r.out, {0, 2, 1, 3}), Shape{B, T_, D});
  // y = merged @ Wo: (B, T, D) @ (D, D) -> (B, T, D)
  return {matmul(merged, Wo), r.weights};
}

}  // namespace

Mask causal_mask(std::size_t T) {
  Mask m = Mask::from_shape({T, T});
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < T; ++j) m(i, j) = j <= i;
  return m;
}

template <class T>
AttentionResult<T> scaled_dot_product_attention(const Tensor<T>& Q, const Tensor<T>& K,
                                                const Tensor<T>& V, const std::optional<Mask>& mask,
                                                std::optional<double> scale) {
  return attention<T>("scaled_dot_product_attention", Q, K, V, mask ? &*mask : nullptr, scale);
}

template <class T>
Tensor<T> multi_head_attention(const Tensor<T>& x, const Tensor<T>& Wq, const Tensor<T>& Wk,
                               const Tensor<T>& Wv, const Tensor<T>& Wo, std::size_t heads,
                               bool causal) {
  MultiHeadOptions options;
  options.causal = causal;
  return multi_head<T>("multi_head_attention", x, Wq, Wk, Wv, Wo, heads, options).out;
}

template <class T>
AttentionResult<T> multi_head_attention_with_weights(const Tensor<T>& x, const Tensor<T>& Wq,
                                                     const Tensor<T>& Wk, const Tensor<T>& Wv,
                                                     const Tensor<T>& Wo, std::size_t heads,
                                                     const MultiHeadOptions& options) {
  return multi_head<T>("multi_head_attention_with_weights", x, Wq, Wk, Wv, Wo, heads, options);
}

#define TAPEGRAD_INSTANTIATE(T)                                                              \
  template AttentionResult<T> scaled_dot_product_attention(                                 \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const std::optional<Mask>&,      \
      std::optional<double>);                                                                     \
  template Tensor<T> multi_head_attention(const Tensor<T>&, const Tensor<T>&,               \
                                          const Tensor<T>&, const Tensor<T>&,               \
                                          const Tensor<T>&, std::size_t, bool);             \
  template AttentionResult<T> multi_head_attention_with_weights(                            \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,                \
      const Tensor<T>&, std::size_t, const MultiHeadOptions&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
