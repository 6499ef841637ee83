#include "nn/feed_forward.hpp"

#include "ops/elementwise.hpp"

namespace tapegrad {

namespace {

MlpKind checked_kind(MlpKind kind) {
  if (mlp_matrices(kind) == 0) fail("FeedForward", "mlp=none builds no feed-forward");
  return kind;
}

}  // namespace

// Members are built in declaration order (in, up, out): the order of the draws from `gen`.
template <class T>
FeedForward<T>::FeedForward(const FeedForwardConfig& c, Generator& gen)
    : kind_(checked_kind(c.kind)),
      in_(c.d_model, c.hidden, c.bias, gen, c.std),
      up_(mlp_gated(c.kind)
              ? std::optional<Linear<T>>(std::in_place, c.d_model, c.hidden, c.bias, gen, c.std)
              : std::nullopt),
      out_(c.hidden, c.d_model, c.bias, gen, c.out_std) {
  if (!mlp_gated(kind_)) {
    this->register_module("fc", in_);
    this->register_module("proj", out_);
    return;
  }
  this->register_module("gate", in_);
  this->register_module("up", *up_);
  this->register_module("down", out_);
}

// x (..., D) -> in -> (..., hidden) -> activation [* up(x)] -> out -> (..., D)
// backward: through the activation, the gating product and the matmuls, each an op on the tape
template <class T>
Tensor<T> FeedForward<T>::forward(const Tensor<T>& x) const {
  return out_(hook_("mlp.hidden", hidden(x)));
}

// x (..., D) -> (..., hidden): the one place the activation is chosen.
template <class T>
Tensor<T> FeedForward<T>::hidden(const Tensor<T>& x) const {
  switch (kind_) {
    case MlpKind::gelu: return gelu(in_(x));
    case MlpKind::swiglu: return silu(in_(x)) * (*up_)(x);
    case MlpKind::geglu: return gelu(in_(x)) * (*up_)(x);
    case MlpKind::none: break;
  }
  fail("FeedForward", "unknown kind {}", static_cast<int>(kind_));
}

template class FeedForward<float>;
template class FeedForward<double>;

}  // namespace tapegrad
