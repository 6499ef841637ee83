#pragma once
// The mixture-of-experts feed-forward (docs/ARCHITECTURE.md states the
// conventions): a router W_router (D, E) without bias, p = softmax over all E experts, each
// token to its top k experts by p (ties: the lower index), the kept weights divided by their
// sum when `renorm` (Mixtral's norm_topk_prob; never a softmax over the kept logits alone),
// each expert the model's MLP with its own weights.
//
// The layer is composed from ops already on the tape and gradchecked: the row gathers are
// embedding() (its backward is the scatter-add), each expert runs its matrix products on
// its contiguous rows of the expert-sorted tokens, concatenate() joins them back.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"
#include "nn/feed_forward.hpp"
#include "nn/hooks.hpp"
#include "nn/init.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"
#include "nn/moe_routing.hpp"

namespace tapegrad {

struct MoEConfig {
  std::size_t d_model = 0, hidden = 0, experts = 0, top_k = 2;
  MlpKind mlp = MlpKind::gelu;  // each expert's feed-forward
  bool mlp_bias = true, renorm = true;
  // Switch's capacity factor, in a training forward only (set_training): each expert takes
  // at most ceil(capacity * N * k / E) of the forward's N tokens, the earliest; a dropped
  // choice adds nothing. 0: dropless.
  double capacity = 0;
  double std = init::gpt2_std;          // router and expert input weights
  double out_std = init::gpt2_std;      // expert output weights (they write the residual)
};

// x (..., D) -> (..., D). Parameters, in order: router.weight (D, E), then experts.<e>.* as
// the dense MLP names them (fc, proj; or gate, up, down).
template <class T>
class MixtureOfExperts : public Module<T> {
 public:
  MixtureOfExperts(const MoEConfig& config, Generator& gen);
  Tensor<T> forward(const Tensor<T>& x);
  Tensor<T> operator()(const Tensor<T>& x) { return forward(x); }

  // The last forward's losses, scalars on the tape:
  //   aux = E * sum_e f_e * P_e, f_e = fraction of tokens with e among their k choices (no
  //         gradient), P_e = mean over tokens of p[:, e]; k at perfect balance;
  //   z   = mean over tokens of logsumexp(logits)^2 (ST-MoE's router z-loss).
  const Tensor<T>& aux_loss() const { return aux_loss_; }
  const Tensor<T>& z_loss() const { return z_loss_; }
  // The tokens (of x read as (N, D)) that count in f and P: the positions a task's loss
  // counts, so that padding and prompts do not balance the load. Empty (the default): all.
  // Kept for every forward until changed.
  void set_counted_tokens(std::vector<bool> counted) { counted_ = std::move(counted); }

  // The last forward's routing (its `fraction` is the per-expert load over all tokens).
  const Routing& routing() const { return routing_; }
  const MoEConfig& config() const { return config_; }
  // Whether forwards are training forwards, the only ones config().capacity limits. Off
  // (the default), every token goes through its k experts, so its output depends on its
  // own row alone: never on its batch mates, nor on how a sequence is split into calls.
  void set_training(bool training) { training_ = training; }
  // The run's hook points: moe.router_logits (N, E), which the routing follows;
  // moe.choices (N, k), each token's experts as numbers, which can be read, not changed;
  // moe.hook_weights (N, k), the kept weights the experts' outputs are summed with.
  void set_hooks(Hooks<T>* hooks, const std::string& prefix) { hook_ = {hooks, prefix}; }

 private:
  MoEConfig config_;
  Linear<T> router_;
  std::vector<FeedForward<T>> experts_;

  std::vector<bool> counted_;
  bool training_ = false;
  Tensor<T> aux_loss_, z_loss_;
  Routing routing_;
  HookPoint<T> hook_;

  void show_choices() const;
};

extern template class MixtureOfExperts<float>;
extern template class MixtureOfExperts<double>;

}  // namespace tapegrad
