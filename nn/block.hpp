#pragma once
// The transformer's repeated unit: the pre-norm residual Block
// x + attn(norm1(x)),  then  x + mlp(norm2(x)),
// with post_norms (Gemma 2's sandwich) x + norm1_post(attn(norm1(x))), then likewise; with
// a residual_multiplier r (Granite) x + r * attn(norm1(x)).
#include <cstddef>
#include <string>

#include "autograd/tensor.hpp"
#include "nn/attention.hpp"
#include "nn/feed_forward.hpp"
#include "nn/hooks.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"
#include "nn/moe.hpp"

namespace tapegrad {

// The attention's configuration as is, its d_model and norm_eps shared by the block's norms
// and feed-forward; its out_std (Wo) is the residual init the feed-forward's output takes too.
struct BlockConfig {
  AttentionConfig attention;
  std::size_t mlp_hidden = 0;             // usually 4 * d_model
  MlpKind mlp = MlpKind::gelu;            // none: attention-only, x + attn(norm1(x)) alone
  bool mlp_bias = true;
  NormKind norm = NormKind::layer_norm;
  bool post_norms = false;                // a norm on each sub-layer's output too
  double residual_multiplier = 1.0;       // on each sub-layer's output before the add
  double std = init::gpt2_std;            // the feed-forward's input weights
  MoEConfig moe;  // moe.experts > 0: a mixture of experts in place of the one feed-forward
};

// x + attn(norm1(x)), then x + mlp(norm2(x)): x (B, T, D) -> (B, T, D).
// Parameters, in order: norm1, attn, [norm1_post,] norm2, mlp (fc, proj; or gate, up, down)
// or, with experts, moe (router, experts.<e>.*)[, norm2_post]; attention-only: norm1, attn
// [, norm1_post].
template <class T>
class Block : public Module<T> {
 public:
  Block(const BlockConfig& config, Generator& gen);
  Tensor<T> forward(const Tensor<T>& x, KVCache<T>* cache = nullptr);
  Tensor<T> operator()(const Tensor<T>& x) { return forward(x); }
  MultiHeadAttention<T>& attention() { return attn_; }
  const MultiHeadAttention<T>& attention() const { return attn_; }
  // The mixture of experts of this block, or nullptr when its feed-forward is dense.
  MixtureOfExperts<T>* moe() { return moe_ ? &*moe_ : nullptr; }
  const MixtureOfExperts<T>* moe() const { return moe_ ? &*moe_ : nullptr; }
  // The run's hook points (nn/hooks.hpp) of this block and of its sub-layers, each name
  // after `prefix` ("blocks.<l>.").
  void set_hooks(Hooks<T>* hooks, const std::string& prefix);

 private:
  Norm<T> norm1_;
  MultiHeadAttention<T> attn_;
  std::optional<Norm<T>> norm1_post_;  // post_norms only
  std::optional<Norm<T>> norm2_;  // absent in an attention-only block
  std::optional<Norm<T>> norm2_post_;  // post_norms with a feed-forward only
  std::optional<FeedForward<T>> mlp_;  // the dense feed-forward
  std::optional<MixtureOfExperts<T>> moe_;
  double residual_multiplier_ = 1.0;
  HookPoint<T> hook_;

  Tensor<T> feed_forward(const Tensor<T>& x);
  Tensor<T> into_stream(const std::optional<Norm<T>>& norm, const char* hook_name,
                        const Tensor<T>& out);
};

extern template class Block<float>;
extern template class Block<double>;

}  // namespace tapegrad
