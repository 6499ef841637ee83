#pragma once
// Position checks and head ablation: the stated expectations checked against the
// measurements, and their report sections (with the ablation's plot).
#include <string>
#include <vector>

#include "examples/saturation/ablation.hpp"
#include "examples/saturation/positions.hpp"
#include "examples/saturation/report_study.hpp"

namespace tapegrad::saturation {

std::vector<Check> position_checks(const PositionResults& p);
std::string position_markdown(const PositionResults& p, const std::vector<Check>& checks);

std::vector<Check> ablation_checks(const AblationResult& a, bool quick);
std::string ablation_markdown(const AblationResult& a, const AblationOptions& o,
                              const std::vector<Check>& checks);
// ablation.svg: accuracy and margin per ablated head.
void ablation_plot(const std::string& dir, const AblationResult& a, std::vector<std::string>& written);

}  // namespace tapegrad::saturation
