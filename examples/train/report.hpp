#pragma once
// After training: the held-out evaluation, a few greedy predictions and, for a text
// model, a sample, printed on stdout.
#include <cstdio>
#include <optional>
#include <string>

#include "examples/train/options.hpp"
#include "examples/train/setup.hpp"
#include "nn/tinygpt.hpp"
#include "tasks/evaluate.hpp"

namespace tapegrad::train {

struct FinalReport {
  std::optional<tasks::EvalResult> eval;  // none when there is no held-out data
  std::optional<tasks::HalfLosses> halves;  // the repeat task's loss on each half
  std::optional<double> bits_per_byte;      // a text model's held-out loss per byte of text
  std::string sample_text;                // --sample of a text model
};

FinalReport evaluate_and_report(TinyGPT<float>& model, const TaskSetup& task,
                                const EvalData& eval, const Settings& s, std::FILE* log);

}  // namespace tapegrad::train
