#pragma once
// Part 3 of the saturation study, the text: REPORT.md (every expectation with its verdict,
// then a section per part that ran: part 1 from report_sweep, part 2 from report_training,
// parts 3 to 6 from their own reports; then the limits and the files) and the expectations
// as CSV.
#include <string>
#include <vector>

#include "examples/saturation/report_study.hpp"

namespace tapegrad::saturation {

// REPORT.md alone (write_outputs calls it with in.link_prefix cleared).
std::string report_markdown(const ReportInputs& in);

// expectations.csv: one row per check (expectation, measured, verdict), text fields quoted.
std::string expectations_csv(const std::vector<Check>& checks);

}  // namespace tapegrad::saturation
