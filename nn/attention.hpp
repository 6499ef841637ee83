#pragma once
// Causal self-attention as a module: multi-head, grouped-query or multi-query; optional
// RoPE, QK-norm and sliding window.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"
#include "nn/hooks.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"
#include "ops/attention.hpp"  // AttentionPath, AttentionSpec
#include "ops/rope.hpp"       // RopeSpec

namespace tapegrad {

template <class T>
class KVCache;  // nn/kv_cache.hpp

struct AttentionConfig {
  std::size_t d_model = 0;
  // heads, kv_heads, head_dim (0: d_model / heads), scale, window and the score modifiers;
  // the module is causal whatever `causal` says
  AttentionSpec spec;
  bool qk_norm = false;                 // RMSNorm (gain head_dim) on each head's q and k
  double qk_norm_gain = 1.0;            // the gains' initial value (scores start at gain^2 q.k)
  bool learned_temperature = false;     // a learned scalar per head on q.k, from 1/sqrt(head_dim)
  double norm_eps = 1e-5;
  bool qkv_bias = false;                // bq, bk, bv: added to the projections' products
  bool out_bias = false;                // bo: added to the output projection's product
  std::optional<RopeSpec> rope;         // rotary positions on q and k, none when empty
  double qkv_std = init::gpt2_std;      // Wq, Wk, Wv
  double out_std = init::gpt2_std;      // Wo
};

// Causal self-attention over x (B, T, D). Parameters, in order: Wq (D, heads*head_dim),
// [bq (heads*head_dim)], Wk and Wv (D, kv_heads*head_dim) [each followed by bk, bv
// (kv_heads*head_dim)], Wo (heads*head_dim, D) [, bo (D)]; the biases, zero to start, exist
// with qkv_bias and out_bias and are added right after each product, so every path (the
// composed, fused and flash attention, the cache, the decode) sees them. Then, with qk_norm,
// q_norm.weight and k_norm.weight (head_dim); then, with learned_temperature, temperature
// (heads, 1), which multiplies each query head (and so its scores) on top of the fixed
// scale. Query head h reads K/V head h / (heads/kv_heads).
template <class T>
class MultiHeadAttention : public Module<T> {
 public:
  MultiHeadAttention(const AttentionConfig& config, Generator& gen);
  // Multi-head attention of today's GPT-2 model: heads = kv_heads, head_dim = D / heads.
  MultiHeadAttention(std::size_t d_model, std::size_t heads, Generator& gen,
                     double qkv_std = init::gpt2_std, double out_std = init::gpt2_std,
                     std::optional<double> scale = std::nullopt);
  Tensor<T> forward(const Tensor<T>& x);  // (B, T, D) -> (B, T, D)
  Tensor<T> operator()(const Tensor<T>& x) { return forward(x); }
  // The same over new tokens at absolute positions cache->length() .. + T - 1, reading the
  // keys and values of the positions before them from `cache` and appending their own
  // (cache null: forward(x), positions from 0). One token under no-grad takes the decode
  // path (ops/attention_decode.hpp); a chunk attends to the held keys followed by its own
  // with attention()'s bottom-right mask. The held keys are constants: a gradient reaches
  // only the chunk's own.
  Tensor<T> forward(const Tensor<T>& x, KVCache<T>* cache);

  // Head ablation: heads whose entry is false have their output zeroed before Wo, as if
  // they were removed (empty: every head kept). For inspecting any trained model.
  void set_head_mask(const std::vector<bool>& keep);
  const std::vector<bool>& head_mask() const { return head_keep_; }
  // Forces one path (composed, fused or flash: the same attention, tested equal), for
  // comparisons and studies. Unforced (the default), default_attention_path decides: fused
  // below kFlashFromKeys keys, flash from there on. A hook at attn.scores or attn.pattern
  // moves a run to a path that forms them (docs/HOOKS.md).
  void set_path(AttentionPath path) { path_ = path; }
  AttentionPath path(std::size_t keys = kFlashFromKeys) const {
    return path_ ? *path_ : default_attention_path(keys, false);
  }

  // The run's hook points (nn/hooks.hpp): attn.q, attn.k, attn.v, attn.scores,
  // attn.pattern and attn.z after `prefix` (null hooks: none). They are how the weights and
  // scores of a forward are read: the module keeps nothing of a run.
  void set_hooks(Hooks<T>* hooks, const std::string& prefix) { hook_ = {hooks, prefix}; }

  std::size_t heads() const { return spec_.heads; }
  std::size_t kv_heads() const { return spec_.kv_heads; }
  const std::optional<double>& scale() const { return spec_.scale; }
  const AttentionSpec& spec() const { return spec_; }
  const Tensor<T>& Wq() const { return Wq_; }
  const Tensor<T>& Wk() const { return Wk_; }
  const Tensor<T>& Wv() const { return Wv_; }
  const Tensor<T>& Wo() const { return Wo_; }
  // The projections' biases; undefined without qkv_bias (bq, bk, bv) or out_bias (bo).
  const Tensor<T>& bq() const { return bq_; }
  const Tensor<T>& bk() const { return bk_; }
  const Tensor<T>& bv() const { return bv_; }
  const Tensor<T>& bo() const { return bo_; }
  // (heads, 1) with learned_temperature; undefined otherwise.
  const Tensor<T>& temperature() const { return temperature_; }

 private:
  std::size_t d_model_;
  AttentionSpec spec_;
  std::optional<RopeSpec> rope_;
  std::optional<AttentionPath> path_;  // unset: chosen by path()
  Tensor<T> Wq_, Wk_, Wv_, Wo_;
  Tensor<T> bq_, bk_, bv_, bo_;  // undefined when the config has no such bias
  std::optional<Norm<T>> q_norm_, k_norm_;
  Tensor<T> temperature_;
  std::vector<bool> head_keep_;
  Tensor<T> head_mask_;  // (heads * head_dim) of 0 and 1; undefined when every head is kept
  HookPoint<T> hook_;

  Tensor<T> attend_full(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v);
  Tensor<T> attend_hooked(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                          bool scores_point, bool pattern_point);
  Tensor<T> output(const Tensor<T>& merged) const;  // [head mask], then @ Wo [+ bo]
};

extern template class MultiHeadAttention<float>;
extern template class MultiHeadAttention<double>;

}  // namespace tapegrad
