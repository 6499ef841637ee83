#pragma once
// Learning-rate sensitivity: a llama-preset model trained at rates about 3x apart, with and
// without QK-norm, several seeds, as a small-scale check of the claim that the growth of
// the attention logits at high rates is an instability QK-norm removes. The LR-sensitivity
// number is the mean over rates of min(final loss, loss at initialisation) minus the best
// final loss over the rates.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "examples/saturation/training.hpp"

namespace tapegrad::saturation {

struct LrSweepOptions {
  std::vector<double> lrs{1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1};
  std::vector<std::uint64_t> seeds{1, 2, 3};
  std::string task = "sort";
  std::size_t d_model = 128, heads = 4, layers = 2;
  std::size_t steps = 300, batch = 32, warmup = 30;
  std::size_t eval_every = 50, eval_size = 250;
  int workers = 2;
};

struct LrRun {
  bool qk_norm = false;
  double lr = 0;
  std::uint64_t seed = 0;
  RunResult result;
  double initial_loss() const { return result.evals.front().loss; }
  double final_loss() const { return result.final_eval().loss; }  // NaN when it diverged
  double max_logit() const;  // the largest attention logit at any evaluation
};

// The model of one run: llama preset (RoPE, RMSNorm, SwiGLU, grouped-query attention),
// the options' sizes, QK-norm as asked.
TransformerConfig lr_config(const LrSweepOptions& options, bool qk_norm, std::uint64_t seed);

using LrProgress = void (*)(std::size_t done, std::size_t total, const LrRun& last);
// Every (qk_norm, lr, seed), qk_norm false first, then by rate, then by seed.
std::vector<LrRun> run_lr_sweep(const LrSweepOptions& options, LrProgress progress = nullptr);

// Per arm and rate, over the seeds.
struct LrPoint {
  double lr = 0;
  double mean_final = 0, min_final = 0, max_final = 0;  // min(final, initial) per seed
  double mean_initial = 0;
  double max_logit = 0;   // the largest over seeds
  std::size_t diverged = 0;
};
std::vector<LrPoint> lr_points(const std::vector<LrRun>& runs, bool qk_norm);
// mean over rates of (mean_final) minus the smallest mean_final: Wortsman et al.'s number.
double lr_sensitivity(const std::vector<LrPoint>& points);

std::string lr_sweep_csv(const std::vector<LrRun>& runs);

}  // namespace tapegrad::saturation
