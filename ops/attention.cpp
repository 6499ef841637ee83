// Attention as a composition of differentiable ops (matmul_nt, mul, masked_softmax,
// matmul, reshape, transpose): backward is the chain rule through those ops, each of which
// is gradchecked on its own, so nothing here needs a hand-written derivative.
#include "ops/attention.hpp"

#include <cmath>
#include <limits>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "ops/attention_flash.hpp"
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
AttentionResult<T> sdpa_core(const char* op, const Tensor<T>& Q, const Tensor<T>& K,
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

// The reference path of the spec, every step an op the tape differentiates:
// q (B, Tq, H*dh) -> (B, Tq, H, dh) -> (B, H, Tq, dh); k, v (B, Tk, KV*d) -> (B, KV, Tk, d)
// -> repeat_interleave along heads -> (B, H, Tk, d); attend under the spec's mask; then
// out (B, H, Tq, dv) -> (B, Tq, H, dv) -> (B, Tq, H*dv). The head axis must sit in front of
// the token axis: a reshape without the transpose would mix heads as if they were tokens.
template <class T>
Tensor<T> heads_first(const Tensor<T>& t, std::size_t B, std::size_t T_, std::size_t n,
                      std::size_t width) {
  return transpose(reshape(t, Shape{B, T_, n, width}), {0, 2, 1, 3});
}

// k or v (B, Tk, KV*width) -> (B, H, Tk, width): kv head h / group serves query head h,
// interleaved (k0 k0 k1 k1), never tiled (k0 k1 k0 k1)
template <class T>
Tensor<T> shared_heads(const Tensor<T>& t, const AttentionDims& d, std::size_t width) {
  const Tensor<T> h = heads_first(t, d.B, d.Tk, d.kv_heads, width);
  return d.group() == 1 ? h : repeat_interleave(h, d.group(), 1);
}

// The (Tq, Tk) mask of a rule, broadcast over batch and heads: masking is about position.
Mask mask_of(const kernels::AttentionRule& rule, std::size_t Tq) {
  Mask m = Mask::from_shape({Tq, rule.Tk});
  for (std::size_t r = 0; r < Tq; ++r)
    for (std::size_t j = 0; j < rule.Tk; ++j) m(r, j) = rule.visible(r, j);
  return m;
}

std::optional<Mask> spec_mask(const AttentionDims& d) {
  if (!d.rule.causal) return std::nullopt;
  return mask_of(d.rule, d.Tq);
}

// The rule's additive bias (1, H, Tq, Tk), a constant: rule.bias(h, r, j) of every score.
template <class T>
Tensor<T> position_bias(const AttentionDims& d) {
  const kernels::AttentionRule& rule = d.rule;
  Array<T> b = Array<T>::from_shape({1, d.heads, d.Tq, d.Tk});
  T* p = b.data();
  for (std::size_t h = 0; h < d.heads; ++h)
    for (std::size_t r = 0; r < d.Tq; ++r)
      for (std::size_t j = 0; j < d.Tk; ++j) *p++ = T(rule.bias(h, r, j));
  return Tensor<T>(std::move(b));
}

// qh (B, H, Tq, dh) @ kh (B, H, Tk, dh)^T -> the scores the softmax sees (B, H, Tq, Tk):
// scaled, soft-capped c * tanh(s / c), then biased, each step an op on the tape
template <class T>
Tensor<T> composed_scores(const Tensor<T>& qh, const Tensor<T>& kh, const AttentionDims& d) {
  Tensor<T> s = mul(matmul_nt(qh, kh), T(d.scale));
  const double cap = d.rule.softcap;
  if (cap > 0) s = mul(tanh(mul(s, T(1 / cap))), T(cap));
  if (d.rule.adds_bias()) s = add(s, position_bias<T>(d));
  return s;
}

// (1, 1, Tq, Tk): 0 where the mask shows a key, -inf where it hides one, a constant
template <class T>
Tensor<T> mask_as_scores(const Mask& mask) {
  Array<T> b = Array<T>::from_shape({1, 1, mask.shape()[0], mask.shape()[1]});
  for (std::size_t i = 0; i < mask.size(); ++i)
    b.data()[i] = mask.data()[i] ? T(0) : -std::numeric_limits<T>::infinity();
  return Tensor<T>(std::move(b));
}

// With stages, the scores reach stages->scores masked (-inf where hidden) and what it
// returns goes through the softmax under the same mask (so a hook cannot unhide a key, and
// a hidden key's score receives a zero gradient); the weights pass stages->pattern before
// they mix the values.
template <class T>
AttentionResult<T> composed(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                            const AttentionDims& d, const AttentionStages<T>* stages = nullptr) {
  const Tensor<T> qh = heads_first(q, d.B, d.Tq, d.heads, d.head_dim);
  const Tensor<T> kh = shared_heads(k, d, d.head_dim), vh = shared_heads(v, d, d.v_head_dim);
  Tensor<T> scores = composed_scores(qh, kh, d);
  // masked scores drop out before the exponential; a row with nothing allowed is 0
  const std::optional<Mask> mask = spec_mask(d);
  if (stages && stages->scores) scores = stages->scores(mask ? add(scores, mask_as_scores<T>(*mask)) : scores);
  Tensor<T> weights = mask ? masked_softmax(scores, *mask) : softmax(scores, -1);
  if (stages && stages->pattern) weights = stages->pattern(weights);
  // (B, H, Tq, Tk) @ (B, H, Tk, dv) -> (B, H, Tq, dv); transpose back before the merge, or
  // the reshape interleaves positions and heads
  const Tensor<T> merged = reshape(transpose(matmul(weights, vh), {0, 2, 1, 3}),
                                   Shape{d.B, d.Tq, d.heads * d.v_head_dim});
  return {merged, weights};
}

// Every path after the one check. `op` is what the user called, for the messages. Stages
// (hooks on the scores and weights) exist on the composed path only.
template <class T>
AttentionResult<T> attend(const char* op, const Tensor<T>& q, const Tensor<T>& k,
                          const Tensor<T>& v, const AttentionDims& d, AttentionPath path,
                          const AttentionStages<T>* stages = nullptr) {
  // the spec checked the scale as a double; in float it may still overflow or vanish
  const T s = T(d.scale);
  if (!std::isfinite(s) || s <= T(0))
    fail(op, "scale {} is not a positive finite number in this precision (q is {})", d.scale,
         q.shape_string());
  if (path == AttentionPath::composed) return composed(q, k, v, d, stages);
  // q, k, v -> out (B, Tq, H*dv) directly; the weights are never formed, so none returned
  if (path == AttentionPath::flash) return {flash_attention(q, k, v, d), Tensor<T>()};
  // q, k -> weights (B, H, Tq, Tk); weights, v -> heads' outputs merged (B, Tq, H*dv)
  const Tensor<T> w = attention_weights(q, k, d);
  return {attention_mix(w, v, d), w};
}

// The shared body of the multi-head entry points; `op` names the one the user called.
// Self-attention is the spec with q, k, v = x @ Wq, x @ Wk, x @ Wv. Without `want_weights`
// a long sequence takes the flash path, which never forms them.
template <class T>
AttentionResult<T> multi_head(const char* op, const Tensor<T>& x, const Tensor<T>& Wq,
                              const Tensor<T>& Wk, const Tensor<T>& Wv, const Tensor<T>& Wo,
                              const AttentionSpec& spec, bool fused, bool want_weights,
                              bool square_weights = false) {
  const Shape xs = x.shape();
  if (xs.size() != 3) fail(op, "x must be (B, T, D), got {}", shape_str(xs));
  const std::size_t D = xs[2];
  // the entry points by heads take (D, D) weights: named before the spec sees their widths
  const std::pair<const char*, const Tensor<T>*> weights[] = {
      {"Wq", &Wq}, {"Wk", &Wk}, {"Wv", &Wv}, {"Wo", &Wo}};
  for (const auto& [name, w] : weights)
    if (square_weights && !w->has_shape({D, D}))
      fail(op, "{} must be (D, D) = ({},{}), got {} (x is {})", name, D, D, w->shape_string(),
           shape_str(xs));
  const std::pair<const char*, const Tensor<T>*> projections[] = {
      {"Wq", &Wq}, {"Wk", &Wk}, {"Wv", &Wv}};
  for (const auto& [name, w] : projections)
    if (w->shape().size() != 2 || w->shape()[0] != D)
      fail(op, "{} must be (D={}, width), got {} (x is {})", name, D, w->shape_string(),
           shape_str(xs));
  // checked on the projections' shapes before any product is computed
  const auto projected = [&](const Tensor<T>& w) { return Shape{xs[0], xs[1], w.shape()[1]}; };
  const AttentionDims d = check_attention_spec(op, projected(Wq), projected(Wk), projected(Wv), spec);
  const std::size_t merged = d.heads * d.v_head_dim;
  if (!Wo.has_shape({merged, D}))
    fail(op, "Wo must be (heads*v_head_dim, D) = ({},{}), got {} (x is {})", merged, D,
         Wo.shape_string(), shape_str(xs));
  // (B, T, D) @ (D, width) -> (B, T, width)
  const Tensor<T> q = matmul(x, Wq), k = matmul(x, Wk), v = matmul(x, Wv);
  const AttentionPath path =
      fused ? default_attention_path(d.Tk, want_weights) : AttentionPath::composed;
  const AttentionResult<T> r = attend(op, q, k, v, d, path);
  // y = merged heads @ Wo: (B, T, heads*v_head_dim) @ (heads*v_head_dim, D) -> (B, T, D)
  return {matmul(r.out, Wo), r.weights};
}

AttentionSpec multi_head_spec(std::size_t heads, bool causal, std::optional<double> scale) {
  AttentionSpec spec;
  spec.heads = heads;
  spec.causal = causal;
  spec.scale = scale;
  return spec;
}

}  // namespace

