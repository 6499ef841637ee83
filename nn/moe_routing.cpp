#include "nn/moe_routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/errors.hpp"
#include "ops/elementwise.hpp"
#include "ops/reduce.hpp"
#include "ops/shape_ops.hpp"
#include "ops/softmax.hpp"

namespace tapegrad {

std::size_t expert_capacity(double factor, std::size_t tokens, std::size_t k, std::size_t experts) {
  if (!(factor >= 0) || !std::isfinite(factor) || experts == 0)
    fail("expert_capacity", "capacity factor {} must be finite and >= 0 (experts={})", factor, experts);
  if (factor == 0) return 0;
  const double slots = std::ceil(factor * double(tokens) * double(k) / double(experts));
  return std::max<std::size_t>(1, std::size_t(slots));
}

template <class T>
std::vector<std::size_t> choose_top_k(const Array<T>& probs, std::size_t k) {
  if (probs.dimension() != 2)
    fail("route_top_k", "probs must be (T, E), got {}",
         shape_str(Shape(probs.shape().begin(), probs.shape().end())));
  const std::size_t tokens = probs.shape()[0], experts = probs.shape()[1];
  if (k < 1 || k > experts)
    fail("route_top_k", "k={} must be in [1, E={}] (probs are ({}, {}))", k, experts, tokens,
         experts);
  std::vector<std::size_t> chosen(tokens * k);
  std::vector<std::size_t> order(experts);
  const T* p = probs.data();
  for (std::size_t t = 0; t < tokens; ++t) {
    const T* row = p + t * experts;
    std::iota(order.begin(), order.end(), std::size_t{0});
    // only the first k in order: higher probability first, among equal ones the lower index
    std::partial_sort(order.begin(), order.begin() + static_cast<long>(k), order.end(),
                      [row](std::size_t a, std::size_t b) {
                        return row[a] > row[b] || (row[a] == row[b] && a < b);
                      });
    std::copy(order.begin(), order.begin() + static_cast<long>(k), chosen.begin() + t * k);
  }
  return chosen;
}

// A counting sort of the T*k slots by expert: O(T*k + E), no comparison sort over tokens.
Routing plan_dispatch(std::vector<std::size_t> chosen, std::size_t tokens, std::size_t experts,
                      std::size_t k, std::size_t capacity) {
  if (chosen.size() != tokens * k)
    fail("plan_dispatch", "{} choices for {} tokens with k={}", chosen.size(), tokens, k);
  Routing r;
  r.tokens = tokens;
  r.experts = experts;
  r.top_k = k;
  r.capacity = capacity;
  r.chosen = std::move(chosen);
  std::vector<std::size_t> load(experts, 0);
  for (std::size_t e : r.chosen) {
    if (e >= experts) fail("plan_dispatch", "expert {} chosen, but there are {}", e, experts);
    ++load[e];
  }
  // within an expert, tokens stay in order
  r.expert_start.assign(experts + 1, 0);
  for (std::size_t e = 0; e < experts; ++e)
    r.expert_start[e + 1] = r.expert_start[e] + (capacity ? std::min(load[e], capacity) : load[e]);
  std::vector<std::size_t> next(r.expert_start.begin(), r.expert_start.end() - 1);
  const auto dropped_slot = static_cast<std::int64_t>(r.kept());
  r.token_of_slot = Indices::from_shape({r.kept()});
  r.slot_of_choice = Indices::from_shape({tokens, k});
  r.choice_index = Indices::from_shape({tokens, k});
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t e = r.chosen[t * k + j];
      r.choice_index(t, j) = static_cast<std::int64_t>(t * experts + e);
      if (next[e] == r.expert_start[e + 1]) {  // expert e is full
        r.slot_of_choice(t, j) = dropped_slot;
        ++r.dropped;
        continue;
      }
      const std::size_t slot = next[e]++;
      r.token_of_slot(slot) = static_cast<std::int64_t>(t);
      r.slot_of_choice(t, j) = static_cast<std::int64_t>(slot);
    }
  }
  r.fraction.resize(experts);
  for (std::size_t e = 0; e < experts; ++e)
    r.fraction[e] = tokens ? double(load[e]) / double(tokens) : 0.0;
  return r;
}

template <class T>
Routing route_top_k(const Array<T>& probs, std::size_t k, std::size_t capacity) {
  std::vector<std::size_t> chosen = choose_top_k(probs, k);
  return plan_dispatch(std::move(chosen), probs.shape()[0], probs.shape()[1], k, capacity);
}

// probs (N, E) -> kept weights (N, k): w[t, j] = p[t, chosen_j(t)], divided by
// sum_j w[t, j] when renorm. The gather reads probs as N*E rows of one value, so the
// gradient reaches p (and the router) only at the kept entries (and through the sum).
// k = 1 with renorm: every weight is exactly 1, a constant: the LM loss gives the router
// no gradient at all (p / p would give a rounding-sized one).
template <class T>
Tensor<T> kept_weights(const Tensor<T>& probs, const Routing& r, bool renorm) {
  const std::size_t N = r.tokens, E = r.experts, k = r.top_k;
  if (probs.shape() != Shape{N, E})
    fail("kept_weights", "probs of shape {} for a routing of {} tokens over {} experts",
         probs.shape_string(), N, E);
  if (k == 1 && renorm) return Tensor<T>::ones({N, 1});
  const Tensor<T> w = reshape(embedding(reshape(probs, {N * E, 1}), r.choice_index), {N, k});
  return renorm ? w / sum(w, {1}, true) : w;
}

