#pragma once
// The stateless building blocks of Transformer: Linear, Embedding, LayerNorm / RMSNorm (the
// feed-forward is nn/feed_forward.hpp's). Each registers its parameters in a fixed order
// and draws them from the Generator it is given, in that order.
#include <cstddef>
#include <string>

#include "autograd/tensor.hpp"
#include "nn/hooks.hpp"
#include "nn/init.hpp"
#include "nn/module.hpp"
#include "ops/embedding.hpp"  // Indices

namespace tapegrad {

// y = x @ weight + bias: x (..., in) -> (..., out).
// weight is stored (in, out), the transpose of PyTorch's nn.Linear, so the forward is
// one plain gemm with no transpose. Parameters: weight ~ normal(0, std), bias = 0.
template <class T>
class Linear : public Module<T> {
 public:
  Linear(std::size_t in, std::size_t out, bool bias, Generator& gen,
         double std = init::gpt2_std);
  Tensor<T> forward(const Tensor<T>& x) const;
  Tensor<T> operator()(const Tensor<T>& x) const { return forward(x); }

  std::size_t in_features() const { return in_; }
  std::size_t out_features() const { return out_; }
  const Tensor<T>& weight() const { return weight_; }
  bool has_bias() const { return bias_.defined(); }
  const Tensor<T>& bias() const { return bias_; }  // undefined without bias

 private:
  std::size_t in_, out_;
  Tensor<T> weight_, bias_;
};

// A lookup table: ids (...) in [0, num) -> (..., dim). Parameter: weight (num, dim) ~
// normal(0, std). Used for tokens and for learned positions.
template <class T>
class Embedding : public Module<T> {
 public:
  Embedding(std::size_t num, std::size_t dim, Generator& gen, double std = init::gpt2_std);
  Tensor<T> forward(const Indices& ids) const;
  Tensor<T> operator()(const Indices& ids) const { return forward(ids); }

  std::size_t num_embeddings() const { return num_; }
  std::size_t embedding_dim() const { return dim_; }
  const Tensor<T>& weight() const { return weight_; }

 private:
  std::size_t num_, dim_;
  Tensor<T> weight_;
};

// gemma: RMSNorm whose gain is 1 + weight, the weight starting at 0 (Gemma's own parameter,
// so that a model read from or written to its files keeps w exactly).
enum class NormKind { layer_norm, rms_norm, gemma };

// Normalisation over the last axis (dim). Parameters: weight (the gain, 1; under gemma the
// gain's offset from 1, 0) and, for layer_norm only, bias (0). LayerNorm and RMSNorm below
// fix the kind.
template <class T>
class Norm : public Module<T> {
 public:
  Norm(NormKind kind, std::size_t dim, double eps = 1e-5);
  Tensor<T> forward(const Tensor<T>& x) const;  // x (..., dim) -> (..., dim)
  Tensor<T> operator()(const Tensor<T>& x) const { return forward(x); }
  NormKind kind() const { return kind_; }

 private:
  NormKind kind_;
  std::size_t dim_;
  T eps_;
  Tensor<T> weight_, bias_;
};

template <class T>
class LayerNorm : public Norm<T> {
 public:
  explicit LayerNorm(std::size_t dim, double eps = 1e-5) : Norm<T>(NormKind::layer_norm, dim, eps) {}
};

template <class T>
class RMSNorm : public Norm<T> {
 public:
  explicit RMSNorm(std::size_t dim, double eps = 1e-5) : Norm<T>(NormKind::rms_norm, dim, eps) {}
};

extern template class Linear<float>;
extern template class Linear<double>;
extern template class Embedding<float>;
extern template class Embedding<double>;
extern template class Norm<float>;
extern template class Norm<double>;

}  // namespace tapegrad
