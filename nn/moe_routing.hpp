#pragma once
// The mixture of experts' router, in two halves each usable alone:
//   choose   which k experts each token goes to (choose_top_k, off the tape) and with what
//            weight (kept_weights, renormalised or not), and the router's losses
//            (load_balancing_loss, router_z_loss), on the tape;
//   dispatch where each token's rows sit once sorted by expert (plan_dispatch, off the
//            tape), each expert run on its contiguous rows (run_experts), and the weighted
//            sum of each token's outputs (combine_experts), on the tape.
// The choice of experts is piecewise constant in the router's logits, so it is not
// differentiated; the gradient reaches the router through the kept probabilities.
#include <cstddef>
#include <functional>
#include <vector>

#include "autograd/tensor.hpp"
#include "ops/embedding.hpp"  // Indices

namespace tapegrad {

struct Routing {
  std::size_t tokens = 0, experts = 0, top_k = 0;
  // The most (token, choice) slots an expert takes; 0: no limit (dropless).
  std::size_t capacity = 0;
  // chosen[t * k + j]: token t's j-th expert, by probability, highest first (ties: lower index)
  std::vector<std::size_t> chosen;
  // The kept (token, choice) slots sorted by expert, then by token: token_of_slot[s] is the
  // token in slot s, and expert e owns slots [expert_start[e], expert_start[e + 1]). An
  // expert over capacity keeps its earliest tokens; the rest of its choices are dropped.
  Indices token_of_slot;
  std::vector<std::size_t> expert_start;
  // slot_of_choice(t, j), (T, k): the slot of token t's j-th choice, or kept() when it was
  // dropped (the layer puts a zero row there: a dropped choice adds nothing, the residual
  // remains).
  Indices slot_of_choice;
  // choice_index(t, j) = t * E + chosen[t * k + j], (T, k): token t's j-th probability in
  // p (T, E) read as T*E rows of one value.
  Indices choice_index;
  // f_e = (tokens that have e among their k choices) / T, before any drop: the
  // load-balancing loss's f.
  std::vector<double> fraction;
  std::size_t dropped = 0;  // choices over capacity

  std::size_t count(std::size_t e) const { return expert_start[e + 1] - expert_start[e]; }
  std::size_t kept() const { return expert_start.back(); }
  double dropped_fraction() const { return tokens ? double(dropped) / double(tokens * top_k) : 0.0; }
};

// Switch's expert capacity: ceil(factor * T * k / E) slots per expert; 0 (no limit) when
// factor is 0. At least 1.
std::size_t expert_capacity(double factor, std::size_t tokens, std::size_t k, std::size_t experts);

// --- choose ---

// probs (T, E) -> chosen (T*k): each token's k experts, highest probability first (ties:
// the lower index); 1 <= k <= E.
template <class T>
std::vector<std::size_t> choose_top_k(const Array<T>& probs, std::size_t k);

// probs (T, E) -> the chosen experts' weights (T, k): p[t, chosen_j(t)], divided by their
// sum over j when `renorm` (Mixtral's norm_topk_prob).
template <class T>
Tensor<T> kept_weights(const Tensor<T>& probs, const Routing& routing, bool renorm);

// probs (T, E) -> Switch's load-balancing loss E * sum_e f_e * P_e over the counted tokens
// (all when `counted` is empty): f_e the fraction of them with e among their k choices (no
// gradient), P_e the mean of their p[:, e]. k at perfect balance.
template <class T>
Tensor<T> load_balancing_loss(const Tensor<T>& probs, const Routing& routing,
                              const std::vector<bool>& counted);

// logits (T, E) -> ST-MoE's router z-loss: the mean over tokens of logsumexp(logits)^2.
template <class T>
Tensor<T> router_z_loss(const Tensor<T>& logits);

// --- dispatch ---

// chosen (T*k, as choose_top_k gives it) -> the slots sorted by expert, capacity as above.
Routing plan_dispatch(std::vector<std::size_t> chosen, std::size_t tokens, std::size_t experts,
                      std::size_t k, std::size_t capacity = 0);

// probs (T, E) -> plan_dispatch(choose_top_k(probs, k), ...): both halves' off-tape parts.
template <class T>
Routing route_top_k(const Array<T>& probs, std::size_t k, std::size_t capacity = 0);

// expert(e, rows (n_e, D)) -> (n_e, D): one expert on its own rows.
template <class T>
using ExpertFunction = std::function<Tensor<T>(std::size_t, const Tensor<T>&)>;

// x (T, D) -> each expert on its contiguous rows of the expert-sorted tokens -> joined
// (S, D), S the kept slots, and a zero row after them when a choice was dropped.
template <class T>
Tensor<T> run_experts(const Tensor<T>& x, const Routing& routing, const ExpertFunction<T>& expert);

// joined (S[+1], D), weights (T, k) -> y[t] = sum_j weights[t, j] * joined[slot of (t, j)]
// (T, D): a dropped choice reads the zero row and adds nothing.
template <class T>
Tensor<T> combine_experts(const Tensor<T>& joined, const Routing& routing, const Tensor<T>& weights);

}  // namespace tapegrad
