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

// probs (T, E): each row a distribution over the experts; 1 <= k <= E; capacity as above.
template <class T>
Routing route_top_k(const Array<T>& probs, std::size_t k, std::size_t capacity = 0);

}  // namespace tapegrad
