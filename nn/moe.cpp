#include "nn/moe.hpp"

#include <string>

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
  const FeedForwardConfig each{c.d_model, c.hidden, c.mlp, c.mlp_bias, c.std, c.out_std};
  for (std::size_t e = 0; e < c.experts; ++e) experts_.emplace_back(each, gen);
  for (std::size_t e = 0; e < c.experts; ++e)
    this->register_module("experts." + std::to_string(e), experts_[e]);
}

// x (..., D) -> flat (N, D) @ W_router (D, E) -> logits (N, E) -> p = softmax (N, E)
// -> choose: top k per token (routing, off the tape) -> dispatch: each expert on its
// contiguous rows of the sorted tokens -> joined (S[+1], D), S = N*k less the choices over
// capacity (training forwards only; evaluation, generation and hooks are dropless, as
// Mixtral runs them) -> combine with the kept weights: y (N, D) -> (..., D).
// backward: through the dispatch and combine ops (nn/moe_routing.cpp), the experts'
// matmuls, softmax and the gather of p.
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

  const Tensor<T> joined = run_experts<T>(
      flat, routing_, [this](std::size_t e, const Tensor<T>& rows) { return experts_[e](rows); });
  const Tensor<T> weights = hook_("moe.hook_weights", kept_weights(probs, routing_, config_.renorm));
  const Tensor<T> y = combine_experts(joined, routing_, weights);

  aux_loss_ = load_balancing_loss(probs, routing_, counted_);
  z_loss_ = router_z_loss(logits);
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
