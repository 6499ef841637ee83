#pragma once
// The transformer's repeated unit: causal multi-head self-attention as a module, and the
// pre-norm residual Block  x + attn(norm1(x)),  then  x + mlp(norm2(x)).
#include <cstddef>
#include <optional>

#include "autograd/tensor.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"

namespace tapegrad {

// Causal self-attention over x (B, T, D) through ops' multi_head_attention_with_weights.
// Parameters Wq, Wk, Wv ~ normal(0, qkv_std) and Wo ~ normal(0, out_std), all (D, D),
// no biases. scale: the factor applied to q k^T, default 1/sqrt(D / heads); 1.0 gives the
// unscaled attention of the saturation study.
template <class T>
class MultiHeadAttention : public Module<T> {
 public:
  MultiHeadAttention(std::size_t d_model, std::size_t heads, Generator& gen,
                     double qkv_std = init::gpt2_std, double out_std = init::gpt2_std,
                     std::optional<double> scale = std::nullopt);
  Tensor<T> forward(const Tensor<T>& x);  // (B, T, D) -> (B, T, D)
  Tensor<T> operator()(const Tensor<T>& x) { return forward(x); }

  // When on, every forward keeps a detached copy of its weights (B, heads, T, T), for
  // inspection (entropy, saturation); off by default because it costs a copy.
  void keep_weights(bool keep) { keep_ = keep; }
  // The weights of the last forward while keep_weights was on; undefined before.
  const Tensor<T>& last_weights() const { return last_weights_; }

  std::size_t heads() const { return heads_; }
  const std::optional<double>& scale() const { return scale_; }
  const Tensor<T>& Wq() const { return Wq_; }
  const Tensor<T>& Wk() const { return Wk_; }
  const Tensor<T>& Wv() const { return Wv_; }
  const Tensor<T>& Wo() const { return Wo_; }

 private:
  std::size_t d_model_, heads_;
  std::optional<double> scale_;
  bool keep_ = false;
  Tensor<T> Wq_, Wk_, Wv_, Wo_;
  Tensor<T> last_weights_;
};

struct BlockConfig {
  std::size_t d_model = 0;
  std::size_t heads = 1;
  std::size_t mlp_hidden = 0;  // usually 4 * d_model
  NormKind norm = NormKind::layer_norm;
  std::optional<double> attention_scale;  // default 1/sqrt(d_head)
  double std = init::gpt2_std;            // MLP fc weight
  double attention_std = init::gpt2_std;  // Wq, Wk, Wv
  double residual_std = init::gpt2_std;   // Wo and the MLP's proj weight
};

// x + attn(norm1(x)), then x + mlp(norm2(x)): x (B, T, D) -> (B, T, D).
// Parameters, in order: norm1, attn (Wq Wk Wv Wo), norm2, mlp (fc, proj).
template <class T>
class Block : public Module<T> {
 public:
  Block(const BlockConfig& config, Generator& gen);
  Tensor<T> forward(const Tensor<T>& x);
  Tensor<T> operator()(const Tensor<T>& x) { return forward(x); }
  MultiHeadAttention<T>& attention() { return attn_; }
  const MultiHeadAttention<T>& attention() const { return attn_; }

 private:
  Norm<T> norm1_;
  MultiHeadAttention<T> attn_;
  Norm<T> norm2_;
  MLP<T> mlp_;
};

extern template class MultiHeadAttention<float>;
extern template class MultiHeadAttention<double>;
extern template class Block<float>;
extern template class Block<double>;

}  // namespace tapegrad
