#pragma once
// Part 3 of the saturation study: the CSV tables, the SVG plots and REPORT.md, which checks
// each expectation of the study against the numbers measured and says which held. What is
// decided is in report_study, the text in report_tables, the pictures in report_plots.
#include <string>
#include <vector>

#include "examples/saturation/report_study.hpp"
#include "examples/saturation/report_tables.hpp"

namespace tapegrad::saturation {

// Writes every CSV, every SVG and REPORT.md into `dir` (which must exist); returns the
// names of the files written. Throws std::runtime_error if a file cannot be written.
std::vector<std::string> write_outputs(const std::string& dir, const ReportInputs& in);

}  // namespace tapegrad::saturation
