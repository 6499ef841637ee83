#pragma once
// What the attention of a model is doing on one batch, read from the model itself: the
// spread of the scores the softmax sees, how peaked its rows are, the largest logit, and the
// gradient that reaches the scores (from d loss / d weights, kept on the tape).
#include <cstddef>
#include <vector>

#include "nn/transformer.hpp"
#include "tasks/tasks.hpp"

namespace tapegrad::saturation {

struct AttentionProbe {
  // Over the query rows from first_row on, every layer, head and batch item:
  double score_spread = 0;        // mean over rows of the std of the row's visible scores
  double mean_max_weight = 0;     // mean over rows of the row's largest weight
  double max_score = 0;           // the largest visible score (the "attention logit")
  double median_grad_scores = 0;  // median over rows of ||d loss / d scores[row]||
  // The same one step further back, at scale * q.k before a soft-cap c tanh(x / c): the
  // cap's flat ends can take over the vanishing a capped softmax no longer has. Equal to
  // median_grad_scores without a cap; NaN with a cap and a bias (the bias hides x).
  double median_grad_logits = 0;
};

// The gradient of a loss at the scores s of one softmax row, from the row's weights w and
// d loss / d w = g: d loss / d s_j = w_j (g_j - sum_k w_k g_k). Returns its norm.
double softmax_row_gradient_norm(const float* w, const float* g, std::size_t n);
// The same before a soft-cap c from the capped scores s of the row: each component times
// d s_j / d x_j = 1 - (s_j / c)^2 (c = 0: no cap).
double capped_row_gradient_norm(const float* w, const float* g, const float* s, std::size_t n,
                                double cap);

// Forward and backward of the model's loss on `batch` with the attention weights kept on
// the tape; the model's gradients are cleared again afterwards (the optimiser never sees
// them). Rows before first_row (which see few keys) are left out.
AttentionProbe probe_attention(Transformer<float>& model, const tasks::Batch& batch,
                               std::size_t first_row);

// The same statistics from weights (B, heads, T, T), scores of that shape (-inf where
// masked) and optionally d loss / d weights (null: the gradient is reported as 0), pooled
// over the given layers. Exposed for tests.
struct ProbeLayer {
  const float* weights;
  const float* scores;
  const float* grad;  // may be null
  std::size_t mats, T;
  double softcap = 0;  // the cap the scores went through (0: none)
};
AttentionProbe probe_statistics(const std::vector<ProbeLayer>& layers, std::size_t first_row);

}  // namespace tapegrad::saturation
