#include "examples/saturation/training.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "autograd/tape.hpp"
#include "examples/saturation/parallel.hpp"
#include "tasks/evaluate.hpp"
#include "tasks/tasks.hpp"
#include "nn/optim.hpp"
#include "nn/schedule.hpp"
#include "nn/transformer.hpp"

namespace tapegrad::saturation {
namespace {

using tasks::Batch;
using tasks::Example;
using tasks::SequenceTask;

// The held-out set is the same for every run (and every seed), as in train_tiny_transformer.
constexpr std::uint64_t kEvalSeed = 0x5eed0fe7a1ULL;

double frobenius(const Tensor<float>& w) {
  if (!w.has_grad()) return 0.0;
  double s = 0;
  for (float g : w.grad()) s += double(g) * double(g);
  return s;
}

// Mean entropy of the attention rows of weights (B, heads, T, T), causal: row i spreads over
// keys 0..i and the rest are exact zeros, which add nothing (0 log 0 = 0). Rows from
// `first_row` on only, when first_row > 0.
double mean_row_entropy(const Tensor<float>& weights, std::size_t first_row) {
  const Shape s = weights.shape();
  const std::size_t T = s[3];
  const std::size_t mats = s[0] * s[1];
  const float* w = weights.data();
  double sum = 0;
  std::size_t rows = 0;
  for (std::size_t m = 0; m < mats; ++m) {
    for (std::size_t i = first_row; i < T; ++i) {
      const float* row = w + (m * T + i) * T;
      double h = 0;
      for (std::size_t j = 0; j < T; ++j) {
        double x = row[j];
        if (x > 0) h -= x * std::log(x);
      }
      sum += h;
      ++rows;
    }
  }
  return rows ? sum / double(rows) : 0.0;
}

EvalPoint evaluate_at(Transformer<float>& model, const SequenceTask& task,
                      const std::vector<Batch>& batches, const Batch& probe, std::size_t step) {
  tasks::EvalResult r = tasks::evaluate(model, batches);
  EvalPoint e;
  e.step = step;
  e.loss = r.loss;
  e.accuracy = r.exact_accuracy;
  // The weights of the last eval batch, read at each layer's attn.pattern: enough rows for
  // a stable mean.
  const std::vector<std::string> patterns = block_points(model.blocks().size(), "attn.pattern");
  CachedRun<float> last;
  {
    NoGradGuard no_grad;
    last = run_with_cache(model, batches.back().tokens, patterns);
  }
  double all = 0, answer = 0;
  for (const std::string& name : patterns) {
    all += mean_row_entropy(last.cache[name], 0);
    answer += mean_row_entropy(last.cache[name], task.first_answer_position());
  }
  e.entropy_all = all / double(patterns.size());
  e.entropy_answer = answer / double(patterns.size());
  e.probe = probe_attention(model, probe, task.first_answer_position());
  return e;
}

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.8g", v);
  return buf;
}

std::string spec_fields(const RunSpec& s, const TrainingOptions& o) {
  return (s.is_control() ? s.task : o.task) + "," + std::to_string(s.d_head) + "," + (s.scaled ? "scaled" : "unscaled") + "," +
         to_string(s.init) + "," + std::to_string(s.seed) + "," + to_string(s.remedy);
}

}  // namespace

std::vector<RunSpec> training_specs(const TrainingOptions& o) {
  std::vector<RunSpec> specs;
  for (std::size_t d : o.d_heads)
    for (AttentionInit init : o.inits)
      for (std::uint64_t seed : o.seeds)
        for (bool scaled : {true, false}) specs.push_back({d, scaled, init, seed, ""});
  if (!o.control_task.empty() && !o.d_heads.empty() && !o.seeds.empty())
    specs.push_back({o.d_heads[o.d_heads.size() / 2], true, AttentionInit::gpt2, o.seeds.front(),
                     o.control_task});
  for (const RunSpec& r : remedy_specs(o))
    if (std::find(specs.begin(), specs.end(), r) == specs.end()) specs.push_back(r);
  return specs;
}

std::vector<RunSpec> remedy_specs(const TrainingOptions& o) {
  std::vector<RunSpec> specs;
  if (o.remedy_d_head == 0) return specs;
  const std::pair<bool, Remedy> arms[] = {
      {true, Remedy::none},     {false, Remedy::none},
      {false, Remedy::qk_norm}, {false, Remedy::qk_norm_unit_spread},
      {true, Remedy::qk_norm},  {false, Remedy::temperature},
      {false, Remedy::softcap}, {false, Remedy::softcap_binding},
      {false, Remedy::post_norms}, {false, Remedy::alibi}};
  for (std::uint64_t seed : o.seeds)
    for (const auto& [scaled, remedy] : arms)
      specs.push_back({o.remedy_d_head, scaled, AttentionInit::variance_preserving, seed, "", remedy});
  return specs;
}

