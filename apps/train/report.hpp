#pragma once
// After training: the held-out evaluation, a few greedy predictions and, for a text
// model, a sample, printed on stdout.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "apps/train/options.hpp"
#include "apps/train/setup.hpp"
#include "nn/transformer.hpp"
#include "tasks/evaluate.hpp"

namespace tapegrad::train {

struct FinalReport {
  std::optional<tasks::EvalResult> eval;  // none when there is no held-out data
  std::optional<tasks::HalfLosses> halves;  // the repeat task's loss on each half
  std::optional<double> bits_per_byte;      // a text model's held-out loss per byte of text
  std::string sample_text;                // --sample of a text model
};

// `dropped_in_training`: per layer, the fraction of expert choices the last training step
// dropped over capacity (TrainingProgress::last_moe_dropped), printed beside the load.
FinalReport evaluate_and_report(Transformer<float>& model, const TaskSetup& task,
                                const EvalData& eval, const Settings& s,
                                const std::vector<double>& dropped_in_training, std::FILE* log);

// A mixture of experts: one line per MoE layer with its expert load in the model's last
// forward (the largest and smallest fraction of tokens with an expert among their k
// choices; k/E each at perfect balance) and, when the model has a capacity, the fraction of
// choices the last training step dropped (`dropped_in_training`, per layer; evaluation is
// dropless). None for a dense model.
std::vector<std::string> expert_load_lines(const Transformer<float>& model,
                                           const std::vector<double>& dropped_in_training);

}  // namespace tapegrad::train
