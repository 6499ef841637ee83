#include "nn/layers.hpp"

#include "ops/elementwise.hpp"
#include "ops/embedding.hpp"
#include "ops/matmul.hpp"
#include "ops/norm.hpp"

namespace tapegrad {

template <class T>
Linear<T>::Linear(std::size_t in, std::size_t out, bool bias, Generator& gen, double std)
    : in_(in), out_(out) {
  if (in == 0 || out == 0) fail("Linear", "in={} and out={} must be positive", in, out);
  weight_ = this->register_parameter("weight", init::normal<T>({in, out}, gen, std));
  if (bias) bias_ = this->register_parameter("bias", init::constant<T>({out}, 0.0));
}

// y = x @ weight + bias: x (..., in) @ weight (in, out) -> (..., out), bias (out)
// broadcast over the leading axes; backward comes from matmul and add.
template <class T>
Tensor<T> Linear<T>::forward(const Tensor<T>& x) const {
  if (x.dim() == 0 || x.shape().back() != in_)
    fail("Linear", "x of shape {} must end in in_features={} (weight is {})", x.shape_string(),
         in_, weight_.shape_string());
  return linear(x, weight_, bias_);
}

template <class T>
Embedding<T>::Embedding(std::size_t num, std::size_t dim, Generator& gen, double std)
    : num_(num), dim_(dim) {
  if (num == 0 || dim == 0) fail("Embedding", "num={} and dim={} must be positive", num, dim);
  weight_ = this->register_parameter("weight", init::normal<T>({num, dim}, gen, std));
}

// ids (...) -> weight[ids]: (..., dim); the range check is embedding()'s.
template <class T>
Tensor<T> Embedding<T>::forward(const Indices& ids) const {
  return embedding(weight_, ids);
}

template <class T>
Norm<T>::Norm(NormKind kind, std::size_t dim, double eps)
    : kind_(kind), dim_(dim), eps_(static_cast<T>(eps)) {
  if (dim == 0) fail(kind == NormKind::layer_norm ? "LayerNorm" : "RMSNorm", "dim must be positive");
  // gemma's weight w is the gain's offset from 1, so it starts at 0 where the others' gain is 1
  weight_ = this->register_parameter("weight",
                                     init::constant<T>({dim}, kind == NormKind::gemma ? 0.0 : 1.0));
  if (kind == NormKind::layer_norm)
    bias_ = this->register_parameter("bias", init::constant<T>({dim}, 0.0));
}

// x (..., dim) -> (..., dim); the shape checks are layer_norm's and rms_norm's.
template <class T>
Tensor<T> Norm<T>::forward(const Tensor<T>& x) const {
  switch (kind_) {
    case NormKind::layer_norm: return layer_norm(x, weight_, bias_, eps_);
    case NormKind::rms_norm: return rms_norm(x, weight_, eps_);
    case NormKind::gemma: return rms_norm(x, weight_ + Scalar<T>(1), eps_);
  }
  fail("Norm", "unknown kind {}", static_cast<int>(kind_));
}

template class Linear<float>;
template class Linear<double>;
template class Embedding<float>;
template class Embedding<double>;
template class Norm<float>;
template class Norm<double>;

}  // namespace tapegrad
