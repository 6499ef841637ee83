#pragma once
// Interpretability helpers built on the hook points (nn/hooks.hpp), each a few lines: a hook
// that zeroes or mean-ablates one head's output, and activation patching over a grid of
// (layer, position) or (layer, head): run the corrupted tokens with one piece of the clean
// run's activations put back and measure how much of the clean behaviour returns.
#include <cstddef>
#include <functional>
#include <vector>

#include "nn/hooks.hpp"
#include "nn/transformer.hpp"

namespace tapegrad {

// For the point blocks.{l}.attn.z (B, T, heads, dh): the same with head `head`'s slice
// zeroed (the head removed, as Transformer::ablate_head does with its mask).
template <class T>
HookFn<T> zero_head(std::size_t head);
// The same slice replaced by its mean over the batch and positions (mean ablation).
template <class T>
HookFn<T> mean_head(std::size_t head);

// A number from a run's logits (B, T, V), e.g. the logit difference of two answers.
template <class T>
using LogitMetric = std::function<double(const Tensor<T>& logits)>;

// result[l][p]: metric of the corrupted run with blocks.{l}.resid_pre at position p taken
// from the clean run (tokens of the same shape), for every layer and position.
template <class T>
std::vector<std::vector<double>> patch_residual_by_position(Transformer<T>& model,
                                                            const Indices& clean,
                                                            const Indices& corrupted,
                                                            const LogitMetric<T>& metric);
// result[l][h]: the same with head h's output (blocks.{l}.attn.z) taken from the clean run.
template <class T>
std::vector<std::vector<double>> patch_heads(Transformer<T>& model, const Indices& clean,
                                             const Indices& corrupted,
                                             const LogitMetric<T>& metric);

}  // namespace tapegrad