Mask causal_mask(std::size_t T) { return causal_mask(T, T); }

// Query row r is at absolute position i = Tk - Tq + r (the queries are the newest Tq
// positions, as when decoding after a cache of Tk - Tq keys); it sees key j iff j <= i.
Mask causal_mask(std::size_t Tq, std::size_t Tk) {
  if (Tq > Tk)
    fail("causal_mask", "needs Tq <= Tk (the queries are the last Tq of Tk positions), got "
                        "Tq={}, Tk={}", Tq, Tk);
  return mask_of(attention_rule(causal_spec(1), Tq, Tk, 1), Tq);
}

// The same positions; key j is visible iff 0 <= i - j < window: the window counts the
// query itself, so window 1 sees only itself (the off-by-one of HF #39408 is `<=`).
Mask sliding_window_mask(std::size_t Tq, std::size_t Tk, std::size_t window) {
  if (window == 0)
    fail("sliding_window_mask", "window must be at least 1 (the query itself), got 0 "
                                "(Tq={}, Tk={})", Tq, Tk);
  if (Tq > Tk)
    fail("sliding_window_mask", "needs Tq <= Tk (the queries are the last Tq of Tk positions), "
                                "got Tq={}, Tk={}", Tq, Tk);
  return mask_of(attention_rule(causal_spec(1, 0, window), Tq, Tk, 1), Tq);
}

