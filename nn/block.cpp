#include "nn/block.hpp"

#include "nn/kv_cache.hpp"
#include "ops/elementwise.hpp"

namespace tapegrad {

namespace {
AttentionConfig attention_of(const BlockConfig& c) {
  AttentionConfig a;
  a.d_model = c.d_model;
  a.heads = c.heads;
  a.kv_heads = c.kv_heads;
  a.head_dim = c.head_dim;
  a.scale = c.attention_scale;
  a.window = c.window;
  a.qk_norm = c.qk_norm;
  a.qk_norm_gain = c.qk_norm_gain;
  a.learned_temperature = c.learned_temperature;
  a.norm_eps = c.norm_eps;
  a.rope = c.rope;
  a.qkv_std = c.attention_std;
  a.out_std = c.residual_std;
  return a;
}
}  // namespace

template <class T>
Block<T>::Block(const BlockConfig& c, Generator& gen)
    : norm1_(c.norm, c.d_model, c.norm_eps),
      attn_(attention_of(c), gen),
      norm2_(c.norm, c.d_model, c.norm_eps) {
  if (c.swiglu) swiglu_.emplace(c.d_model, c.mlp_hidden, c.mlp_bias, gen, c.std, c.residual_std);
  else mlp_.emplace(c.d_model, c.mlp_hidden, gen, c.std, c.residual_std, c.mlp_bias);
  this->register_module("norm1", norm1_);
  this->register_module("attn", attn_);
  this->register_module("norm2", norm2_);
  if (swiglu_) this->register_module("mlp", *swiglu_);
  else this->register_module("mlp", *mlp_);
}

// h = x + attn(norm1(x)); y = h + mlp(norm2(h)): every sub-layer reads a normalised copy
// and adds into the residual stream, which itself is never normalised (pre-norm, GPT-2).
template <class T>
Tensor<T> Block<T>::forward(const Tensor<T>& x, KVCache<T>* cache) {
  Tensor<T> h = x + attn_.forward(norm1_(x), cache);
  const Tensor<T> n = norm2_(h);
  return h + (swiglu_ ? (*swiglu_)(n) : (*mlp_)(n));
}

template class Block<float>;
template class Block<double>;

}  // namespace tapegrad
