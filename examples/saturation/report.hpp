#pragma once
// Part 3 of the saturation study: the CSV tables, the SVG plots and REPORT.md, which checks
// each expectation of the study against the numbers measured and says which held.
#include <optional>
#include <string>
#include <vector>

#include "examples/saturation/ablation.hpp"
#include "examples/saturation/lr_sweep.hpp"
#include "examples/saturation/positions.hpp"
#include "examples/saturation/sweep.hpp"
#include "examples/saturation/training.hpp"

namespace tapegrad::saturation {

// One stated expectation and what the measurement says about it.
struct Check {
  std::string claim;     // the expectation, as stated before measuring
  std::string measured;  // the numbers that decide it
  // reported: no expectation was stated, the numbers are given as measured.
  enum Verdict { held, failed, not_measured, reported } verdict = not_measured;
};

// The sweep's expectations: score std within 5% of theory at every d_k; at Tk = 16 and
// d_k >= 256 the unscaled mean largest weight above 0.9 and the unscaled median gradient at
// the scores below a tenth of the scaled one; at d_k = 1024 that ratio below 0.01 for
// every Tk.
std::vector<Check> sweep_checks(const std::vector<SweepPoint>& points);
// The training expectation: at d_head 256 under the variance-preserving initialisation,
// every seed's unscaled run reaches 0.9 accuracy later than its scaled run, or never; and
// the same comparison under the gpt2 initialisation, reported without an expectation.
std::vector<Check> training_checks(const std::vector<RunResult>& runs);

struct ReportInputs {
  std::string command;  // how the run was invoked
  bool quick = false;
  int threads = 1;
  std::string precision = "f32";  // of the float32 matrix products (--precision)
  SweepOptions sweep;
  TrainingOptions training;
  std::vector<SweepPoint> points;  // empty when the sweep was skipped
  std::vector<RunResult> runs;     // empty when training was skipped (remedy arms included)
  LrSweepOptions lr;
  std::vector<LrRun> lr_runs;      // empty when the learning-rate sweep was skipped
  std::optional<PositionResults> positions;
  AblationOptions ablation_options;
  AblationResult ablation;         // rows empty when skipped
  double sweep_seconds = 0, training_seconds = 0, total_seconds = 0;
  double lr_seconds = 0, ablation_seconds = 0;
  double cpu_seconds = 0;     // user + system time of the process
  std::string machine_load;   // e.g. "load average 0.4 at start, 2.1 at end" (other programs)
  // Put before every link of the report: "" for REPORT.md inside the output directory,
  // "saturation/" for a copy in docs/ that links to docs/saturation/.
  std::string link_prefix;
};

// Writes every CSV, every SVG and REPORT.md into `dir` (which must exist); returns the
// names of the files written. Throws std::runtime_error if a file cannot be written.
std::vector<std::string> write_outputs(const std::string& dir, const ReportInputs& in);

// REPORT.md alone (write_outputs calls it with in.link_prefix cleared).
std::string report_markdown(const ReportInputs& in);

// Every expectation of every part that ran, in the report's order.
std::vector<Check> all_checks(const ReportInputs& in);

}  // namespace tapegrad::saturation
