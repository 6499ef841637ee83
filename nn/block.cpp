#include "nn/block.hpp"

#include <cmath>

#include "ops/attention.hpp"
#include "ops/elementwise.hpp"

namespace tapegrad {

template <class T>
MultiHeadAttention<T>::MultiHeadAttention(std::size_t d_model, std::size_t heads, Generator& gen,
                                          double qkv_std, double out_std,
                                          std::optional<double> scale)
    : d_model_(d_model), heads_(heads), scale_(scale) {
  if (d_model == 0 || heads == 0 || d_model % heads != 0)
    fail("MultiHeadAttention", "d_model={} must be a positive multiple of heads={}", d_model,
         heads);
  if (scale && !(*scale > 0.0 && std::isfinite(*scale)))
    fail("MultiHeadAttention", "scale must be positive and finite, got {}", *scale);
  Wq_ = this->register_parameter("Wq", init::normal<T>({d_model, d_model}, gen, qkv_std));
  Wk_ = this->register_parameter("Wk", init::normal<T>({d_model, d_model}, gen, qkv_std));
  Wv_ = this->register_parameter("Wv", init::normal<T>({d_model, d_model}, gen, qkv_std));
  Wo_ = this->register_parameter("Wo", init::normal<T>({d_model, d_model}, gen, out_std));
}

// x (B, T, D) -> q, k, v (B, heads, T, D/heads) -> causal attention per head -> merged
// (B, T, D) @ Wo. The op checks x's shape and does the backward.
template <class T>
Tensor<T> MultiHeadAttention<T>::forward(const Tensor<T>& x) {
  MultiHeadOptions options;
  options.causal = true;
  options.scale = scale_;
  AttentionResult<T> r = multi_head_attention_with_weights(x, Wq_, Wk_, Wv_, Wo_, heads_, options);
  if (keep_) last_weights_ = r.weights.detach();
  return r.out;
}

template <class T>
Block<T>::Block(const BlockConfig& c, Generator& gen)
    : norm1_(c.norm, c.d_model),
      attn_(c.d_model, c.heads, gen, c.attention_std, c.residual_std, c.attention_scale),
      norm2_(c.norm, c.d_model),
      mlp_(c.d_model, c.mlp_hidden, gen, c.std, c.residual_std) {
  this->register_module("norm1", norm1_);
  this->register_module("attn", attn_);
  this->register_module("norm2", norm2_);
  this->register_module("mlp", mlp_);
}

// h = x + attn(norm1(x)); y = h + mlp(norm2(h)): every sub-layer reads a normalised copy
// and adds into the residual stream, which itself is never normalised (pre-norm, GPT-2).
template <class T>
Tensor<T> Block<T>::forward(const Tensor<T>& x) {
  Tensor<T> h = x + attn_(norm1_(x));
  return h + mlp_(norm2_(h));
}

template class MultiHeadAttention<float>;
template class MultiHeadAttention<double>;
template class Block<float>;
template class Block<double>;

}  // namespace tapegrad
