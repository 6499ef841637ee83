#pragma once
// Optimisers with PyTorch's semantics (torch.optim.SGD and torch.optim.AdamW), and
// gradient clipping by global norm. Updates run under NoGradGuard, in place, as plain
// loops over each parameter's contiguous memory; a parameter without a gradient is
// skipped (and, as in PyTorch, its step count does not advance).
#include <cstddef>
#include <vector>

#include "autograd/tensor.hpp"

namespace tapegrad {

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0.0;      // 0: plain gradient descent
  double weight_decay = 0.0;  // L2 penalty added to the gradient (coupled, as torch SGD)
};

// g = grad + weight_decay * p;  buf = g on the first step, else momentum * buf + g;
// p -= lr * buf  (without momentum: p -= lr * g).
template <class T>
class SGD {
 public:
  SGD(std::vector<Tensor<T>> params, SGDOptions options = {});
  void step();
  void zero_grad();  // drops every parameter's gradient
  double lr() const { return options_.lr; }
  void set_lr(double lr) { options_.lr = lr; }

 private:
  std::vector<Tensor<T>> params_;
  SGDOptions options_;
  std::vector<Array<T>> buffers_;  // momentum buffers, allocated at a parameter's first step
  std::vector<bool> started_;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: applied to the parameter, not the gradient
};

// Per parameter, at its step t (1, 2, ...):
//   p *= 1 - lr * weight_decay
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
template <class T>
class AdamW {
 public:
  AdamW(std::vector<Tensor<T>> params, AdamWOptions options = {});
  void step();
  void zero_grad();
  double lr() const { return options_.lr; }
  void set_lr(double lr) { options_.lr = lr; }
  const AdamWOptions& options() const { return options_; }

  // The state of one parameter: its step count and, once it has stepped, the moments m
  // and v (shaped as the parameter). What a training checkpoint saves and restores.
  struct State {
    Array<T> m, v;
    std::size_t step = 0;
  };
  std::size_t size() const { return params_.size(); }
  const Tensor<T>& parameter(std::size_t i) const { return params_.at(i); }
  const State& state(std::size_t i) const { return state_.at(i); }
  // Replaces parameter i's state. Throws ShapeError (naming AdamW and both shapes) unless
  // step is 0 or m and v have the parameter's shape and hold finite values.
  void set_state(std::size_t i, State state);

 private:
  std::vector<Tensor<T>> params_;
  AdamWOptions options_;
  std::vector<State> state_;
};

// Scales every gradient by max_norm / (total + 1e-6) when the global L2 norm `total` of
// all gradients exceeds max_norm (torch.nn.utils.clip_grad_norm_), and returns `total`.
// Parameters without a gradient do not count. A non-finite total is returned with the
// gradients left untouched, so the caller can skip the step.
template <class T>
double clip_grad_norm(const std::vector<Tensor<T>>& params, double max_norm);

extern template class SGD<float>;
extern template class SGD<double>;
extern template class AdamW<float>;
extern template class AdamW<double>;
extern template double clip_grad_norm(const std::vector<Tensor<float>>&, double);
extern template double clip_grad_norm(const std::vector<Tensor<double>>&, double);

}  // namespace tapegrad
