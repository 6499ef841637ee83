#include "nn/attention.hpp"

#include <algorithm>
#include <cmath>

#include "autograd/tape.hpp"  // grad_enabled
#include "nn/kv_cache.hpp"
#include "ops/attention_decode.hpp"
#include "ops/elementwise.hpp"
#include "ops/matmul.hpp"
#include "ops/shape_ops.hpp"

namespace tapegrad {

namespace {

AttentionConfig gpt2_attention(std::size_t d_model, std::size_t heads, double qkv_std,
                               double out_std, std::optional<double> scale) {
  AttentionConfig c;
  c.d_model = d_model;
  c.spec.heads = heads;
  c.spec.scale = scale;
  c.qkv_std = qkv_std;
  c.out_std = out_std;
  return c;
}

// The projections' sizes and every argument check come from check_attention_spec, the one
// check of every attention path; it is run here on the shapes the projections will have.
AttentionSpec checked_spec(const AttentionConfig& c) {
  AttentionSpec s = c.spec;
  if (c.d_model == 0 || s.heads == 0)
    fail("MultiHeadAttention", "d_model={} and heads={} must be positive", c.d_model, s.heads);
  if (s.head_dim == 0 && c.d_model % s.heads != 0)
    fail("MultiHeadAttention", "d_model={} is not divisible by heads={} (or set head_dim)",
         c.d_model, s.heads);
  s.kv_heads = resolve_kv_heads(s.heads, s.kv_heads);
  if (s.head_dim == 0) s.head_dim = c.d_model / s.heads;
  s.causal = true;
  check_attention_spec("MultiHeadAttention", {1, 1, s.heads * s.head_dim},
                       {1, 1, s.kv_heads * s.head_dim}, {1, 1, s.kv_heads * s.head_dim}, s);
  if (c.rope) check_rope_spec("MultiHeadAttention", s.head_dim, *c.rope);
  return s;
}

// RMSNorm over each head's slice: (B, T, heads*dh) viewed (B, T, heads, dh), normalised
// over dh with one gain shared by the heads, viewed back.
template <class T>
Tensor<T> per_head(const Norm<T>& norm, const Tensor<T>& x, std::size_t heads, std::size_t dh) {
  const Shape s = x.shape();
  return reshape(norm(reshape(x, Shape{s[0], s[1], heads, dh})), s);
}

// q (B, T, heads*dh) viewed (B, T, heads, dh), each head times its own scalar t (heads, 1),
// viewed back: the head's scores q.k are multiplied by t, and d/dt flows through mul.
template <class T>
Tensor<T> times_temperature(const Tensor<T>& q, const Tensor<T>& t, std::size_t heads,
                            std::size_t dh) {
  const Shape s = q.shape();
  return reshape(reshape(q, Shape{s[0], s[1], heads, dh}) * t, s);
}

}  // namespace

template <class T>
MultiHeadAttention<T>::MultiHeadAttention(const AttentionConfig& c, Generator& gen)
    : d_model_(c.d_model), spec_(checked_spec(c)), rope_(c.rope) {
  const std::size_t q_width = spec_.heads * spec_.head_dim, kv_width = spec_.kv_heads * spec_.head_dim;
  // a bias draws nothing from gen, so the weights of a model with biases are those without
  auto bias = [&](const char* name, std::size_t width, bool wanted) {
    return wanted ? this->register_parameter(name, init::constant<T>({width}, 0.0)) : Tensor<T>();
  };
  Wq_ = this->register_parameter("Wq", init::normal<T>({c.d_model, q_width}, gen, c.qkv_std));
  bq_ = bias("bq", q_width, c.qkv_bias);
  Wk_ = this->register_parameter("Wk", init::normal<T>({c.d_model, kv_width}, gen, c.qkv_std));
  bk_ = bias("bk", kv_width, c.qkv_bias);
  Wv_ = this->register_parameter("Wv", init::normal<T>({c.d_model, kv_width}, gen, c.qkv_std));
  bv_ = bias("bv", kv_width, c.qkv_bias);
  Wo_ = this->register_parameter("Wo", init::normal<T>({q_width, c.d_model}, gen, c.out_std));
  bo_ = bias("bo", c.d_model, c.out_bias);
  if (c.qk_norm) {
    q_norm_.emplace(NormKind::rms_norm, spec_.head_dim, c.norm_eps);
    k_norm_.emplace(NormKind::rms_norm, spec_.head_dim, c.norm_eps);
    this->register_module("q_norm", *q_norm_);
    this->register_module("k_norm", *k_norm_);
    for (Norm<T>* norm : {&*q_norm_, &*k_norm_})
      for (Tensor<T>& gain : norm->parameters()) {
        Array<T>& g = gain.value();
        std::fill(g.begin(), g.end(), T(c.qk_norm_gain));
      }
  }
  if (c.learned_temperature)
    temperature_ = this->register_parameter(
        "temperature", init::constant<T>({spec_.heads, 1}, default_attention_scale(spec_.head_dim)));
}

template <class T>
void MultiHeadAttention<T>::set_head_mask(const std::vector<bool>& keep) {
  if (!keep.empty() && keep.size() != spec_.heads)
    fail("MultiHeadAttention::set_head_mask", "the mask has {} entries for {} heads", keep.size(),
         spec_.heads);
  head_keep_ = keep;
  head_mask_ = Tensor<T>();
  if (keep.empty() || std::all_of(keep.begin(), keep.end(), [](bool b) { return b; })) return;
  head_mask_ = Tensor<T>::zeros({spec_.heads * spec_.head_dim});
  T* m = head_mask_.value().data();
  for (std::size_t h = 0; h < spec_.heads; ++h)
    if (keep[h]) std::fill(m + h * spec_.head_dim, m + (h + 1) * spec_.head_dim, T(1));
}

// merged (B, T, heads*dh) [* head mask (heads*dh), zeroing the ablated heads] @ Wo [+ bo]
// -> (B, T, D); bo is no head's, so an ablation keeps it
template <class T>
Tensor<T> MultiHeadAttention<T>::output(const Tensor<T>& merged) const {
  return linear(head_mask_.defined() ? merged * head_mask_ : merged, Wo_, bo_);
}

// q (B, T, heads*dh), k and v (B, T, kv_heads*dh) -> the heads' outputs merged (B, T,
// heads*dh), through the hook points at the scores and the pattern when a run has them.
template <class T>
Tensor<T> MultiHeadAttention<T>::attend_full(const Tensor<T>& q, const Tensor<T>& k,
                                             const Tensor<T>& v) {
  const bool scores_point = hook_.visit("attn.scores"), pattern_point = hook_.visit("attn.pattern");
  if (scores_point || pattern_point) return attend_hooked(q, k, v, scores_point, pattern_point);
  return attention(q, k, v, spec_, path(k.shape()[1])).out;
}

// Hooks at the scores or the pattern. Only reading them leaves the path as it is (the fused
// kernels return the weights, the scores are recomputed as a constant), so a cached run
// computes what a plain one does, bit for bit; changing either, or asking for the scores'
// gradient, takes the composed path, the only one that forms both on the tape.
template <class T>
Tensor<T> MultiHeadAttention<T>::attend_hooked(const Tensor<T>& q, const Tensor<T>& k,
                                               const Tensor<T>& v, bool scores_point,
                                               bool pattern_point) {
  Hooks<T>& hooks = *hook_.hooks;
  const std::string scores = hook_.prefix + "attn.scores", pattern = hook_.prefix + "attn.pattern";
  const bool read_only = !hooks.changes(scores) && !hooks.changes(pattern) &&
                         !(scores_point && hooks.caches_gradients());
  if (read_only) {
    const AttentionPath keeps_weights = path_ ? *path_ : default_attention_path(k.shape()[1], true);
    const AttentionResult<T> r = attention(q, k, v, spec_, keeps_weights);
    if (r.weights.defined()) {  // (a forced flash path never forms them)
      if (scores_point) hooks.apply(scores, attention_scores(q, k, spec_));
      if (pattern_point) hooks.apply(pattern, r.weights);
      return r.out;
    }
  }
  AttentionStages<T> stages;
  if (scores_point) stages.scores = [&](const Tensor<T>& s) { return hooks.apply(scores, s); };
  if (pattern_point) stages.pattern = [&](const Tensor<T>& w) { return hooks.apply(pattern, w); };
  return attention_staged(q, k, v, spec_, stages).out;
}

template <class T>
MultiHeadAttention<T>::MultiHeadAttention(std::size_t d_model, std::size_t heads, Generator& gen,
                                          double qkv_std, double out_std,
                                          std::optional<double> scale)
    : MultiHeadAttention(gpt2_attention(d_model, heads, qkv_std, out_std, scale), gen) {}

// x (B, T, D) @ Wq [+ bq] -> q (B, T, heads*dh); @ Wk, Wv [+ bk, bv] -> k, v (B, T, kv_heads*dh)
//   -> [qk_norm per head] -> [rope at positions 0..T-1] -> [q times each head's temperature]
//   -> causal attention per head -> merged (B, T, heads*dh) [* head mask] @ Wo -> (B, T, D). Every step is an op on the tape.
template <class T>
Tensor<T> MultiHeadAttention<T>::forward(const Tensor<T>& x) {
  return forward(x, nullptr);
}

// With a cache the new tokens sit at positions start = cache->length() onwards: RoPE turns
// them by those absolute angles, and their queries attend to the held keys before their own.
template <class T>
Tensor<T> MultiHeadAttention<T>::forward(const Tensor<T>& x, KVCache<T>* cache) {
  if (x.dim() != 3 || x.shape()[2] != d_model_)
    fail("MultiHeadAttention", "x must be (B, T, D) with D={}, got {}", d_model_, x.shape_string());
  const std::size_t dh = spec_.head_dim, start = cache ? cache->length() : 0;
  Tensor<T> q = linear(x, Wq_, bq_), k = linear(x, Wk_, bk_), v = linear(x, Wv_, bv_);
  if (q_norm_) {
    q = per_head(*q_norm_, q, spec_.heads, dh);
    k = per_head(*k_norm_, k, spec_.kv_heads, dh);
  }
  if (rope_) {
    q = rope_heads(q, spec_.heads, start, *rope_);
    k = rope_heads(k, spec_.kv_heads, start, *rope_);
  }
  if (hook_.hooks) {
    q = hook_.per_head("attn.q", q, spec_.heads);
    k = hook_.per_head("attn.k", k, spec_.kv_heads);
    v = hook_.per_head("attn.v", v, spec_.kv_heads);
  }
  if (temperature_.defined()) q = times_temperature(q, temperature_, spec_.heads, dh);
  if (!cache) return output(hook_.per_head("attn.z", attend_full(q, k, v), spec_.heads));
  if (x.shape()[1] == 1 && !grad_enabled()) {
    // decode: the token's own key joins the cache, then one query reads the ring in place
    cache->append(k, v);
    return output(cache->decode(q, spec_));
  }
  // chunk: keys = the held ones, oldest first, then the chunk's own: consecutive positions
  // ending at the chunk's last query, exactly the layout of attention()'s bottom-right mask
  // (a window cache holds at most `window` of them, all the mask could need)
  const bool held = cache->count() > 0;
  const Tensor<T> keys = held ? concatenate<T>({cache->keys(), k}, 1) : k;
  const Tensor<T> values = held ? concatenate<T>({cache->values(), v}, 1) : v;
  const Tensor<T> out = attention(q, keys, values, spec_, path(keys.shape()[1])).out;
  cache->append(k, v);
  return output(out);
}

template class MultiHeadAttention<float>;
template class MultiHeadAttention<double>;

}  // namespace tapegrad