std::string to_string(Remedy r) {
  switch (r) {
    case Remedy::none: return "none";
    case Remedy::qk_norm: return "qk_norm";
    case Remedy::qk_norm_unit_spread: return "qk_norm_unit_spread";
    case Remedy::temperature: return "temperature";
    case Remedy::softcap: return "softcap";
    case Remedy::softcap_binding: return "softcap_binding";
    case Remedy::post_norms: return "post_norms";
    case Remedy::alibi: return "alibi";
  }
  return "?";
}

double unit_spread_qk_gain(std::size_t d_head) { return std::pow(double(d_head), -0.25); }

TransformerConfig run_config(const TrainingOptions& o, const RunSpec& spec) {
  const SequenceTask task = SequenceTask::make(spec.is_control() ? spec.task : o.task);
  TransformerConfig config;
  config.vocab = task.vocab_size();
  config.context = task.context();
  config.d_model = o.heads * spec.d_head;
  config.heads = o.heads;
  config.layers = o.layers;
  config.mlp_ratio = o.mlp_ratio;
  if (!spec.scaled) config.attention_scale = 1.0;
  config.attention_init = spec.init;
  config.seed = spec.seed;
  config.qk_norm = spec.remedy == Remedy::qk_norm || spec.remedy == Remedy::qk_norm_unit_spread;
  if (spec.remedy == Remedy::qk_norm_unit_spread) config.qk_norm_gain = unit_spread_qk_gain(spec.d_head);
  config.learned_temperature = spec.remedy == Remedy::temperature;
  if (spec.remedy == Remedy::softcap) config.attn_softcap = kGemmaSoftcap;
  if (spec.remedy == Remedy::softcap_binding) config.attn_softcap = kBindingSoftcap;
  config.post_norms = spec.remedy == Remedy::post_norms;
  if (spec.remedy == Remedy::alibi) config.positions = PositionKind::alibi;
  return config;
}

std::vector<Batch> eval_batches(const TrainingOptions& o, const SequenceTask& task) {
  Generator eval_gen(kEvalSeed);
  std::vector<Example> examples;
  for (std::size_t i = 0; i < o.eval_size; ++i) examples.push_back(task.sample_eval(eval_gen));
  return tasks::batch_examples(task, examples, 250);
}

// The first 64 held-out sequences: enough rows for the probe's medians, and a forward and
// backward of this size at every evaluation costs a few training steps, not dozens.
Batch probe_batch(const TrainingOptions& o, const SequenceTask& task) {
  Generator eval_gen(kEvalSeed);
  std::vector<Example> examples;
  for (std::size_t i = 0; i < std::min<std::size_t>(64, o.eval_size); ++i)
    examples.push_back(task.sample_eval(eval_gen));
  return tasks::batch_examples(task, examples, 64).front();
}

RunResult train_one(const TrainingOptions& o, const RunSpec& spec) {
  const SequenceTask task = SequenceTask::make(spec.is_control() ? spec.task : o.task);
  Transformer<float> model(run_config(o, spec));
  // The same data stream for every arm of a seed.
  RunResult result = train_model(o, model, task, spec.seed * 0x9e3779b97f4a7c15ULL + 1);
  result.spec = spec;
  return result;
}

namespace {

// One optimiser step on a batch: returns the loss and adds the Wq, Wk gradient norms
// (before clipping) to `window`; false (nothing stepped) when the loss is not finite.
struct Trainer {
  const TrainingOptions& o;
  Transformer<float>& model;
  std::vector<Tensor<float>> all;
  AdamW<float> decay, plain;

  static std::vector<Tensor<float>> params(Transformer<float>& m, bool matrices) {
    std::vector<Tensor<float>> out;
    for (const auto& p : m.named_parameters())
      if ((p.tensor.dim() >= 2) == matrices) out.push_back(p.tensor);
    return out;
  }
  // Weight decay on matrices only, as train_tiny_transformer does.
  Trainer(const TrainingOptions& opt, Transformer<float>& m)
      : o(opt), model(m), all(m.parameters()),
        decay(params(m, true), {opt.lr, opt.beta1, opt.beta2, 1e-8, opt.weight_decay}),
        plain(params(m, false), {opt.lr, opt.beta1, opt.beta2, 1e-8, 0.0}) {}

