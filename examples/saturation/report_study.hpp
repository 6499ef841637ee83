#pragma once
// Part 3 of the saturation study, what is decided: each stated expectation checked against
// the numbers measured, and the lookups into the sweep and the runs that the tables and the
// pictures read them through.
#include <cmath>
#include <cstddef>
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

// The sweep's Tk values in the order swept, and its d_k values ascending.
std::vector<std::size_t> tks_of(const std::vector<SweepPoint>& pts);
std::vector<std::size_t> dks_of(const std::vector<SweepPoint>& pts);
// The point at (tk, dk, scaling); nullptr when it was not swept.
const SweepPoint* point(const std::vector<SweepPoint>& pts, std::size_t tk, std::size_t dk, bool scaled);
// Unscaled / scaled median gradient at the scores (at Q with at_q); NaN when a side is missing.
double grad_ratio(const std::vector<SweepPoint>& pts, std::size_t tk, std::size_t dk, bool at_q = false);

// A run of part 2's arm (dh, init, scaling): not the control task, no remedy.
bool in_arm(const RunSpec& spec, std::size_t dh, AttentionInit init, bool scaled);
// The runs of one training arm of part 2, by seed.
struct Group {
  std::vector<const RunResult*> runs;
  double mean_accuracy() const;
  std::string per_seed_accuracy() const;  // final accuracies: "0.994, 0.998, ..."
  std::string per_seed_steps() const;     // steps to 0.9: "375, none, ..."
  template <class F>
  double mean(F f) const {
    double s = 0;
    for (auto* r : runs) s += f(*r);
    return runs.empty() ? std::nan("") : s / double(runs.size());
  }
};
Group group_of(const std::vector<RunResult>& runs, std::size_t dh, AttentionInit init, bool scaled);

// Compares one init's scaled and unscaled runs seed by seed: "seed 1: 350 vs none, ...".
std::string seed_comparison(const std::vector<RunResult>& runs, std::size_t dh, AttentionInit init,
                            int* unscaled_later, int* unscaled_earlier, int* both_none,
                            int* same);

// The sweep's expectations: score std within 5% of theory at every d_k; at Tk = 16 and
// d_k >= 256 the unscaled mean largest weight above 0.9 and the unscaled median gradient at
// the scores below a tenth of the scaled one; at d_k = 1024 that ratio below 0.01 for
// every Tk.
std::vector<Check> sweep_checks(const std::vector<SweepPoint>& points);
// The training expectation: at d_head 256 under the variance-preserving initialisation,
// every seed's unscaled run reaches 0.9 accuracy later than its scaled run, or never; and
// the same comparison under the gpt2 initialisation, reported without an expectation.
std::vector<Check> training_checks(const std::vector<RunResult>& runs);

// Every expectation of every part that ran, in the report's order.
std::vector<Check> all_checks(const ReportInputs& in);

}  // namespace tapegrad::saturation