template <class T>
AttentionResult<T> scaled_dot_product_attention(const Tensor<T>& Q, const Tensor<T>& K,
                                                const Tensor<T>& V, const std::optional<Mask>& mask,
                                                std::optional<double> scale) {
  return sdpa_core<T>("scaled_dot_product_attention", Q, K, V, mask ? &*mask : nullptr, scale);
}

template <class T>
AttentionResult<T> attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                             const AttentionSpec& spec, AttentionPath path) {
  const AttentionDims d = check_attention_spec("attention", q.shape(), k.shape(), v.shape(), spec);
  return attend("attention", q, k, v, d, path);
}

template <class T>
AttentionResult<T> attention_staged(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                    const AttentionSpec& spec, const AttentionStages<T>& stages) {
  const AttentionDims d = check_attention_spec("attention", q.shape(), k.shape(), v.shape(), spec);
  return attend("attention", q, k, v, d, AttentionPath::composed, &stages);
}

// q (B, Tq, H*dh) . k (B, Tk, KV*dh) -> scores (B, H, Tq, Tk) = scale * q.k, -inf where the
// spec's mask hides a key: what the softmax of the composed path sees, as a constant.
template <class T>
Tensor<T> attention_scores(const Tensor<T>& q, const Tensor<T>& k, const AttentionSpec& spec) {
  const AttentionDims d = check_attention_spec("attention_scores", q.shape(), k.shape(), k.shape(), spec);
  NoGradGuard no_grad;
  Tensor<T> scores = composed_scores(heads_first(q, d.B, d.Tq, d.heads, d.head_dim),
                                     shared_heads(k, d, d.head_dim), d);
  if (const std::optional<Mask> mask = spec_mask(d)) {
    T* s = scores.value().data();
    const std::size_t rows = d.B * d.heads;
    for (std::size_t r = 0; r < rows; ++r, s += d.Tq * d.Tk)
      for (std::size_t i = 0; i < d.Tq * d.Tk; ++i)
        if (!mask->data()[i]) s[i] = -std::numeric_limits<T>::infinity();
  }
  return scores;
}

