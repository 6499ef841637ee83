#include "examples/saturation/probe.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "autograd/tape.hpp"
#include "ops/cross_entropy.hpp"

namespace tapegrad::saturation {

double softmax_row_gradient_norm(const float* w, const float* g, std::size_t n) {
  return capped_row_gradient_norm(w, g, nullptr, n, 0);
}

double capped_row_gradient_norm(const float* w, const float* g, const float* s, std::size_t n,
                                double cap) {
  double wg = 0;
  for (std::size_t j = 0; j < n; ++j) wg += double(w[j]) * double(g[j]);
  double sum = 0;
  for (std::size_t j = 0; j < n; ++j) {
    double d = double(w[j]) * (double(g[j]) - wg);
    // a masked key (-inf, weight 0) adds nothing either way
    if (cap > 0 && std::isfinite(s[j])) d *= 1 - (double(s[j]) / cap) * (double(s[j]) / cap);
    sum += d * d;
  }
  return std::sqrt(sum);
}

namespace {

// The std of the finite scores of one row (the visible keys), and their maximum.
void row_spread(const float* s, std::size_t n, double& spread, double& top) {
  double sum = 0, sq = 0;
  std::size_t k = 0;
  for (std::size_t j = 0; j < n; ++j)
    if (std::isfinite(s[j])) {
      sum += s[j];
      ++k;
      top = std::max(top, double(s[j]));
    }
  const double mean = k ? sum / double(k) : 0;
  for (std::size_t j = 0; j < n; ++j)
    if (std::isfinite(s[j])) sq += (s[j] - mean) * (s[j] - mean);
  spread = k > 1 ? std::sqrt(sq / double(k)) : 0;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[mid];
}

}  // namespace

AttentionProbe probe_statistics(const std::vector<ProbeLayer>& layers, std::size_t first_row) {
  AttentionProbe p;
  p.max_score = -std::numeric_limits<double>::infinity();
  std::vector<double> grads, before_cap;
  std::size_t rows = 0;
  for (const ProbeLayer& l : layers)
    for (std::size_t m = 0; m < l.mats; ++m)
      for (std::size_t i = first_row; i < l.T; ++i) {
        const std::size_t at = (m * l.T + i) * l.T;
        double spread = 0;
        row_spread(l.scores + at, l.T, spread, p.max_score);
        p.score_spread += spread;
        p.mean_max_weight += *std::max_element(l.weights + at, l.weights + at + l.T);
        if (l.grad) {
          grads.push_back(softmax_row_gradient_norm(l.weights + at, l.grad + at, l.T));
          before_cap.push_back(
              capped_row_gradient_norm(l.weights + at, l.grad + at, l.scores + at, l.T, l.softcap));
        }
        ++rows;
      }
  if (rows) {
    p.score_spread /= double(rows);
    p.mean_max_weight /= double(rows);
  }
  p.median_grad_scores = median(grads);
  p.median_grad_logits = median(before_cap);
  return p;
}

// The weights and their loss gradient from one run caching every layer's attn.pattern with
// gradients (the path stays the fused one), the scores from a second, gradient-free run:
// asking for the scores' gradient would move the first run to the composed path.
AttentionProbe probe_attention(Transformer<float>& model, const tasks::Batch& batch,
                               std::size_t first_row) {
  const std::vector<std::string> patterns = block_points(model.blocks().size(), "attn.pattern"),
                                 scores = block_points(model.blocks().size(), "attn.scores");
  model.zero_grad();
  const CachedRun<float> weights = run_with_cache(model, batch.tokens, patterns, true);
  cross_entropy(weights.logits, batch.targets, tasks::kIgnore).backward();
  CachedRun<float> seen;
  {
    NoGradGuard no_grad;
    seen = run_with_cache(model, batch.tokens, scores);
  }
  const TransformerConfig& c = model.config();
  std::vector<ProbeLayer> layers;
  for (std::size_t l = 0; l < patterns.size(); ++l) {
    const Tensor<float>& w = weights.cache[patterns[l]];
    const Shape s = w.shape();
    layers.push_back({w.data(), seen.cache[scores[l]].data(), weights.cache.grad(patterns[l]).data(),
                      s[0] * s[1], s[3], c.attn_softcap});
  }
  AttentionProbe p = probe_statistics(layers, first_row);
  // the bias is added after the cap: the capped value, and with it tanh's slope, is unseen
  if (c.attn_softcap > 0 && c.positions == PositionKind::alibi) p.median_grad_logits = std::nan("");
  model.zero_grad();
  return p;
}

}  // namespace tapegrad::saturation