  bool step(const Batch& batch, double lr, CurvePoint& window) {
    decay.set_lr(lr);
    plain.set_lr(lr);
    Tensor<float> loss = model.loss(batch.tokens, batch.targets, tasks::kIgnore);
    const double value = loss.item();
    if (!std::isfinite(value)) return false;
    loss.backward();
    double wq = 0, wk = 0;
    for (const Block<float>& b : model.blocks()) {
      wq += frobenius(b.attention().Wq());
      wk += frobenius(b.attention().Wk());
    }
    if (o.clip > 0) clip_grad_norm(all, o.clip);
    decay.step();
    plain.step();
    model.zero_grad();
    window.loss += value;
    window.grad_wq += std::sqrt(wq);
    window.grad_wk += std::sqrt(wk);
    return true;
  }
};

void close_window(CurvePoint& window, std::size_t& count, std::size_t step, RunResult& r) {
  window.step = step;
  window.loss /= double(count);
  window.grad_wq /= double(count);
  window.grad_wk /= double(count);
  r.curve.push_back(window);
  window = CurvePoint{};
  count = 0;
}

}  // namespace

RunResult train_model(const TrainingOptions& o, Transformer<float>& model, const SequenceTask& task,
                      std::uint64_t data_seed) {
  auto start = std::chrono::steady_clock::now();
  // Anomaly mode is per thread: each worker checks the runs it trains.
  std::optional<AnomalyGuard> anomaly;
  if (o.detect_anomaly) anomaly.emplace();
  if (o.steps == 0 || o.batch == 0 || o.eval_every == 0 || o.curve_every == 0 || o.eval_size == 0)
    throw std::invalid_argument("training: steps, batch, eval_every, curve_every and eval_size must be positive");
  RunResult result;
  result.d_model = model.config().d_model;
  const std::vector<Batch> batches = eval_batches(o, task);
  const Batch probe = probe_batch(o, task);
  Generator data_gen(data_seed);
  Trainer trainer(o, model);
  WarmupCosine schedule(o.lr, std::min(o.min_lr, o.lr), std::min(o.warmup, o.steps), o.steps);

  result.evals.push_back(evaluate_at(model, task, batches, probe, 0));
  CurvePoint window;
  std::size_t in_window = 0;
  for (std::size_t step = 0; step < o.steps; ++step) {
    if (!trainer.step(task.train_batch(o.batch, data_gen), schedule(step), window)) {
      result.diverged = true;
      break;
    }
    ++in_window;
    if (in_window == o.curve_every || step + 1 == o.steps) close_window(window, in_window, step + 1, result);
    if ((step + 1) % o.eval_every == 0 || step + 1 == o.steps) {
      result.evals.push_back(evaluate_at(model, task, batches, probe, step + 1));
      if (!result.step_to_90 && result.evals.back().accuracy >= 0.9) result.step_to_90 = step + 1;
    }
  }
  if (result.diverged) {
    EvalPoint e = evaluate_at(model, task, batches, probe, result.curve.empty() ? 0 : result.curve.back().step);
    e.loss = std::nan("");
    result.evals.push_back(e);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<RunResult> run_training(const TrainingOptions& o, TrainingProgress progress) {
  const std::vector<RunSpec> specs = training_specs(o);
  std::vector<RunResult> results(specs.size());
  // The most expensive runs (largest d_head) first, so two workers finish together.
  std::vector<std::size_t> order(specs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return specs[a].d_head > specs[b].d_head; });
  std::size_t done = 0;
  run_parallel(specs.size(), o.workers, order,
               [&](std::size_t i) { results[i] = train_one(o, specs[i]); },
               [&](std::size_t i) {
                 if (progress) progress(++done, specs.size(), results[i]);
               });
  return results;
}

double causal_uniform_entropy(std::size_t T, std::size_t first_row) {
  double s = 0;
  for (std::size_t i = first_row; i < T; ++i) s += std::log(double(i + 1));
  return T > first_row ? s / double(T - first_row) : 0.0;
}

std::string run_label(const RunSpec& s) {
  return (s.is_control() ? "control " + s.task + ": " : std::string()) + "d_head " +
         std::to_string(s.d_head) + ", " + arm_label(s) + ", " + to_string(s.init) + ", seed " +
         std::to_string(s.seed);
}

std::string arm_label(const RunSpec& s) {
  std::string a = s.scaled ? "scaled" : "unscaled";
  switch (s.remedy) {
    case Remedy::none: return a;
    case Remedy::qk_norm: return a + " + QK-norm (gain 1)";
    case Remedy::qk_norm_unit_spread: {
      char buf[64];
      std::snprintf(buf, sizeof buf, " + QK-norm (gain %.3g)", unit_spread_qk_gain(s.d_head));
      return a + buf;
    }
    case Remedy::temperature: return a + " + learned temperature";
    case Remedy::softcap: return a + " + soft-cap " + fmt(kGemmaSoftcap);
    case Remedy::softcap_binding: return a + " + soft-cap " + fmt(kBindingSoftcap);
    case Remedy::post_norms: return a + " + sandwich norms";
    case Remedy::alibi: return a + " + ALiBi";
  }
  return a;
}

double mean_grad(const RunResult& run, bool wq, double from, double to) {
  if (run.curve.empty()) return std::nan("");
  const double last = double(run.curve.back().step);
  double sum = 0;
  std::size_t n = 0;
  for (const CurvePoint& c : run.curve) {
    double f = double(c.step) / last;
    // The first window always counts towards a fraction that starts at 0, so a short run
    // (fewer than ten windows) still has a "first tenth".
    if ((f > from && f <= to) || (from == 0 && &c == &run.curve.front())) {
      sum += wq ? c.grad_wq : c.grad_wk;
      ++n;
    }
  }
  return n ? sum / double(n) : std::nan("");
}

std::string training_runs_csv(const std::vector<RunResult>& runs, const TrainingOptions& o) {
  std::string s =
      "task,d_head,scaling,init,seed,remedy,d_model,final_accuracy,final_eval_loss,step_to_0.9,diverged,"
      "final_entropy_all,final_entropy_answer,initial_entropy_all,initial_entropy_answer,"
      "grad_wq_first_tenth,grad_wq_last_tenth,grad_wk_first_tenth,grad_wk_last_tenth,"
      "final_train_loss,seconds\n";
  for (const RunResult& r : runs) {
    const EvalPoint& f = r.final_eval();
    const EvalPoint& i = r.evals.front();
    s += spec_fields(r.spec, o) + "," + std::to_string(r.d_model) + "," + fmt(f.accuracy) + "," +
         fmt(f.loss) + "," + (r.step_to_90 ? std::to_string(*r.step_to_90) : "none") + "," +
         (r.diverged ? "yes" : "no") + "," + fmt(f.entropy_all) + "," + fmt(f.entropy_answer) +
         "," + fmt(i.entropy_all) + "," + fmt(i.entropy_answer) + "," +
         fmt(mean_grad(r, true, 0, 0.1)) + "," + fmt(mean_grad(r, true, 0.9, 1.0)) + "," +
         fmt(mean_grad(r, false, 0, 0.1)) + "," + fmt(mean_grad(r, false, 0.9, 1.0)) + "," +
         fmt(r.curve.empty() ? std::nan("") : r.curve.back().loss) + "," + fmt(r.seconds) + "\n";
  }
  return s;
}

std::string training_curves_csv(const std::vector<RunResult>& runs, const TrainingOptions& o) {
  std::string s = "task,d_head,scaling,init,seed,remedy,step,loss,grad_wq,grad_wk\n";
  for (const RunResult& r : runs)
    for (const CurvePoint& c : r.curve)
      s += spec_fields(r.spec, o) + "," + std::to_string(c.step) + "," + fmt(c.loss) + "," +
           fmt(c.grad_wq) + "," + fmt(c.grad_wk) + "\n";
  return s;
}

std::string training_evals_csv(const std::vector<RunResult>& runs, const TrainingOptions& o) {
  std::string s = "task,d_head,scaling,init,seed,remedy,step,eval_loss,accuracy,entropy_all,entropy_answer,score_spread,mean_max_weight,max_score,median_grad_scores,median_grad_logits\n";
  for (const RunResult& r : runs)
    for (const EvalPoint& e : r.evals)
      s += spec_fields(r.spec, o) + "," + std::to_string(e.step) + "," + fmt(e.loss) + "," +
           fmt(e.accuracy) + "," + fmt(e.entropy_all) + "," + fmt(e.entropy_answer) + "," +
           fmt(e.probe.score_spread) + "," + fmt(e.probe.mean_max_weight) + "," +
           fmt(e.probe.max_score) + "," + fmt(e.probe.median_grad_scores) + "," +
           fmt(e.probe.median_grad_logits) + "\n";
  return s;
}

}  // namespace tapegrad::saturation