template <class T>
Tensor<T> multi_head_attention(const Tensor<T>& x, const Tensor<T>& Wq, const Tensor<T>& Wk,
                               const Tensor<T>& Wv, const Tensor<T>& Wo, const AttentionSpec& spec) {
  return multi_head<T>("multi_head_attention", x, Wq, Wk, Wv, Wo, spec, true, false).out;
}

template <class T>
Tensor<T> multi_head_attention(const Tensor<T>& x, const Tensor<T>& Wq, const Tensor<T>& Wk,
                               const Tensor<T>& Wv, const Tensor<T>& Wo, std::size_t heads,
                               bool causal) {
  return multi_head<T>("multi_head_attention", x, Wq, Wk, Wv, Wo,
                       multi_head_spec(heads, causal, std::nullopt), true, false, true).out;
}

template <class T>
AttentionResult<T> multi_head_attention_with_weights(const Tensor<T>& x, const Tensor<T>& Wq,
                                                     const Tensor<T>& Wk, const Tensor<T>& Wv,
                                                     const Tensor<T>& Wo, const AttentionSpec& spec,
                                                     bool fused) {
  return multi_head<T>("multi_head_attention_with_weights", x, Wq, Wk, Wv, Wo, spec, fused, true);
}

template <class T>
AttentionResult<T> multi_head_attention_with_weights(const Tensor<T>& x, const Tensor<T>& Wq,
                                                     const Tensor<T>& Wk, const Tensor<T>& Wv,
                                                     const Tensor<T>& Wo, std::size_t heads,
                                                     const MultiHeadOptions& options) {
  return multi_head<T>("multi_head_attention_with_weights", x, Wq, Wk, Wv, Wo,
                       multi_head_spec(heads, options.causal, options.scale), options.fused, true,
                       true);
}

#define TAPEGRAD_INSTANTIATE(T)                                                              \
  template AttentionResult<T> scaled_dot_product_attention(                                 \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const std::optional<Mask>&,      \
      std::optional<double>);                                                                     \
  template AttentionResult<T> attention(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, \
                                        const AttentionSpec&, AttentionPath);                 \
  template AttentionResult<T> attention_staged(const Tensor<T>&, const Tensor<T>&,            \
                                               const Tensor<T>&, const AttentionSpec&,        \
                                               const AttentionStages<T>&);                    \
  template Tensor<T> attention_scores(const Tensor<T>&, const Tensor<T>&, const AttentionSpec&); \
  template Tensor<T> multi_head_attention(const Tensor<T>&, const Tensor<T>&,               \
                                          const Tensor<T>&, const Tensor<T>&,               \
                                          const Tensor<T>&, const AttentionSpec&);          \
  template Tensor<T> multi_head_attention(const Tensor<T>&, const Tensor<T>&,               \
                                          const Tensor<T>&, const Tensor<T>&,               \
                                          const Tensor<T>&, std::size_t, bool);             \
  template AttentionResult<T> multi_head_attention_with_weights(                            \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,                \
      const Tensor<T>&, const AttentionSpec&, bool);                                         \
  template AttentionResult<T> multi_head_attention_with_weights(                            \
      const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, const Tensor<T>&,                \
      const Tensor<T>&, std::size_t, const MultiHeadOptions&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
