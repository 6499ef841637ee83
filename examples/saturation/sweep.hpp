#pragma once
// Part 1 of the saturation study: what 1/sqrt(d_k) does to the scores, the softmax and the
// gradient through it, measured through tapegrad's autograd on random unit-variance data.
//
// For every (Tk, d_k) the study draws Q (B, Tq, d_k), K (B, Tk, d_k), V (B, Tk, d_v) and an
// upstream gradient G (B, Tq, d_v), all entries ~ normal(0, 1), B * Tq = rows query rows
// in all (each group of Tq queries has its own keys, so the key sample is large too; the
// groups are drawn and measured in chunks so memory stays bounded). The same draws serve
// scale = 1/sqrt(d_k) and scale = 1, so the two are compared pairwise. Then
//
//   scores = matmul_nt(Q, K) * scale      (on the tape, retain_grad)
//   weights = softmax(scores, -1);  out = weights @ V;  out.backward(G)
//
// leaves d(loss)/d(scores) in scores.grad() and d(loss)/dQ in Q.grad() for
// loss = sum(G * out). The library's scaled_dot_product_attention runs on the same
// inputs as a cross-check: its weights and dQ must agree with the composition.
//
// How stable is each figure? The chunks fall into two halves of independent draws; every
// figure is also computed on each half, and |half A - half B| / 2 estimates the standard
// error of the figure on all rows (the halves' difference has sqrt(2) times the spread of
// one half, which has sqrt(2) times the spread of the whole).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tapegrad::saturation {

struct SweepOptions {
  std::vector<std::size_t> d_ks{4, 8, 16, 32, 64, 128, 256, 512, 1024};
  std::vector<std::size_t> tks{16, 64, 256};
  std::size_t rows = 8192;        // query rows per (Tk, d_k): B = rows / queries_per_group
  std::size_t chunk_rows = 1024;  // rows drawn and measured at once (an even number of chunks)
  std::size_t queries_per_group = 16;  // Tq; each group has its own Tk keys
  std::size_t d_v = 64;
  std::uint64_t seed = 1;
  bool use_double = true;      // float64 (default) or float32
};

// One measured configuration.
struct SweepPoint {
  std::size_t tk = 0, d_k = 0;
  bool scaled = false;
  double scale = 0;              // 1/sqrt(d_k) or 1
  double score_std = 0;          // over every score
  double theory_std = 0;         // sqrt(d_k) * scale: 1 scaled, sqrt(d_k) unscaled
  double mean_max_weight = 0;    // mean over rows of the row's largest weight
  double mean_entropy = 0;       // mean over rows of -sum w log w (nats)
  double log_tk = 0;             // the entropy of a uniform row
  double frac_saturated = 0;     // rows whose largest weight exceeds 0.99
  double median_grad_scores = 0; // median over rows of ||d loss / d scores[row]||
  double median_grad_q = 0;      // median over rows of ||d loss / d Q[row]||
  // Root mean square over rows of the same norms (the total gradient / sqrt(rows)): where
  // it stays far above the median, a few unsaturated rows carry most of the gradient.
  double rms_grad_scores = 0, rms_grad_q = 0;
  // The library's scaled_dot_product_attention on the same inputs against the
  // composition: max |weights difference| and max |dQ difference| / max |dQ|.
  double sdpa_weights_diff = 0;
  double sdpa_grad_q_rel_diff = 0;
  // Estimated relative standard errors (half-split, see above) of the figures.
  double se_score_std = 0, se_max_weight = 0, se_entropy = 0, se_grad_scores = 0, se_grad_q = 0;
  double seconds = 0;            // half the time of its (Tk, d_k): draws, both paths, both scales
};

// Runs every (Tk, d_k, scaled) of the options; points are ordered by Tk, then d_k, then
// scaled before unscaled. Throws std::invalid_argument for sizes that do not fit (rows not
// an even number of chunks, a chunk not a whole number of groups, a zero size). `progress` (may be null) is called after each (Tk, d_k).
using SweepProgress = void (*)(std::size_t done, std::size_t total, const SweepPoint& last);
std::vector<SweepPoint> run_sweep(const SweepOptions& options, SweepProgress progress = nullptr);

// The point for (tk, d_k, scaled); throws std::out_of_range if the sweep lacks it.
const SweepPoint& find_point(const std::vector<SweepPoint>& points, std::size_t tk,
                             std::size_t d_k, bool scaled);

// sweep.csv: one row per point, every field above.
std::string sweep_csv(const std::vector<SweepPoint>& points);
// gradient_ratio.csv: per (Tk, d_k) the unscaled / scaled ratios of the median and of the
// RMS gradients at the scores and at Q.
std::string gradient_ratio_csv(const std::vector<SweepPoint>& points);

}  // namespace tapegrad::saturation
