#pragma once
// The loss record a training run leaves behind besides the checkpoint and metrics.json:
// loss.csv (step,loss,lr) and loss.svg.
#include <cstddef>
#include <string>
#include <vector>

namespace tapegrad::train {

struct LossRecord {
  std::size_t step;
  double loss;
  double lr;
};

std::string loss_csv(const std::vector<LossRecord>& records);  // "step,loss,lr\n..."
// The loss curve (log-scale loss against step) with a moving average over `smooth` steps.
std::string loss_svg(const std::vector<LossRecord>& records, const std::string& title,
                     std::size_t smooth = 25);

}  // namespace tapegrad::train
