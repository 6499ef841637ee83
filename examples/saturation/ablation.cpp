#include "examples/saturation/ablation.hpp"

#include <cstdio>
#include <limits>

#include "autograd/tape.hpp"  // NoGradGuard
#include "examples/saturation/training.hpp"
#include "nn/interpret.hpp"  // zero_head
#include "tasks/evaluate.hpp"

namespace tapegrad::saturation {

namespace {

// The sum over the batch's answer positions of (correct logit - best other) and their count.
void add_margins(const Tensor<float>& logits, const tasks::Batch& batch, double& sum,
                 std::size_t& count) {
  const std::size_t V = logits.shape()[2];
  for (std::size_t p = 0; p < batch.targets.size(); ++p) {
    const std::int64_t target = batch.targets.data()[p];
    if (target == tasks::kIgnore) continue;
    const float* row = logits.data() + p * V;
    float other = -std::numeric_limits<float>::infinity();
    for (std::size_t v = 0; v < V; ++v)
      if (std::int64_t(v) != target) other = std::max(other, row[v]);
    sum += double(row[target]) - double(other);
    ++count;
  }
}

}  // namespace

AblationRow evaluate_margin(const tasks::LogitsFn& logits_of, const std::vector<tasks::Batch>& batches) {
  AblationRow row;
  row.accuracy = tasks::evaluate(logits_of, batches).exact_accuracy;
  NoGradGuard no_grad;
  double sum = 0;
  std::size_t count = 0;
  for (const tasks::Batch& b : batches) add_margins(logits_of(b.tokens), b, sum, count);
  row.mean_margin = count ? sum / double(count) : 0;
  return row;
}

std::vector<AblationRow> ablate_each_head(Transformer<float>& model,
                                          const std::vector<tasks::Batch>& batches) {
  std::vector<AblationRow> rows{
      evaluate_margin([&model](const Indices& tokens) { return model.forward(tokens); }, batches)};
  rows.front().intact = true;
  for (std::size_t l = 0; l < model.config().layers; ++l)
    for (std::size_t h = 0; h < model.config().heads; ++h) {
      const std::string point = block_point(l, "attn.z");
      AblationRow r = evaluate_margin([&](const Indices& tokens) {
        Hooks<float> hooks;
        hooks.add(point, zero_head<float>(h));
        return model.run_with_hooks(tokens, hooks);
      }, batches);
      r.layer = l;
      r.head = h;
      rows.push_back(r);
    }
  return rows;
}

AblationResult run_ablation(const AblationOptions& o) {
  const tasks::SequenceTask task = tasks::SequenceTask::make(o.task);
  TransformerConfig c = gpt2_preset();
  c.vocab = task.vocab_size();
  c.context = task.context();
  c.d_model = o.d_model;
  c.heads = o.heads;
  c.layers = o.layers;
  c.seed = o.seed;
  Transformer<float> model(c);
  TrainingOptions t;
  t.task = o.task;
  t.steps = o.steps;
  t.batch = o.batch;
  t.warmup = std::min(o.warmup, o.steps);
  t.lr = o.lr;
  t.min_lr = o.min_lr;
  t.eval_every = o.steps;
  t.eval_size = o.eval_size;
  AblationResult result;
  result.train_seconds = train_model(t, model, task, o.seed * 0x9e3779b97f4a7c15ULL + 3).seconds;
  result.rows = ablate_each_head(model, eval_batches(t, task));
  return result;
}

std::string ablation_csv(const std::vector<AblationRow>& rows) {
  std::string s = "ablated,layer,head,exact_accuracy,mean_margin\n";
  char buf[160];
  for (const AblationRow& r : rows) {
    if (r.intact)
      std::snprintf(buf, sizeof buf, "none,,,%.8g,%.8g\n", r.accuracy, r.mean_margin);
    else
      std::snprintf(buf, sizeof buf, "head,%zu,%zu,%.8g,%.8g\n", r.layer, r.head, r.accuracy,
                    r.mean_margin);
    s += buf;
  }
  return s;
}

}  // namespace tapegrad::saturation
