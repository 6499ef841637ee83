#pragma once
// Part 1 of REPORT.md, the softmax sweep: its set-up, findings 1 to 3 (the score spread, the
// saturation, the gradient at the scores and at Q) with their tables, and how stable the
// figures are. Its own file because it is the longest part of the report.
#include <string>

#include "examples/saturation/report_study.hpp"

namespace tapegrad::saturation {

// Part 1's section; empty when the sweep did not run.
std::string sweep_markdown(const ReportInputs& in);

}  // namespace tapegrad::saturation
