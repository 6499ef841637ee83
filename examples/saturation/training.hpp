#pragma once
// Part 2 of the saturation study: does dividing by sqrt(d_head) matter when a model
// learns? Transformer is trained on a built-in task for every d_head x {scaled, unscaled} x
// {gpt2, variance_preserving} x seed, all runs with the same budget of steps, optimiser and
// data stream per seed, so a pair (scaled, unscaled) differs only in the attention scale.
//
// The default task is `sort`, not associative recall: measured on this machine, a scaled
// 1-head, 2-layer Transformer (d_model 32) stays at about 0.3 recall accuracy after 3,000
// steps (PyTorch's own transformer of the same shape too), while `sort` reaches 0.9 in
// 300-500 steps, so only sort fits the study's budget of minutes. A control run trains one
// scaled model on `control_task` (recall) with the same budget, so every report shows
// that measurement again.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "examples/saturation/probe.hpp"
#include "nn/init.hpp"
#include "nn/transformer.hpp"
#include "tasks/tasks.hpp"

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
  // The remedies against saturation, each trained at this d_head under the
  // variance-preserving init for every seed (0: none).
  std::size_t remedy_d_head = 256;
};

// What a run changes in the attention besides the fixed scale.
enum class Remedy {
  none,
  qk_norm,             // RMSNorm on q and k, gains initialised to 1
  qk_norm_unit_spread, // the same, gains initialised to d_head^(-1/4) (unscaled spread 1)
  temperature,         // a learned scalar per head, initialised to 1/sqrt(d_head)
  // Parts of Gemma 2 and BLOOM that are said to keep attention in range, each alone:
  softcap,             // scores capped as c tanh(s / c) at Gemma 2's c = kGemmaSoftcap
  softcap_binding,     // the same at kBindingSoftcap, a cap below the unscaled spread
  post_norms,          // Gemma 2's sandwich: a norm on each sub-layer's output
  alibi,               // BLOOM's ALiBi bias in place of the learned positions
};
std::string to_string(Remedy r);

// RMSNorm gives every head's q and k the norm sqrt(d_head); for directions that are
// independent at initialisation q.k then has std sqrt(d_head). The gain g multiplies both
// q and k, so the unscaled scores have std g^2 sqrt(d_head): g = d_head^(-1/4) makes it 1
// (0.25 at d_head 256).
double unit_spread_qk_gain(std::size_t d_head);

// Gemma 2's attention soft-cap, and one that binds at d_head 256: unscaled scores start
// with std ~14 there, so 5 tanh(s / 5) holds most of them near +-5, while 50 tanh(s / 50)
// leaves them within 10% of themselves.
inline constexpr double kGemmaSoftcap = 50, kBindingSoftcap = 5;

struct RunSpec {
  std::size_t d_head = 0;
  bool scaled = true;
  AttentionInit init = AttentionInit::gpt2;
  std::uint64_t seed = 0;
  std::string task;  // empty: TrainingOptions::task; else a control run on this task
  Remedy remedy = Remedy::none;
  bool is_control() const { return !task.empty(); }
  bool operator==(const RunSpec& o) const {
    return d_head == o.d_head && scaled == o.scaled && init == o.init && seed == o.seed &&
           task == o.task && remedy == o.remedy;
  }
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
  // The answer rows of the probe batch through forward and backward (probe.hpp).
  AttentionProbe probe;
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
// then the control run (scaled, gpt2, the middle d_head, the first seed) if any; then the
// remedy arms (remedy_specs) that the list does not hold already.
std::vector<RunSpec> training_specs(const TrainingOptions& options);
// At remedy_d_head, variance-preserving init, per seed: scaled; unscaled; unscaled +
// QK-norm; unscaled + QK-norm at unit spread; scaled + QK-norm; unscaled + temperature;
// unscaled + soft-cap 50; unscaled + soft-cap 5; unscaled + post_norms; unscaled + ALiBi.
std::vector<RunSpec> remedy_specs(const TrainingOptions& options);

// The model of a spec (Transformer on the task, d_model = heads x d_head, the spec's scale,
// init and remedy).
TransformerConfig run_config(const TrainingOptions& options, const RunSpec& spec);

// One run, single-threaded kernels are the caller's choice (kernels::set_num_threads).
RunResult train_one(const TrainingOptions& options, const RunSpec& spec);
// Trains `model` in place on `task` with the options' optimiser and schedule; the data
// stream is seeded by data_seed. The result's spec is left for the caller to fill.
RunResult train_model(const TrainingOptions& options, Transformer<float>& model,
                      const tasks::SequenceTask& task, std::uint64_t data_seed);
// The held-out set every run evaluates on, in batches.
std::vector<tasks::Batch> eval_batches(const TrainingOptions& options, const tasks::SequenceTask& task);
// Its first sequences, the batch the attention probe runs forward and backward.
tasks::Batch probe_batch(const TrainingOptions& options, const tasks::SequenceTask& task);

// Every spec, `options.workers` at a time; results in the order of training_specs.
// `progress` (may be null) is called from the worker threads, serialised, after each run.
using TrainingProgress = void (*)(std::size_t done, std::size_t total, const RunResult& last);
std::vector<RunResult> run_training(const TrainingOptions& options,
                                    TrainingProgress progress = nullptr);

// The entropy of uniform causal attention averaged over rows first_row..T-1: the mean of
// log(i + 1) (the entropies' upper bound, for the report).
double causal_uniform_entropy(std::size_t T, std::size_t first_row = 0);

std::string run_label(const RunSpec& spec);  // "d_head 64, scaled, gpt2, seed 2"
// "scaled", "unscaled + QK-norm (gain 0.25)", ...: the arm of a remedy spec.
std::string arm_label(const RunSpec& spec);

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
