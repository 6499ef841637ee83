#pragma once
// The mixture of experts' routing decision, outside the tape: which k experts each token
// goes to and where its rows sit once the tokens are sorted by expert. Nothing here is
// differentiated: the choice of experts is piecewise constant in the router's logits; the
// gradient reaches the router through the kept probabilities (nn/moe.cpp).
#include <cstddef>
#include <vector>

#include "autograd/tensor.hpp"
#include "ops/embedding.hpp"  // Indices

namespace tapegrad {

struct Routing {
  std::size_t tokens = 0, experts = 0, top_k = 0;
  // chosen[t * k + j]: token t's j-th expert, by probability, highest first (ties: lower index)
  std::vector<std::size_t> chosen;
  // The T*k (token, choice) slots sorted by expert, then by token: token_of_slot[s] is the
  // token in slot s, and expert e owns slots [expert_start[e], expert_start[e + 1]).
  Indices token_of_slot;
  std::vector<std::size_t> expert_start;
  // slot_of_choice[j][t]: the slot of token t's j-th choice (the inverse permutation).
  std::vector<Indices> slot_of_choice;
  // choice_index[j][t] = t * E + chosen[t * k + j]: token t's j-th probability in p (T, E)
  // read as T*E rows of one value.
  std::vector<Indices> choice_index;
  // f_e = (tokens that have e among their k choices) / T: the load-balancing loss's f.
  std::vector<double> fraction;

  std::size_t count(std::size_t e) const { return expert_start[e + 1] - expert_start[e]; }
};

// probs (T, E): each row a distribution over the experts; 1 <= k <= E.
template <class T>
Routing route_top_k(const Array<T>& probs, std::size_t k);

}  // namespace tapegrad
