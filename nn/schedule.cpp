#include "nn/schedule.hpp"

#include <cmath>

#include "autograd/errors.hpp"

namespace tapegrad {

WarmupCosine::WarmupCosine(double lr, double min_lr, std::size_t warmup_steps,
                           std::size_t total_steps)
    : lr_(lr), min_lr_(min_lr), warmup_(warmup_steps), total_(total_steps) {
  if (!(min_lr >= 0.0 && min_lr <= lr) || !std::isfinite(lr))
    fail("WarmupCosine", "needs 0 <= min_lr <= lr, got lr={} min_lr={}", lr, min_lr);
  if (total_steps == 0 || warmup_steps > total_steps)
    fail("WarmupCosine", "needs total_steps >= 1 and warmup_steps <= total_steps, got warmup={} "
         "total={}", warmup_steps, total_steps);
}

double WarmupCosine::operator()(std::size_t step) const {
  if (step < warmup_) return lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  if (step >= total_) return min_lr_;
  const double p = static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
  return min_lr_ + (lr_ - min_lr_) * 0.5 * (1.0 + std::cos(std::acos(-1.0) * p));
}

}  // namespace tapegrad
