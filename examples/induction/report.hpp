#pragma once
// The induction study's outputs in one folder: induction.csv (every evaluation of every
// run), ablation.csv, SVG plots of the in-context advantage and the heads' scores over
// training, attention-pattern heat maps of the first seed's model per variant and layer,
// and REPORT.md with the phase change, the best heads and the ablations.
#include <string>
#include <vector>

#include "examples/induction/study.hpp"

namespace tapegrad::induction {

struct Report {
  StudyOptions options;
  std::vector<RunResult> runs;
  std::string command;
  double seconds = 0;
};

// Writes every file into `dir` (created if missing); returns their names.
std::vector<std::string> write_report(const std::string& dir, const Report& report);
// REPORT.md's text.
std::string report_markdown(const Report& report);

}  // namespace tapegrad::induction
