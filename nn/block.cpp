#include "nn/block.hpp"

#include "nn/kv_cache.hpp"
#include "ops/elementwise.hpp"

namespace tapegrad {

template <class T>
Block<T>::Block(const BlockConfig& c, Generator& gen)
    : norm1_(c.norm, c.attention.d_model, c.attention.norm_eps),
      attn_(c.attention, gen),
      norm2_(c.mlp != MlpKind::none
                 ? std::optional<Norm<T>>(std::in_place, c.norm, c.attention.d_model,
                                          c.attention.norm_eps)
                 : std::nullopt) {
  const std::size_t D = c.attention.d_model;
  if (c.mlp == MlpKind::none) {
    if (c.moe.experts > 0)
      fail("Block", "experts={} needs a feed-forward, but the block is attention-only",
           c.moe.experts);
  } else if (c.moe.experts > 0) {
    if (c.moe.d_model != D)
      fail("Block", "moe.d_model={} differs from the block's d_model={}", c.moe.d_model, D);
    moe_.emplace(c.moe, gen);
  } else {
    mlp_.emplace(FeedForwardConfig{D, c.mlp_hidden, c.mlp, c.mlp_bias, c.std, c.attention.out_std},
                 gen);
  }
  this->register_module("norm1", norm1_);
  this->register_module("attn", attn_);
  if (norm2_) this->register_module("norm2", *norm2_);
  if (moe_) this->register_module("moe", *moe_);
  else if (mlp_) this->register_module("mlp", *mlp_);
}

template <class T>
void Block<T>::set_hooks(Hooks<T>* hooks, const std::string& prefix) {
  hook_ = {hooks, prefix};
  attn_.set_hooks(hooks, prefix);
  if (moe_) moe_->set_hooks(hooks, prefix);
  if (mlp_) mlp_->set_hooks(hooks, prefix);
}

// h = x + attn(norm1(x)); y = h + mlp(norm2(h)): every sub-layer reads a normalised copy
// and adds into the residual stream, which itself is never normalised (pre-norm, GPT-2).
// Each named activation passes its hook point (the identity when no hooks are attached).
template <class T>
Tensor<T> Block<T>::forward(const Tensor<T>& input, KVCache<T>* cache) {
  const Tensor<T> x = hook_("resid_pre", input);
  const Tensor<T> a = hook_("attn_out", attn_.forward(hook_("ln1.out", norm1_(x)), cache));
  const Tensor<T> h = hook_("resid_mid", x + a);
  if (!norm2_) return hook_("resid_post", h);  // attention-only
  const Tensor<T> m = hook_("mlp_out", feed_forward(hook_("ln2.out", (*norm2_)(h))));
  return hook_("resid_post", h + m);
}

template <class T>
Tensor<T> Block<T>::feed_forward(const Tensor<T>& x) {
  if (moe_) return (*moe_)(x);
  return (*mlp_)(x);
}

template class Block<float>;
template class Block<double>;

}  // namespace tapegrad
