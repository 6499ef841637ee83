#pragma once
// The remedies against saturation at one d_head: the findings per arm (computed from the
// runs), the stated expectations checked against them, the report section and its plots.
#include <optional>
#include <string>
#include <vector>

#include "examples/saturation/report_study.hpp"
#include "examples/saturation/training.hpp"

namespace tapegrad::saturation {

// One arm (scale x remedy) over its seeds, in seed order.
struct RemedyArm {
  RunSpec spec;  // the first seed's; seed aside, every run of the arm shares it
  std::string label;
  std::vector<const RunResult*> runs;
  std::vector<std::optional<std::size_t>> steps_to_90;
  std::vector<double> final_accuracy;
  double initial_spread = 0, final_spread = 0;  // means over seeds of the probe's spread
  double mean_max_weight = 0;                   // over seeds and every evaluation
  double initial_grad = 0, mean_grad = 0;       // median gradient at the scores
  double initial_grad_logits = 0;               // the same before a soft-cap
  // mean over seeds of the mean entropy (nats) of the answer rows' attention, held out
  double initial_entropy = 0, final_entropy = 0;
  bool every_seed_reaches_90() const;
  bool no_seed_reaches_90() const;
};

struct RemedyFindings {
  std::size_t d_head = 0;
  double unit_spread_gain = 0;
  bool quick = false;        // too few steps to decide the steps-to-0.9 expectations
  double uniform_answer_entropy = 0;  // of uniform causal attention over the answer rows
  std::vector<RemedyArm> arms;  // in the order of remedy_specs; empty when not trained
  const RemedyArm* arm(bool scaled, Remedy remedy) const;
};

// The findings point into `runs`, which must outlive them.
RemedyFindings remedy_findings(const std::vector<RunResult>& runs, const TrainingOptions& options,
                               bool quick);
// The expectations of the remedies proper (QK-norm, the temperature) ...
std::vector<Check> remedy_checks(const RemedyFindings& f);
// ... and of Gemma 2's and BLOOM's parts (soft-caps, sandwich norms, ALiBi) without the scale.
std::vector<Check> architecture_checks(const RemedyFindings& f);
std::string remedy_markdown(const RemedyFindings& f, const std::vector<Check>& remedies,
                            const std::vector<Check>& architectures);
// remedies_accuracy.svg, remedies_spread.svg, remedies_entropy.svg, remedies_grad.svg;
// names appended to `written`.
void remedy_plots(const std::string& dir, const RemedyFindings& f, std::vector<std::string>& written);

}  // namespace tapegrad::saturation
