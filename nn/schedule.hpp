#pragma once
// Learning rate: linear warm-up, then cosine decay (GPT-2/nanoGPT style).
#include <cstddef>

namespace tapegrad {

// step counts from 0 (the first optimiser step):
//   step < warmup:           lr * (step + 1) / warmup     (reaches lr at step warmup - 1)
//   warmup <= step < total:  min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2,
//                            p = (step - warmup) / (total - warmup)
//   step >= total:           min_lr
class WarmupCosine {
 public:
  // Throws ShapeError unless 0 <= min_lr <= lr, total >= 1 and warmup <= total.
  WarmupCosine(double lr, double min_lr, std::size_t warmup_steps, std::size_t total_steps);
  double operator()(std::size_t step) const;

  double lr() const { return lr_; }
  double min_lr() const { return min_lr_; }
  std::size_t warmup_steps() const { return warmup_; }
  std::size_t total_steps() const { return total_; }

 private:
  double lr_, min_lr_;
  std::size_t warmup_, total_;
};

}  // namespace tapegrad
