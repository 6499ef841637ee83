#pragma once
// Head ablation: a trained model evaluated with each attention head's output zeroed in
// turn (Transformer::ablate_head, usable on any model or loaded checkpoint): held-out exact
// accuracy and the mean logit margin (the correct token's logit minus the best other one,
// over the answer positions) per ablated head, against the intact model.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/transformer.hpp"
#include "tasks/evaluate.hpp"
#include "tasks/tasks.hpp"

namespace tapegrad::saturation {

struct AblationOptions {
  std::string task = "sort";
  std::size_t d_model = 64, heads = 4, layers = 2;
  std::size_t steps = 600, batch = 64, warmup = 50;
  double lr = 3e-3, min_lr = 3e-4;
  std::uint64_t seed = 1;
  std::size_t eval_size = 500;
};

struct AblationRow {
  bool intact = false;  // the model as trained (layer and head unused)
  std::size_t layer = 0, head = 0;
  double accuracy = 0;     // held-out exact accuracy
  double mean_margin = 0;  // mean over answer positions of correct logit - best other
};

struct AblationResult {
  std::vector<AblationRow> rows;  // intact first, then layer by layer, head by head
  double train_seconds = 0;
};

// Exact accuracy and mean margin of the logits `logits_of` gives for each batch.
AblationRow evaluate_margin(const tasks::LogitsFn& logits_of, const std::vector<tasks::Batch>& batches);
// Every head of `model` ablated in turn (its slice of blocks.{l}.attn.z zeroed by a hook,
// for that run only), the intact model first.
std::vector<AblationRow> ablate_each_head(Transformer<float>& model,
                                          const std::vector<tasks::Batch>& batches);
// Trains the options' gpt2-preset model on its task, then ablate_each_head.
AblationResult run_ablation(const AblationOptions& options);

std::string ablation_csv(const std::vector<AblationRow>& rows);

}  // namespace tapegrad::saturation
