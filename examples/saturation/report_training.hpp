#pragma once
// Part 2 of REPORT.md, Transformer training scaled against unscaled: the set-up, the control
// runs, the table per arm, finding 4, the gradient norms of Wq and Wk, the runs that
// diverged and the training plots.
#include <string>

#include "examples/saturation/report_study.hpp"

namespace tapegrad::saturation {

// Part 2's section; empty when no training run was made.
std::string training_markdown(const ReportInputs& in);

}  // namespace tapegrad::saturation
