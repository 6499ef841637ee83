#pragma once
// The transformer's repeated unit: the pre-norm residual Block
// x + attn(norm1(x)),  then  x + mlp(norm2(x)).
#include <cstddef>
#include <optional>

#include "autograd/tensor.hpp"
#include "nn/attention.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"
#include "ops/rope.hpp"  // RopeSpec

namespace tapegrad {

struct BlockConfig {
  std::size_t d_model = 0;
  std::size_t heads = 1;
  std::size_t kv_heads = 0;               // 0: = heads
  std::size_t head_dim = 0;               // 0: d_model / heads
  std::size_t mlp_hidden = 0;             // usually 4 * d_model
  bool swiglu = false;                    // SwiGLU feed-forward instead of GELU
  bool mlp_bias = true;
  NormKind norm = NormKind::layer_norm;
  double norm_eps = 1e-5;
  std::optional<double> attention_scale;  // default 1/sqrt(head_dim)
  std::size_t window = 0;
  bool qk_norm = false;
  double qk_norm_gain = 1.0;
  bool learned_temperature = false;
  std::optional<RopeSpec> rope;
  double std = init::gpt2_std;            // the feed-forward's input weights
  double attention_std = init::gpt2_std;  // Wq, Wk, Wv
  double residual_std = init::gpt2_std;   // Wo and the feed-forward's output weight
};

// x + attn(norm1(x)), then x + mlp(norm2(x)): x (B, T, D) -> (B, T, D).
// Parameters, in order: norm1, attn, norm2, mlp (fc, proj; or gate, up, down).
template <class T>
class Block : public Module<T> {
 public:
  Block(const BlockConfig& config, Generator& gen);
  Tensor<T> forward(const Tensor<T>& x, KVCache<T>* cache = nullptr);
  Tensor<T> operator()(const Tensor<T>& x) { return forward(x); }
  MultiHeadAttention<T>& attention() { return attn_; }
  const MultiHeadAttention<T>& attention() const { return attn_; }

 private:
  Norm<T> norm1_;
  MultiHeadAttention<T> attn_;
  Norm<T> norm2_;
  std::optional<MLP<T>> mlp_;
  std::optional<SwiGLU<T>> swiglu_;
};

extern template class Block<float>;
extern template class Block<double>;

}  // namespace tapegrad
