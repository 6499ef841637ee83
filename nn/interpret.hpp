#pragma once
// Interpretability helpers built on the hook points (nn/hooks.hpp), each a few lines: a hook
// that zeroes or mean-ablates one head's output, activation patching over a grid of
// (layer, position) or (layer, head): run the corrupted tokens with one piece of the clean
// run's activations put back and measure how much of the clean behaviour returns; and
// direct logit attribution: how much each head writes straight into the right answer.
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

// Direct logit attribution of one run: the residual stream at the end is a sum of what the
// embeddings, each head (its z slice @ its rows of Wo) and each MLP wrote into it; with the
// final norm frozen at this run's scale (and centring, for layer_norm), each of those maps
// linearly onto the logits. Every number is a mean over the positions whose target is not
// ignore_index of that component's share of the target token's logit (before any final
// soft-cap). A head silenced by a head mask gets 0.
struct LogitAttribution {
  std::vector<std::vector<double>> heads;  // [layer][head]
  double embed = 0;  // the token embedding, plus the learned positions where the model has them
  double logit = 0;  // the target logits themselves: ln_final.out @ the unembedding
  // What the rest wrote (MLPs or experts, the final norm's bias): logit - embed - the heads.
  double rest = 0;
};
template <class T>
LogitAttribution direct_logit_attribution(Transformer<T>& model, const Indices& tokens,
                                          const Indices& targets, std::int64_t ignore_index = -100);

}  // namespace tapegrad
