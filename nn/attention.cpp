#include "nn/attention.hpp"

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
  c.heads = heads;
  c.scale = scale;
  c.qkv_std = qkv_std;
  c.out_std = out_std;
  return c;
}

// The projections' sizes and every argument check come from check_attention_spec, the one
// check of every attention path; it is run here on the shapes the projections will have.
AttentionSpec checked_spec(const AttentionConfig& c) {
  if (c.d_model == 0 || c.heads == 0)
    fail("MultiHeadAttention", "d_model={} and heads={} must be positive", c.d_model, c.heads);
  if (c.head_dim == 0 && c.d_model % c.heads != 0)
    fail("MultiHeadAttention", "d_model={} is not divisible by heads={} (or set head_dim)",
         c.d_model, c.heads);
  AttentionSpec s;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads == 0 ? c.heads : c.kv_heads;
  s.head_dim = c.head_dim == 0 ? c.d_model / c.heads : c.head_dim;
  s.scale = c.scale;
  s.causal = true;
  s.window = c.window;
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

}  // namespace

template <class T>
MultiHeadAttention<T>::MultiHeadAttention(const AttentionConfig& c, Generator& gen)
    : d_model_(c.d_model), spec_(checked_spec(c)), rope_(c.rope) {
  const std::size_t q_width = spec_.heads * spec_.head_dim, kv_width = spec_.kv_heads * spec_.head_dim;
  Wq_ = this->register_parameter("Wq", init::normal<T>({c.d_model, q_width}, gen, c.qkv_std));
  Wk_ = this->register_parameter("Wk", init::normal<T>({c.d_model, kv_width}, gen, c.qkv_std));
  Wv_ = this->register_parameter("Wv", init::normal<T>({c.d_model, kv_width}, gen, c.qkv_std));
  Wo_ = this->register_parameter("Wo", init::normal<T>({q_width, c.d_model}, gen, c.out_std));
  if (c.qk_norm) {
    q_norm_.emplace(NormKind::rms_norm, spec_.head_dim, c.norm_eps);
    k_norm_.emplace(NormKind::rms_norm, spec_.head_dim, c.norm_eps);
    this->register_module("q_norm", *q_norm_);
    this->register_module("k_norm", *k_norm_);
  }
}

template <class T>
MultiHeadAttention<T>::MultiHeadAttention(std::size_t d_model, std::size_t heads, Generator& gen,
                                          double qkv_std, double out_std,
                                          std::optional<double> scale)
    : MultiHeadAttention(gpt2_attention(d_model, heads, qkv_std, out_std, scale), gen) {}

// x (B, T, D) @ Wq -> q (B, T, heads*dh); @ Wk, Wv -> k, v (B, T, kv_heads*dh)
//   -> [qk_norm per head] -> [rope at positions 0..T-1] -> causal attention per head
//   -> merged (B, T, heads*dh) @ Wo -> (B, T, D). Every step is an op on the tape.
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
  Tensor<T> q = matmul(x, Wq_), k = matmul(x, Wk_), v = matmul(x, Wv_);
  if (q_norm_) {
    q = per_head(*q_norm_, q, spec_.heads, dh);
    k = per_head(*k_norm_, k, spec_.kv_heads, dh);
  }
  if (rope_) {
    q = rope_heads(q, spec_.heads, start, *rope_);
    k = rope_heads(k, spec_.kv_heads, start, *rope_);
  }
  if (!cache) {
    AttentionResult<T> r = attention(q, k, v, spec_, path(k.shape()[1]));
    if (keep_) last_weights_ = r.weights.detach();
    return matmul(r.out, Wo_);
  }
  if (x.shape()[1] == 1 && !grad_enabled()) {
    // decode: the token's own key joins the cache, then one query reads the ring in place
    cache->append(k, v);
    return matmul(attention_decode(q, cache->key_store(), cache->value_store(), cache->ring(),
                                   spec_), Wo_);
  }
  // chunk: keys = the held ones, oldest first, then the chunk's own: consecutive positions
  // ending at the chunk's last query, exactly the layout of attention()'s bottom-right mask
  // (a window cache holds at most `window` of them, all the mask could need)
  const bool held = cache->count() > 0;
  const Tensor<T> keys = held ? concatenate<T>({cache->keys(), k}, 1) : k;
  const Tensor<T> values = held ? concatenate<T>({cache->values(), v}, 1) : v;
  const Tensor<T> out = attention(q, keys, values, spec_, path(keys.shape()[1])).out;
  cache->append(k, v);
  return matmul(out, Wo_);
}

template class MultiHeadAttention<float>;
template class MultiHeadAttention<double>;

}  // namespace tapegrad
