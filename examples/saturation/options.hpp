#pragma once
// The saturation program's command line: every option of every part, what --quick changes,
// and the checks between options (UsageError, exit 2).
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "examples/saturation/ablation.hpp"
#include "examples/saturation/lr_sweep.hpp"
#include "examples/saturation/sweep.hpp"
#include "examples/saturation/training.hpp"

namespace tapegrad::saturation {

struct StudyOptions {
  SweepOptions sweep;
  TrainingOptions train;
  LrSweepOptions lr;
  AblationOptions ablation;
  std::string out = "out/saturation";
  std::string doc;
  std::string dtype = "double";
  std::vector<std::string> inits{"gpt2", "variance_preserving"};
  // Head ablation of a checkpoint given here, printed as a table, instead of the study.
  std::string ablate_checkpoint;
  bool quick = false;
  bool skip_sweep = false, skip_training = false, skip_lr = false, skip_positions = false,
       skip_ablation = false;
  int threads = 0;
  std::string precision = "f32";  // --precision: the float32 matrix products of every part
};

// Adds every option to `app`, writing into `o`.
void add_study_options(CLI::App& app, StudyOptions& o);
// After parsing: --quick's reductions for what the user did not give, the derived settings
// and the checks between options. Throws apps::UsageError.
void finish_study_options(const CLI::App& app, StudyOptions& o);
// Creates --out (and the --doc directory) and proves them writable; nothing for --ablate.
void prepare_study_outputs(const StudyOptions& o);

}  // namespace tapegrad::saturation
