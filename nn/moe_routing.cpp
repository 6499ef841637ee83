#include "nn/moe_routing.hpp"

#include <algorithm>
#include <numeric>

#include "autograd/errors.hpp"

namespace tapegrad {

// probs (T, E) -> top k per row, then a counting sort of the T*k slots by expert:
// O(T*E log k) for the choice, O(T*k + E) for the sort; no comparison sort over tokens.
template <class T>
Routing route_top_k(const Array<T>& probs, std::size_t k) {
  if (probs.dimension() != 2)
    fail("route_top_k", "probs must be (T, E), got {}",
         shape_str(Shape(probs.shape().begin(), probs.shape().end())));
  const std::size_t tokens = probs.shape()[0], experts = probs.shape()[1];
  if (k < 1 || k > experts)
    fail("route_top_k", "k={} must be in [1, E={}] (probs are ({}, {}))", k, experts, tokens,
         experts);
  Routing r;
  r.tokens = tokens;
  r.experts = experts;
  r.top_k = k;
  r.chosen.resize(tokens * k);
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
    std::copy(order.begin(), order.begin() + static_cast<long>(k), r.chosen.begin() + t * k);
  }
  // counting sort of the slots by expert; within an expert, tokens stay in order
  r.expert_start.assign(experts + 1, 0);
  for (std::size_t e : r.chosen) ++r.expert_start[e + 1];
  std::partial_sum(r.expert_start.begin(), r.expert_start.end(), r.expert_start.begin());
  std::vector<std::size_t> next(r.expert_start.begin(), r.expert_start.end() - 1);
  r.token_of_slot = Indices::from_shape({tokens * k});
  r.slot_of_choice.assign(k, Indices::from_shape({tokens}));
  r.choice_index.assign(k, Indices::from_shape({tokens}));
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t e = r.chosen[t * k + j];
      const std::size_t slot = next[e]++;
      r.token_of_slot(slot) = static_cast<std::int64_t>(t);
      r.slot_of_choice[j](t) = static_cast<std::int64_t>(slot);
      r.choice_index[j](t) = static_cast<std::int64_t>(t * experts + e);
    }
  }
  r.fraction.resize(experts);
  for (std::size_t e = 0; e < experts; ++e)
    r.fraction[e] = tokens ? double(r.count(e)) / double(tokens) : 0.0;
  return r;
}

template Routing route_top_k(const Array<float>& probs, std::size_t k);
template Routing route_top_k(const Array<double>& probs, std::size_t k);

}  // namespace tapegrad
