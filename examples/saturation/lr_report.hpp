#pragma once
// Learning-rate sensitivity: the findings (per arm and rate, the LR-sensitivity number),
// the two claims of Wortsman et al. 2023 checked against them, the section and its plots.
#include <string>
#include <vector>

#include "examples/saturation/lr_sweep.hpp"
#include "examples/saturation/report_study.hpp"

namespace tapegrad::saturation {

struct LrFindings {
  LrSweepOptions options;
  bool quick = false;
  std::vector<LrPoint> plain, qk_norm;  // without and with QK-norm, by rate
  double plain_sensitivity = 0, qk_sensitivity = 0;
  double seconds = 0;
  bool empty() const { return plain.empty(); }
};

LrFindings lr_findings(const std::vector<LrRun>& runs, const LrSweepOptions& options, bool quick,
                       double seconds);
std::vector<Check> lr_checks(const LrFindings& f);
std::string lr_markdown(const LrFindings& f, const std::vector<Check>& checks);
// lr_final_loss.svg, lr_max_logit.svg
void lr_plots(const std::string& dir, const LrFindings& f, std::vector<std::string>& written);

}  // namespace tapegrad::saturation
