#pragma once
// The position-wise feed-forward every dense block and every expert runs: an input
// projection, an activation (gated or not) and an output projection back to d_model. The
// kinds are the list in nn/feed_forward_kind.hpp and the activation is chosen in one place,
// FeedForward::hidden(): a new activation is a line in that list and a case there.
#include <cstddef>
#include <optional>
#include <string>

#include "autograd/tensor.hpp"
#include "nn/hooks.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"
#include "nn/feed_forward_kind.hpp"
#include "nn/module.hpp"

namespace tapegrad {

// gelu:   proj(gelu(fc(x))), GELU in its tanh form (GPT-2);
// swiglu: down(silu(gate(x)) * up(x)) (Llama, Mixtral's experts);
// geglu:  down(gelu(gate(x)) * up(x)), GELU in its tanh form (Gemma).
// (MlpKind::none is a block without a feed-forward: there is no FeedForward of that kind.)
struct FeedForwardConfig {
  std::size_t d_model = 0, hidden = 0;
  MlpKind kind = MlpKind::gelu;
  bool bias = true;
  double std = init::gpt2_std;      // the input projections
  double out_std = init::gpt2_std;  // the output projection, which writes the residual
};

// x (..., d_model) -> (..., hidden) -> (..., d_model). Parameters, drawn and registered in
// this order: fc, proj (gelu); gate, up, down (gated kinds); each .weight [and .bias].
template <class T>
class FeedForward : public Module<T> {
 public:
  FeedForward(const FeedForwardConfig& config, Generator& gen);
  Tensor<T> forward(const Tensor<T>& x) const;
  Tensor<T> operator()(const Tensor<T>& x) const { return forward(x); }
  MlpKind kind() const { return kind_; }
  // The run's hook point mlp.hidden (the activation before the output projection).
  void set_hooks(Hooks<T>* hooks, const std::string& prefix) { hook_ = {hooks, prefix}; }

 private:
  MlpKind kind_;
  Linear<T> in_;                // fc, or gate for the gated kinds
  std::optional<Linear<T>> up_;  // the gated kinds' second input projection
  Linear<T> out_;               // proj, or down
  HookPoint<T> hook_;

  Tensor<T> hidden(const Tensor<T>& x) const;
};

// The GELU feed-forward (GPT-2's MLP) with its arguments in the order of the older API.
template <class T>
class MLP : public FeedForward<T> {
 public:
  MLP(std::size_t d_model, std::size_t hidden, Generator& gen, double std = init::gpt2_std,
      double out_std = init::gpt2_std, bool bias = true)
      : FeedForward<T>({d_model, hidden, MlpKind::gelu, bias, std, out_std}, gen) {}
};

// The SwiGLU feed-forward (Llama's), biases only when asked.
template <class T>
class SwiGLU : public FeedForward<T> {
 public:
  SwiGLU(std::size_t d_model, std::size_t hidden, bool bias, Generator& gen,
         double std = init::gpt2_std, double out_std = init::gpt2_std)
      : FeedForward<T>({d_model, hidden, MlpKind::swiglu, bias, std, out_std}, gen) {}
};

extern template class FeedForward<float>;
extern template class FeedForward<double>;

}  // namespace tapegrad
