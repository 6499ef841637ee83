#pragma once
// The loss record a training run leaves behind besides the checkpoint and metrics.json:
// loss.csv (step,loss,lr) and loss.svg.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace tapegrad::train {

struct LossRecord {
  std::size_t step;
  double loss;
  double lr;
};

// "step,loss,lr\n...", and for a text model (given the training text's bytes per token) a
// column bits_per_byte: the training loss over those bytes.
std::string loss_csv(const std::vector<LossRecord>& records,
                     std::optional<double> bytes_per_token = std::nullopt);
// The loss curve (log-scale loss against step) with a moving average over `smooth` steps.
std::string loss_svg(const std::vector<LossRecord>& records, const std::string& title,
                     std::size_t smooth = 25);

}  // namespace tapegrad::train
