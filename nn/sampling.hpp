#pragma once
// Choosing the next token from a row of logits (the last position's output of the
// model), in this order:
//   1. temperature: z = logits / temperature, p = softmax(z); temperature 0 is not a
//      temperature (z would divide by zero) but greedy: the highest logit, always
//   2. top-k (0 = off): keep the tokens whose z is at least the k-th largest z, so tokens
//      tied with the k-th are all kept (more than k survive a tie)
//   3. top-p: over the survivors renormalised, the smallest prefix of the descending
//      distribution whose mass reaches p; the token that crosses p is kept (dropping it,
//      `cumsum <= p`, is the classic off-by-one: with p below the top probability it keeps
//      nothing)
//   4. renormalise the kept probabilities and draw one with the explicit Generator.
// Ties in the descending order keep the lower id first, so the same seed gives the same
// tokens on every platform.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "autograd/tensor.hpp"  // Generator

namespace tapegrad {

struct SamplingOptions {
  double temperature = 1.0;  // >= 0; 0: greedy argmax
  std::size_t top_k = 0;     // 0: off
  double top_p = 1.0;        // in (0, 1]; 1: off
};

// ShapeError "sample: ..." naming the option: temperature < 0 or not finite, top-p outside
// (0, 1] (NaN included).
void check_sampling_options(const SamplingOptions& options);

// The distribution the draw is made from: V probabilities, zero for every dropped token,
// summing to 1 (computed in double whatever T is). Greedy: one-hot at the first largest
// logit. ShapeError for V = 0, bad options, or a NaN logit.
template <class T>
std::vector<double> sampling_probabilities(const T* logits, std::size_t V,
                                           const SamplingOptions& options);

// One token drawn from sampling_probabilities (greedy draws nothing from gen).
template <class T>
std::int64_t sample_token(const T* logits, std::size_t V, const SamplingOptions& options,
                          Generator& gen);

// A draw from probabilities that sum to 1 (zeros never drawn): one uniform from gen.
std::int64_t draw(const std::vector<double>& probabilities, Generator& gen);

}  // namespace tapegrad
