#pragma once
// Part 3 of the saturation study, the text: REPORT.md (every expectation with its verdict,
// then a section per part that ran) and the expectations as CSV.
#include <string>
#include <vector>

#include "examples/saturation/report_study.hpp"

namespace tapegrad::saturation {

// REPORT.md alone (write_outputs calls it with in.link_prefix cleared).
std::string report_markdown(const ReportInputs& in);

// expectations.csv: one row per check (expectation, measured, verdict), text fields quoted.
std::string expectations_csv(const std::vector<Check>& checks);

}  // namespace tapegrad::saturation
