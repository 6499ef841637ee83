#include "apps/train/training.hpp"

#include <algorithm>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>

#include "autograd/tape.hpp"
#include "ops/elementwise.hpp"
#include "apps/train/progress.hpp"
#include "apps/train/report.hpp"
#include "nn/schedule.hpp"
#include "tasks/evaluate.hpp"

namespace tapegrad::train {

namespace {

std::vector<Tensor<float>> parameters_where(const Transformer<float>& model, bool matrices) {
  std::vector<Tensor<float>> out;
  for (const auto& p : model.named_parameters())
    if ((p.tensor.dim() >= 2) == matrices) out.push_back(p.tensor);
  return out;
}

// Wall and CPU time, paused while evaluating: evaluation time is not training time.
class TrainingClock {
 public:
  explicit TrainingClock(TrainingProgress& p) : progress_(p) { resume(); }
  void pause() {
    progress_.train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count();
    progress_.train_cpu_seconds += double(std::clock() - cpu_) / CLOCKS_PER_SEC;
  }
  void resume() {
    wall_ = std::chrono::steady_clock::now();
    cpu_ = std::clock();
  }

 private:
  TrainingProgress& progress_;
  std::chrono::steady_clock::time_point wall_;
  std::clock_t cpu_;
};

void print_eval(Transformer<float>& model, const TaskSetup& task, const EvalData& eval,
                std::size_t step, const std::vector<double>& dropped_in_training,
                Progress& progress) {
  const tasks::EvalResult r = tasks::evaluate(model, eval.batches);
  char line[160];
  std::snprintf(line, sizeof line,
                "eval at step %zu: loss %.4f  token accuracy %.4f  exact accuracy %.4f", step,
                r.loss, r.token_accuracy, r.exact_accuracy);
  progress.message(line);
  if (task.text) {
    std::snprintf(line, sizeof line, "  bits per byte %.4f",
                  tasks::bits_per_byte(r.loss, r.tokens, task.text->target_bytes(eval.batches)));
    progress.message(line);
  }
  // the repeat task: copying one period back shows as the second half's loss falling
  // below the first's
  if (task.repeat) {
    const tasks::HalfLosses h = tasks::evaluate_halves(model, *task.repeat, eval.batches);
    std::snprintf(line, sizeof line, "  first half loss %.4f  second half loss %.4f", h.first,
                  h.second);
    progress.message(line);
  }
  for (const std::string& load : expert_load_lines(model, dropped_in_training))
    progress.message(load.c_str());
}

}  // namespace

Optimizers::Optimizers(const Transformer<float>& model, const Settings& s)
    : all_(model.parameters()),
      decayed_(parameters_where(model, true), {s.lr, s.beta1, s.beta2, 1e-8, s.weight_decay}),
      plain_(parameters_where(model, false), {s.lr, s.beta1, s.beta2, 1e-8, 0.0}) {}

void Optimizers::set_lr(double lr) {
  decayed_.set_lr(lr);
  plain_.set_lr(lr);
}

void Optimizers::step() {
  decayed_.step();
  plain_.step();
}

namespace {
// rows [first, first + rows) of a batch
tasks::Batch slice_rows(const tasks::Batch& b, std::size_t first, std::size_t rows) {
  const std::size_t T = b.tokens.shape()[1];
  tasks::Batch out{Indices::from_shape({rows, T}), Indices::from_shape({rows, T})};
  std::copy_n(b.tokens.data() + first * T, rows * T, out.tokens.data());
  std::copy_n(b.targets.data() + first * T, rows * T, out.targets.data());
  return out;
}
}  // namespace

template <class T>
AccumulatedLosses accumulate_gradients(Transformer<T>& model, const tasks::Batch& batch,
                                       std::size_t micro_batches, bool stop_at_nonfinite) {
  // (B, T) tokens and targets -> () loss per slice: the LM loss is what is reported, the
  // total (with the MoE auxiliary losses) what is differentiated:
  //   d/dp (1/C) sum over the batch's C loss positions = sum over slices m of
  //   (C_m / C) * d/dp (1/C_m) sum over slice m's C_m positions
  const std::size_t B = batch.tokens.shape()[0];
  if (micro_batches == 0 || B % micro_batches != 0)
    throw UsageError("--grad-accum " + std::to_string(micro_batches) + " must divide the " +
                     std::to_string(B) + " sequences of a step's batch" );
  const std::size_t rows = B / micro_batches;
  const double count = double(loss_targets(batch));
  AccumulatedLosses out;
  out.dropped.assign(model.blocks().size(), 0.0);
  for (std::size_t m = 0; m < micro_batches; ++m) {
    const tasks::Batch slice = micro_batches == 1 ? batch : slice_rows(batch, m * rows, rows);
    const double weight = micro_batches == 1 ? 1.0
                          : count > 0        ? double(loss_targets(slice)) / count
                                             : 1.0 / double(micro_batches);
    const TrainingLoss<T> parts = model.training_loss(slice.tokens, slice.targets, tasks::kIgnore);
    out.lm += weight * double(parts.lm.item());
    out.aux += weight * double(parts.aux.item());
    out.z += weight * double(parts.z.item());
    const double total = double(parts.total.item());
    out.total += weight * total;
    for (std::size_t l = 0; l < model.blocks().size(); ++l)
      if (const MixtureOfExperts<T>* layer = model.blocks()[l].moe())
        out.dropped[l] += weight * layer->routing().dropped_fraction();
    // a non-finite total stops the step whatever its part, and is what is reported then
    if (stop_at_nonfinite && !std::isfinite(total)) {
      model.zero_grad();
      out.total = total;
      return out;
    }
    if (micro_batches == 1) parts.total.backward();
    else (parts.total * static_cast<T>(weight)).backward();
  }
  return out;
}

template AccumulatedLosses accumulate_gradients(Transformer<float>&, const tasks::Batch&,
                                                std::size_t, bool);
template AccumulatedLosses accumulate_gradients(Transformer<double>&, const tasks::Batch&,
                                                std::size_t, bool);

double train_step(Transformer<float>& model, Optimizers& opt, const tasks::Batch& batch, double lr,
                  double clip, DataParallel* ranks, MoEStepLosses* moe, std::size_t micro_batches) {
  opt.set_lr(lr);
  // A data-parallel rank cannot stop alone at a non-finite loss (the others would wait in
  // the all-reduce): every rank reduces first and then sees the same global loss.
  const AccumulatedLosses parts = accumulate_gradients(model, batch, micro_batches, !ranks);
  double value = parts.lm;
  if (moe) {
    moe->aux = parts.aux;
    moe->z = parts.z;
    moe->dropped = parts.dropped;
  }
  // a non-finite total stops the step whatever its part, and is what is reported then
  if (!std::isfinite(parts.total)) value = parts.total;
  if (!ranks && !std::isfinite(value)) return value;
  // Here every parameter's gradient is complete for this process's batch. A data-parallel
  // run sums them across its ranks at this point, before the clipping sees the global norm.
  if (ranks) value = ranks->all_reduce_gradients(opt.parameters(), value, loss_targets(batch));
  if (!std::isfinite(value)) {
    model.zero_grad();
    return value;
  }
  if (clip > 0) clip_grad_norm(opt.parameters(), clip);
  opt.step();
  model.zero_grad();
  return value;
}

TrainOutcome run_training(TrainingRun& run, TrainingProgress& progress) {
  const Settings& s = run.settings;
  if (progress.step >= s.steps) return TrainOutcome::finished;
  // The guard makes the first NaN/Inf throw AnomalyError naming the op (exit code 1).
  std::optional<AnomalyGuard> anomaly;
  if (s.detect_anomaly) anomaly.emplace();
  const WarmupCosine schedule(s.lr, s.min_lr, s.warmup, s.steps);
  Progress line(s.steps, stderr, s.quiet, s.log_every);
  line.start_at(progress.step);
  TrainingClock clock(progress);
  for (std::size_t step = progress.step; step < s.steps; ++step) {
    const double lr = schedule(step);
    tasks::Batch batch = run.task.train_batch(s.batch, run.data, step);
    const std::size_t tokens = batch.tokens.size();  // the global batch's, on every rank
    if (run.ranks) batch = run.ranks->shard(batch);
    MoEStepLosses moe;
    const double loss =
        train_step(run.model, run.optimizers, batch, lr, s.clip, run.ranks, &moe, s.grad_accum);
    if (run.model.config().experts > 0) {
      progress.last_moe_aux = moe.aux;
      progress.last_moe_z = moe.z;
      progress.last_moe_dropped = moe.dropped;
    }
    if (!std::isfinite(loss)) {
      clock.pause();
      line.finish();
      std::fprintf(stderr, "%s: training diverged: loss %g at step %zu (try a lower --lr; "
                   "--detect-anomaly names the first op that went non-finite)\n",
                   kProgram, loss, step + 1);
      return TrainOutcome::diverged;
    }
    progress.step = step + 1;
    progress.losses.push_back({step + 1, loss, lr});
    progress.tokens_seen += tokens;
    line.update(step + 1, loss, lr, tokens);
    if (s.eval_every > 0 && (step + 1) % s.eval_every == 0 && step + 1 < s.steps &&
        !run.eval.batches.empty()) {
      clock.pause();
      print_eval(run.model, run.task, run.eval, step + 1, progress.last_moe_dropped, line);
      clock.resume();
    }
    if (run.after_step) {
      clock.pause();
      const bool stop = run.after_step(progress);
      clock.resume();
      if (stop) {
        clock.pause();
        line.finish();
        return TrainOutcome::stopped;
      }
    }
  }
  clock.pause();
  line.finish();
  return TrainOutcome::finished;
}

}  // namespace tapegrad::train
