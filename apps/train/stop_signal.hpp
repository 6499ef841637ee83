#pragma once
// SIGINT and SIGTERM while training: instead of dying mid-step (and losing everything since
// the last checkpoint), the handler only notes the signal; the loop finishes the current
// step, writes a checkpoint and the program exits with 128 + the signal (130, 143).
namespace tapegrad::train {

// Installs the handlers for its lifetime; the previous ones come back afterwards.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The first signal received since construction (SIGINT or SIGTERM), or 0.
  static int pending();
};

}  // namespace tapegrad::train
