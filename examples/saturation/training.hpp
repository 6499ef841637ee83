#pragma once
// Part 2 of the saturation study: does dividing by sqrt(d_head) matter when a model
// learns? TinyGPT is trained on a built-in task for every d_head x {scaled, unscaled} x
// {gpt2, variance_preserving} x seed, all runs with the same budget of steps, optimiser and
// data stream per seed, so a pair (scaled, unscaled) differs only in the attention scale.
//
// The default task is `sort`, not associative recall: measured on this machine, a scaled
// 1-head, 2-layer TinyGPT (d_model 32) stays at about 0.3 recall accuracy after 3,000
// steps (PyTorch's own transformer of the same shape too), while `sort` reaches 0.9 in
// 300-500 steps, so only sort fits the study's budget of minutes. A control run trains one
// scaled model on `control_task` (recall) with the same budget, so every report shows
// that measurement again.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/init.hpp"

namespace tapegrad::saturation {

struct TrainingOptions {
  std::string task = "sort";
  std::string control_task = "recall";  // one scaled gpt2 run on it; empty: none
  std::vector<std::size_t> d_heads{16, 64, 256};
  std::vector<AttentionInit> inits{AttentionInit::gpt2, AttentionInit::variance_preserving};
  std::vector<std::uint64_t> seeds{1, 2, 3};
  std::size_t heads = 1;  // d_model = heads * d_head
  std::size_t layers = 2;
  std::size_t mlp_ratio = 2;
  std::size_t steps = 600, batch = 32, warmup = 50;
  // 1e-3, not train_tiny_transformer's 3e-3: at 3e-3 even the scaled d_head-256 model under
  // the variance-preserving init collapsed its attention (entropy 0.2) and stayed at 0.03
  // sort accuracy; at 1e-3 every d_head reaches 0.9 within 500 steps when scaled.
  double lr = 1e-3, min_lr = 1e-4, weight_decay = 0.01, clip = 1.0;
  double beta1 = 0.9, beta2 = 0.99;
  std::size_t eval_every = 25;  // held-out accuracy and attention entropy
  std::size_t eval_size = 500;  // held-out sequences
  std::size_t curve_every = 10; // loss and gradient norms averaged over windows of this many
  int workers = 2;              // runs trained at once, one thread each
  bool detect_anomaly = false;  // every op's value and gradient checked for NaN/Inf
};

struct RunSpec {
  std::size_t d_head = 0;
  bool scaled = true;
  AttentionInit init = AttentionInit::gpt2;
  std::uint64_t seed = 0;
  std::string task;  // empty: TrainingOptions::task; else a control run on this task
  bool is_control() const { return !task.empty(); }
};

// Averages over one window of curve_every steps (the last window may be shorter).
struct CurvePoint {
  std::size_t step = 0;  // the window's last step (1-based)
  double loss = 0;
  double grad_wq = 0;  // Frobenius norm of d loss / d Wq over every layer, before clipping
  double grad_wk = 0;
};

struct EvalPoint {
  std::size_t step = 0;  // 0: before training
  double loss = 0;
  double accuracy = 0;  // exact (= per answer) held-out accuracy, teacher-forced
  // Mean attention entropy (nats) of the held-out forward: over every layer, batch item
  // and query row; and over the answer rows only (the query rows that predict an answer
  // token, where attention has to find the right input).
  double entropy_all = 0;
  double entropy_answer = 0;
};

struct RunResult {
  RunSpec spec;
  std::size_t d_model = 0;
  std::vector<CurvePoint> curve;
  std::vector<EvalPoint> evals;
  std::optional<std::size_t> step_to_90;  // first eval step with accuracy >= 0.9
  bool diverged = false;                  // a non-finite loss stopped the run
  double seconds = 0;
  const EvalPoint& final_eval() const { return evals.back(); }
};

// The specs of the options in a fixed order: d_head, init, seed, scaled before unscaled;
// then the control run (scaled, gpt2, the middle d_head, the first seed) if any.
std::vector<RunSpec> training_specs(const TrainingOptions& options);

// One run, single-threaded kernels are the caller's choice (kernels::set_num_threads).
RunResult train_one(const TrainingOptions& options, const RunSpec& spec);

// Every spec, `options.workers` at a time; results in the order of training_specs.
// `progress` (may be null) is called from the worker threads, serialised, after each run.
using TrainingProgress = void (*)(std::size_t done, std::size_t total, const RunResult& last);
std::vector<RunResult> run_training(const TrainingOptions& options,
                                    TrainingProgress progress = nullptr);

// The entropy of uniform causal attention averaged over rows first_row..T-1: the mean of
// log(i + 1) (the entropies' upper bound, for the report).
double causal_uniform_entropy(std::size_t T, std::size_t first_row = 0);

std::string run_label(const RunSpec& spec);  // "d_head 64, scaled, gpt2, seed 2"

// training_runs.csv: one row per run (final accuracy, step to 0.9, entropies, mean
// gradient norms of the first and last tenth of training, seconds).
std::string training_runs_csv(const std::vector<RunResult>& runs, const TrainingOptions& options);
// training_curves.csv: every run's curve points.
std::string training_curves_csv(const std::vector<RunResult>& runs, const TrainingOptions& options);
// training_evals.csv: every run's eval points.
std::string training_evals_csv(const std::vector<RunResult>& runs, const TrainingOptions& options);

// Mean of the curve's gradient norms (Wq if `wq`, else Wk) over the windows that end in the
// fraction (from, to] of the steps; a fraction from 0 always includes the first window.
double mean_grad(const RunResult& run, bool wq, double from, double to);

}  // namespace tapegrad::saturation
