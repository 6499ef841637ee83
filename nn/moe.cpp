#include "nn/moe.hpp"

#include <string>

#include "ops/elementwise.hpp"
#include "ops/embedding.hpp"
#include "ops/reduce.hpp"
#include "ops/shape_ops.hpp"
#include "ops/softmax.hpp"

namespace tapegrad {

namespace {

std::size_t checked_experts(const MoEConfig& c) {
  if (c.experts == 0 || c.top_k < 1 || c.top_k > c.experts)
    fail("MixtureOfExperts", "experts={} must be positive and top_k={} in [1, experts]",
         c.experts, c.top_k);
  return c.experts;
}

}  // namespace

// The router is drawn first, then expert 0, 1, ...: the order of the draws from `gen`.
template <class T>
MixtureOfExperts<T>::MixtureOfExperts(const MoEConfig& c, Generator& gen)
    : config_(c), router_(c.d_model, checked_experts(c), false, gen, c.std) {
  this->register_module("router", router_);
  // all experts first, then their names: registering keeps references into the vectors
  const FeedForwardConfig each{c.d_model, c.hidden, feed_forward_kind(c.swiglu), c.mlp_bias,
                               c.std, c.out_std};
  for (std::size_t e = 0; e < c.experts; ++e) experts_.emplace_back(each, gen);
  for (std::size_t e = 0; e < c.experts; ++e)
    this->register_module("experts." + std::to_string(e), experts_[e]);
}

// rows (n_e, D) -> expert e's MLP -> (n_e, D)
template <class T>
Tensor<T> MixtureOfExperts<T>::expert(std::size_t e, const Tensor<T>& rows) const {
  return experts_[e](rows);
}

// probs (N, E) -> kept weights (N, k): w[t, j] = p[t, chosen_j(t)], divided by
// sum_j w[t, j] when renorm. The gather reads probs as N*E rows of one value, so the
// gradient reaches p (and the router) only at the kept entries (and through the sum).
// k = 1 with renorm: every weight is exactly 1, a constant: the LM loss gives the router
// no gradient at all (p / p would give a rounding-sized one).
template <class T>
Tensor<T> MixtureOfExperts<T>::kept_weights(const Tensor<T>& probs) const {
  const std::size_t N = probs.shape()[0], E = config_.experts, k = config_.top_k;
  if (k == 1 && config_.renorm) return Tensor<T>::ones({N, 1});
  const Tensor<T> w = reshape(embedding(reshape(probs, {N * E, 1}), routing_.choice_index), {N, k});
  return config_.renorm ? w / sum(w, {1}, true) : w;
}

// probs (N, E) -> aux = E * sum_e f_e P_e over the counted tokens (all when none are set):
// f_e = (counted tokens with e among their k choices) / n, a constant (counts carry no
// gradient); P = sum over counted t of p[t, :] / n, through a constant 0/1 column.
template <class T>
Tensor<T> MixtureOfExperts<T>::aux_loss(const Tensor<T>& probs) const {
  const std::size_t N = probs.shape()[0], E = config_.experts, k = config_.top_k;
  if (!counted_.empty() && counted_.size() != N)
    fail("MixtureOfExperts", "{} counted-token flags for probs of shape {} ({} tokens)",
         counted_.size(), probs.shape_string(), N);
  Array<T> counted = Array<T>::from_shape({N, 1});
  std::size_t n = 0;
  for (std::size_t t = 0; t < N; ++t) {
    counted(t, 0) = counted_.empty() || counted_[t] ? T(1) : T(0);
    n += counted(t, 0) != T(0);
  }
  Array<T> f = Array<T>::from_shape({E});
  f.fill(T(0));
  for (std::size_t t = 0; t < N; ++t)
    if (counted(t, 0) != T(0))
      for (std::size_t j = 0; j < k; ++j) f(routing_.chosen[t * k + j]) += T(1);
  if (n == 0) return sum(probs * T(0));  // nothing counted: zero, still on the tape
  f /= static_cast<T>(n);
  const Tensor<T> P = sum(probs * Tensor<T>(counted), {0}) / static_cast<T>(n);
  return sum(P * Tensor<T>(f)) * static_cast<T>(E);
}

// x (..., D) -> flat (N, D) @ W_router (D, E) -> logits (N, E) -> p = softmax (N, E)
// -> top k per token (routing, off the tape) -> dispatched = flat[token_of_slot] (S, D),
// S = N*k less the choices over capacity (training forwards only; evaluation, generation
// and hooks are dropless, as Mixtral runs them), expert e on its rows [start_e, stop_e) -> joined
// (S, D), and a zero row (S+1, D) when any choice was dropped
// -> y[t] = sum_j w[t, j] * joined[slot_of_choice(t, j)] (N, D) -> (..., D).
// backward: embedding's scatter-add returns each slot's gradient to its token,
// weighted_row_sum's each choice's to its slot and to its weight; slice/concatenate, the
// experts' matmuls, softmax, the gather of p.
template <class T>
Tensor<T> MixtureOfExperts<T>::forward(const Tensor<T>& x) {
  const std::size_t D = config_.d_model, E = config_.experts;
  if (x.dim() == 0 || x.shape().back() != D)
    fail("MixtureOfExperts", "x of shape {} must end in d_model={} (router is {})",
         x.shape_string(), D, router_.weight().shape_string());
  const Shape shape = x.shape();
  const std::size_t N = x.size() / D;
  const Tensor<T> flat = reshape(x, {N, D});
  const Tensor<T> logits = hook_("moe.router_logits", router_(flat));
  const Tensor<T> probs = softmax(logits, -1);
  const double capacity = training_ ? config_.capacity : 0.0;
  routing_ = route_top_k(probs.value(), config_.top_k,
                         expert_capacity(capacity, N, config_.top_k, E));
  show_choices();

  const Tensor<T> dispatched = embedding(flat, routing_.token_of_slot);
  std::vector<Tensor<T>> outputs;
  for (std::size_t e = 0; e < E; ++e) {
    if (routing_.count(e) == 0) continue;  // an idle expert computes nothing
    outputs.push_back(expert(e, slice(dispatched, 0, routing_.expert_start[e],
                                      routing_.expert_start[e + 1])));
  }
  // the choices over capacity read a zero row after the kept ones (Routing::slot_of_choice)
  if (routing_.dropped > 0) outputs.push_back(Tensor<T>::zeros({1, D}));
  const Tensor<T> joined = outputs.size() == 1 ? outputs[0] : concatenate(outputs, 0);

  const Tensor<T> weights = hook_("moe.hook_weights", kept_weights(probs));
  const Tensor<T> y = weighted_row_sum(joined, routing_.slot_of_choice, weights);

  aux_loss_ = aux_loss(probs);
  // logsumexp(l) = l_0 - log_softmax(l)_0: the stable form, from one column
  const Tensor<T> lse = slice(logits, 1, 0, 1) - slice(log_softmax(logits, -1), 1, 0, 1);
  z_loss_ = mean(lse * lse);
  return reshape(y, shape);
}

// The routing's choices (N, k) at the hook point moe.choices, as numbers in T: a cache can
// keep them, a function cannot replace them (the routing is not a tensor on the tape).
template <class T>
void MixtureOfExperts<T>::show_choices() const {
  if (!hook_.visit("moe.choices")) return;
  const std::string name = hook_.prefix + "moe.choices";
  if (hook_.hooks->changes(name))
    fail("MixtureOfExperts", "the hook point '{}' can be cached, not changed (patch "
         "moe.router_logits to change the routing)", name);
  Array<T> chosen = Array<T>::from_shape({routing_.tokens, routing_.top_k});
  for (std::size_t i = 0; i < chosen.size(); ++i) chosen.data()[i] = T(routing_.chosen[i]);
  hook_.hooks->apply(name, Tensor<T>(std::move(chosen)));
}

template class MixtureOfExperts<float>;
template class MixtureOfExperts<double>;

}  // namespace tapegrad
