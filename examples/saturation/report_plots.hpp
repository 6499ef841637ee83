#pragma once
// Part 3 of the saturation study, the pictures: the SVG plots of the sweep and of the
// training runs (the later parts draw their own, next to their sections).
#include <string>
#include <vector>

#include "examples/saturation/report_study.hpp"

namespace tapegrad::saturation {

// sweep_score_std.svg, sweep_max_weight.svg, sweep_entropy.svg, sweep_saturated_rows.svg,
// sweep_grad_scores.svg, sweep_grad_q.svg, sweep_grad_ratio.svg into `dir`; appends their
// names to `written`.
void sweep_plots(const std::string& dir, const std::vector<SweepPoint>& pts,
                 std::vector<std::string>& written);
// Per d_head and initialisation train_loss_*.svg and train_accuracy_*.svg (one line per
// seed), and per initialisation train_grad_wq_*.svg, train_grad_wk_*.svg and
// train_entropy_*.svg (means over seeds).
void training_plots(const std::string& dir, const std::vector<RunResult>& runs,
                    const TrainingOptions& o, std::vector<std::string>& written);

}  // namespace tapegrad::saturation
