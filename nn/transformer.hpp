#pragma once
// TinyGPT: a small decoder-only transformer (GPT-2's shape, no dropout).
//
//   tokens (B, T) -> tok_emb (B, T, D) + pos_emb (T, D)
//                 -> layers x Block (pre-norm: x + attn(norm1(x)), x + mlp(norm2(x)))
//                 -> norm_f -> head -> logits (B, T, vocab)
//
// The head is untied from tok_emb and has no bias (as GPT-2's lm_head). Parameter names,
// in registration order: tok_emb.weight, pos_emb.weight, blocks.<i>.{norm1.weight,
// norm1.bias, attn.Wq, attn.Wk, attn.Wv, attn.Wo, norm2.weight, norm2.bias,
// mlp.fc.weight, mlp.fc.bias, mlp.proj.weight, mlp.proj.bias}, norm_f.weight,
// norm_f.bias, head.weight (RMSNorm has no .bias). Linear weights are (in, out).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "autograd/tensor.hpp"
#include "nn/block.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"
#include "ops/embedding.hpp"  // Indices

namespace tapegrad {

struct TinyGPTConfig {
  std::size_t vocab = 0;
  std::size_t context = 0;  // the longest sequence the positional embedding covers
  std::size_t d_model = 0;
  std::size_t heads = 1;
  std::size_t layers = 1;
  std::size_t mlp_ratio = 4;  // MLP hidden width = mlp_ratio * d_model
  NormKind norm = NormKind::layer_norm;
  std::optional<double> attention_scale;  // default 1/sqrt(d_head); 1.0 = unscaled
  AttentionInit attention_init = AttentionInit::gpt2;
  std::uint64_t seed = 0;  // the Generator every parameter is drawn from

  std::size_t d_head() const { return heads == 0 ? 0 : d_model / heads; }
  // Throws ShapeError ("TinyGPT: ...") if any size is zero, heads does not divide
  // d_model, or the attention scale is not positive and finite.
  void validate() const;
  bool operator==(const TinyGPTConfig& o) const;
  bool operator!=(const TinyGPTConfig& o) const { return !(*this == o); }
};

template <class T>
class TinyGPT : public Module<T> {
 public:
  // Validates the config, then draws every parameter from Generator(config.seed) in
  // registration order (GPT-2 init; Wq, Wk, Wv as config.attention_init says).
  explicit TinyGPT(const TinyGPTConfig& config);

  // tokens (B, T) with 1 <= T <= context and values in [0, vocab) -> logits (B, T, vocab)
  Tensor<T> forward(const Indices& tokens);
  Tensor<T> operator()(const Indices& tokens) { return forward(tokens); }
  // Mean next-token cross-entropy of forward(tokens) against targets (B, T); positions
  // whose target is ignore_index do not count.
  Tensor<T> loss(const Indices& tokens, const Indices& targets,
                 std::int64_t ignore_index = -100);

  const TinyGPTConfig& config() const { return config_; }
  std::vector<Block<T>>& blocks() { return blocks_; }
  const std::vector<Block<T>>& blocks() const { return blocks_; }
  // Every block's attention keeps (or stops keeping) its last weights.
  void keep_attention_weights(bool keep);

 private:
  TinyGPT(const TinyGPTConfig& config, Generator&& gen);

  TinyGPTConfig config_;
  Embedding<T> tok_emb_, pos_emb_;
  std::vector<Block<T>> blocks_;
  Norm<T> norm_f_;
  Linear<T> head_;
};

extern template class TinyGPT<float>;
extern template class TinyGPT<double>;

}  // namespace tapegrad
