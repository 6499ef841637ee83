#include "nn/block.hpp"

#include "nn/kv_cache.hpp"
#include "ops/elementwise.hpp"

namespace tapegrad {

namespace {

template <class T>
std::optional<Norm<T>> optional_norm(bool present, const BlockConfig& c) {
  if (!present) return std::nullopt;
  return std::optional<Norm<T>>(std::in_place, c.norm, c.attention.d_model, c.attention.norm_eps);
}

}  // namespace

template <class T>
Block<T>::Block(const BlockConfig& c, Generator& gen)
    : norm1_(c.norm, c.attention.d_model, c.attention.norm_eps),
      attn_(c.attention, gen),
      norm1_post_(optional_norm<T>(c.post_norms, c)),
      norm2_(optional_norm<T>(c.mlp != MlpKind::none, c)),
      norm2_post_(optional_norm<T>(c.post_norms && c.mlp != MlpKind::none, c)),
      residual_multiplier_(c.residual_multiplier) {
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
  if (norm1_post_) this->register_module("norm1_post", *norm1_post_);
  if (norm2_) this->register_module("norm2", *norm2_);
  if (moe_) this->register_module("moe", *moe_);
  else if (mlp_) this->register_module("mlp", *mlp_);
  if (norm2_post_) this->register_module("norm2_post", *norm2_post_);
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
// With post_norms each sub-layer's output is normalised as well before it is added, so
// that no layer can grow the stream by more than the norm's gain allows (Gemma 2); and
// times residual_multiplier (Granite's muP-style damping of every layer's update).
// Each named activation passes its hook point (the identity when no hooks are attached).
template <class T>
Tensor<T> Block<T>::forward(const Tensor<T>& input, KVCache<T>* cache) {
  const Tensor<T> x = hook_("resid_pre", input);
  const Tensor<T> a = hook_("attn_out", attn_.forward(hook_("ln1.out", norm1_(x)), cache));
  const Tensor<T> h = hook_("resid_mid", x + into_stream(norm1_post_, "ln1_post.out", a));
  if (!norm2_) return hook_("resid_post", h);  // attention-only
  const Tensor<T> m = hook_("mlp_out", feed_forward(hook_("ln2.out", (*norm2_)(h))));
  return hook_("resid_post", h + into_stream(norm2_post_, "ln2_post.out", m));
}

// A sub-layer's output as the residual stream receives it: normalised under post_norms,
// times the residual multiplier.
template <class T>
Tensor<T> Block<T>::into_stream(const std::optional<Norm<T>>& norm, const char* hook_name,
                                const Tensor<T>& out) {
  const Tensor<T> normed = norm ? hook_(hook_name, (*norm)(out)) : out;
  return residual_multiplier_ == 1.0 ? normed : normed * Scalar<T>(residual_multiplier_);
}

template <class T>
Tensor<T> Block<T>::feed_forward(const Tensor<T>& x) {
  if (moe_) return (*moe_)(x);
  return (*mlp_)(x);
}

template class Block<float>;
template class Block<double>;

}  // namespace tapegrad
