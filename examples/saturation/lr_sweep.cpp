#include "examples/saturation/lr_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "examples/saturation/parallel.hpp"

namespace tapegrad::saturation {

double LrRun::max_logit() const {
  double m = -std::numeric_limits<double>::infinity();
  for (const EvalPoint& e : result.evals)
    if (std::isfinite(e.probe.max_score)) m = std::max(m, e.probe.max_score);
  return m;
}

TransformerConfig lr_config(const LrSweepOptions& o, bool qk_norm, std::uint64_t seed) {
  const tasks::SequenceTask task = tasks::SequenceTask::make(o.task);
  TransformerConfig c = llama_preset();
  c.vocab = task.vocab_size();
  c.context = task.context();
  c.d_model = o.d_model;
  c.heads = o.heads;
  c.layers = o.layers;
  c.qk_norm = qk_norm;
  c.seed = seed;
  finish_preset("llama", c);
  return c;
}

namespace {

TrainingOptions training_of(const LrSweepOptions& o, double lr) {
  TrainingOptions t;
  t.task = o.task;
  t.steps = o.steps;
  t.batch = o.batch;
  t.warmup = std::min(o.warmup, o.steps);
  t.lr = lr;
  t.min_lr = lr / 10;
  t.eval_every = o.eval_every;
  t.eval_size = o.eval_size;
  return t;
}

}  // namespace

std::vector<LrRun> run_lr_sweep(const LrSweepOptions& o, LrProgress progress) {
  std::vector<LrRun> runs;
  for (bool qk : {false, true})
    for (double lr : o.lrs)
      for (std::uint64_t seed : o.seeds) runs.push_back({qk, lr, seed, {}});
  const tasks::SequenceTask task = tasks::SequenceTask::make(o.task);
  std::size_t done = 0;
  run_parallel(
      runs.size(), o.workers, {},
      [&](std::size_t i) {
        LrRun& r = runs[i];
        Transformer<float> model(lr_config(o, r.qk_norm, r.seed));
        r.result = train_model(training_of(o, r.lr), model, task, r.seed * 0x9e3779b97f4a7c15ULL + 7);
      },
      [&](std::size_t i) {
        if (progress) progress(++done, runs.size(), runs[i]);
      });
  return runs;
}

std::vector<LrPoint> lr_points(const std::vector<LrRun>& runs, bool qk_norm) {
  std::vector<LrPoint> points;
  for (const LrRun& r : runs) {
    if (r.qk_norm != qk_norm) continue;
    auto it = std::find_if(points.begin(), points.end(), [&](const LrPoint& p) { return p.lr == r.lr; });
    if (it == points.end()) {
      points.push_back({r.lr, 0, std::numeric_limits<double>::infinity(),
                        -std::numeric_limits<double>::infinity(), 0,
                        -std::numeric_limits<double>::infinity(), 0});
      it = points.end() - 1;
    }
    // a diverged run (NaN) or one worse than at the start counts as the loss at the start
    const double f = std::isfinite(r.final_loss()) ? std::min(r.final_loss(), r.initial_loss())
                                                   : r.initial_loss();
    it->mean_final += f;
    it->mean_initial += r.initial_loss();
    it->min_final = std::min(it->min_final, f);
    it->max_final = std::max(it->max_final, f);
    it->max_logit = std::max(it->max_logit, r.max_logit());
    it->diverged += r.result.diverged ? 1 : 0;
  }
  for (LrPoint& p : points) {
    const double n = double(std::count_if(runs.begin(), runs.end(), [&](const LrRun& r) {
      return r.qk_norm == qk_norm && r.lr == p.lr;
    }));
    p.mean_final /= n;
    p.mean_initial /= n;
  }
  return points;
}

double lr_sensitivity(const std::vector<LrPoint>& points) {
  if (points.empty()) return std::nan("");
  double best = std::numeric_limits<double>::infinity(), mean = 0;
  for (const LrPoint& p : points) {
    best = std::min(best, p.mean_final);
    mean += p.mean_final;
  }
  return mean / double(points.size()) - best;
}

std::string lr_sweep_csv(const std::vector<LrRun>& runs) {
  std::string s = "qk_norm,lr,seed,initial_loss,final_loss,final_accuracy,diverged,max_logit,seconds\n";
  char buf[256];
  for (const LrRun& r : runs) {
    std::snprintf(buf, sizeof buf, "%s,%.8g,%llu,%.8g,%.8g,%.8g,%s,%.8g,%.8g\n",
                  r.qk_norm ? "yes" : "no", r.lr, (unsigned long long)r.seed, r.initial_loss(),
                  r.final_loss(), r.result.final_eval().accuracy, r.result.diverged ? "yes" : "no",
                  r.max_logit(), r.result.seconds);
    s += buf;
  }
  return s;
}

}  // namespace tapegrad::saturation
