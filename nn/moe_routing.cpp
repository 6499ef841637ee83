#include "nn/moe_routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/errors.hpp"

namespace tapegrad {

// probs (T, E) -> top k per row, then a counting sort of the T*k slots by expert:
// O(T*E log k) for the choice, O(T*k + E) for the sort; no comparison sort over tokens.
std::size_t expert_capacity(double factor, std::size_t tokens, std::size_t k, std::size_t experts) {
  if (!(factor >= 0) || !std::isfinite(factor) || experts == 0)
    fail("expert_capacity", "capacity factor {} must be finite and >= 0 (experts={})", factor, experts);
  if (factor == 0) return 0;
  const double slots = std::ceil(factor * double(tokens) * double(k) / double(experts));
  return std::max<std::size_t>(1, std::size_t(slots));
}

template <class T>
Routing route_top_k(const Array<T>& probs, std::size_t k, std::size_t capacity) {
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
  r.capacity = capacity;
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
  // counting sort of the kept slots by expert; within an expert, tokens stay in order
  std::vector<std::size_t> load(experts, 0);
  for (std::size_t e : r.chosen) ++load[e];
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

template Routing route_top_k(const Array<float>& probs, std::size_t k, std::size_t capacity);
template Routing route_top_k(const Array<double>& probs, std::size_t k, std::size_t capacity);

}  // namespace tapegrad