// probs (N, E) -> aux = E * sum_e f_e P_e over the counted tokens (all when none are set):
// f_e = (counted tokens with e among their k choices) / n, a constant (counts carry no
// gradient); P = sum over counted t of p[t, :] / n, through a constant 0/1 column.
template <class T>
Tensor<T> load_balancing_loss(const Tensor<T>& probs, const Routing& r,
                              const std::vector<bool>& counted_tokens) {
  const std::size_t N = probs.shape()[0], E = r.experts, k = r.top_k;
  if (!counted_tokens.empty() && counted_tokens.size() != N)
    fail("MixtureOfExperts", "{} counted-token flags for probs of shape {} ({} tokens)",
         counted_tokens.size(), probs.shape_string(), N);
  Array<T> counted = Array<T>::from_shape({N, 1});
  std::size_t n = 0;
  for (std::size_t t = 0; t < N; ++t) {
    counted(t, 0) = counted_tokens.empty() || counted_tokens[t] ? T(1) : T(0);
    n += counted(t, 0) != T(0);
  }
  Array<T> f = Array<T>::from_shape({E});
  f.fill(T(0));
  for (std::size_t t = 0; t < N; ++t)
    if (counted(t, 0) != T(0))
      for (std::size_t j = 0; j < k; ++j) f(r.chosen[t * k + j]) += T(1);
  if (n == 0) return sum(probs * T(0));  // nothing counted: zero, still on the tape
  f /= static_cast<T>(n);
  const Tensor<T> P = sum(probs * Tensor<T>(counted), {0}) / static_cast<T>(n);
  return sum(P * Tensor<T>(f)) * static_cast<T>(E);
}

// logsumexp(l) = l_0 - log_softmax(l)_0: the stable form, from one column
template <class T>
Tensor<T> router_z_loss(const Tensor<T>& logits) {
  const Tensor<T> lse = slice(logits, 1, 0, 1) - slice(log_softmax(logits, -1), 1, 0, 1);
  return mean(lse * lse);
}

// x (N, D) -> dispatched = x[token_of_slot] (S, D) -> expert e on its rows
// [start_e, stop_e) -> joined (S, D), and a zero row (S+1, D) when any choice was dropped.
// backward: embedding's scatter-add returns each slot's gradient to its token; slice and
// concatenate each expert's to its rows.
template <class T>
Tensor<T> run_experts(const Tensor<T>& x, const Routing& r, const ExpertFunction<T>& expert) {
  const Tensor<T> dispatched = embedding(x, r.token_of_slot);
  std::vector<Tensor<T>> outputs;
  for (std::size_t e = 0; e < r.experts; ++e) {
    if (r.count(e) == 0) continue;  // an idle expert computes nothing
    outputs.push_back(expert(e, slice(dispatched, 0, r.expert_start[e], r.expert_start[e + 1])));
  }
  // the choices over capacity read a zero row after the kept ones (Routing::slot_of_choice)
  if (r.dropped > 0) outputs.push_back(Tensor<T>::zeros({1, x.shape()[1]}));
  return outputs.size() == 1 ? outputs[0] : concatenate(outputs, 0);
}

// joined (S[+1], D), weights (N, k) -> y (N, D); backward: weighted_row_sum's each choice's
// gradient to its slot and to its weight.
template <class T>
Tensor<T> combine_experts(const Tensor<T>& joined, const Routing& r, const Tensor<T>& weights) {
  return weighted_row_sum(joined, r.slot_of_choice, weights);
}

template Routing route_top_k(const Array<float>& probs, std::size_t k, std::size_t capacity);
template Routing route_top_k(const Array<double>& probs, std::size_t k, std::size_t capacity);

#define TAPEGRAD_ROUTER_INSTANTIATE(T)                                                         \
  template std::vector<std::size_t> choose_top_k(const Array<T>&, std::size_t);                \
  template Tensor<T> kept_weights(const Tensor<T>&, const Routing&, bool);                     \
  template Tensor<T> load_balancing_loss(const Tensor<T>&, const Routing&,                     \
                                         const std::vector<bool>&);                            \
  template Tensor<T> router_z_loss(const Tensor<T>&);                                          \
  template Tensor<T> run_experts(const Tensor<T>&, const Routing&, const ExpertFunction<T>&);  \
  template Tensor<T> combine_experts(const Tensor<T>&, const Routing&, const Tensor<T>&);
TAPEGRAD_ROUTER_INSTANTIATE(float)
TAPEGRAD_ROUTER_INSTANTIATE(double)
#undef TAPEGRAD_ROUTER_INSTANTIATE

}  // namespace tapegrad
