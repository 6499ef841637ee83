#pragma once
// The training progress line on stderr: step, loss, learning rate, tokens/s and ETA.
// On a terminal it is redrawn in place with '\r'; otherwise (a pipe, a log file, CI) a
// plain line is printed every `every` steps and at the last step.
#include <chrono>
#include <cstdio>
#include <string>

namespace tapegrad::train {

struct ProgressLine {
  std::size_t step = 0, total = 0;
  double loss = 0, lr = 0, tokens_per_second = 0, eta_seconds = 0;
};

// "step  120/600  loss 1.2345  lr 2.95e-03  41.2k tok/s  ETA 12s"
std::string format_progress(const ProgressLine& p);
// "12s", "3m05s", "1h02m"
std::string format_duration(double seconds);
// The time left after `step` of `total`, at the pace of this process: `elapsed` seconds
// since it started at `first_step` (a resumed run's earlier steps took no time here).
double eta_seconds(double elapsed, std::size_t first_step, std::size_t step, std::size_t total);

class Progress {
 public:
  // out: the stream (stderr); quiet: print nothing; interactive: redraw in place (default:
  // isatty(out)); every: steps between plain lines when not interactive.
  Progress(std::size_t total_steps, std::FILE* out, bool quiet, std::size_t every);
  Progress(std::size_t total_steps, std::FILE* out, bool quiet, std::size_t every,
           bool interactive);
  // The step this process starts after (a resumed run's checkpoint step).
  void start_at(std::size_t step) { first_step_ = step; }

  // Called after step `step` (1-based) with the tokens processed in that step.
  void update(std::size_t step, double loss, double lr, std::size_t tokens);
  // Ends the in-place line with a newline (terminal only).
  void finish();
  // Prints a message on its own line without garbling the in-place line.
  void message(const std::string& text);

  double elapsed_seconds() const;
  bool interactive() const { return interactive_; }

 private:
  using Clock = std::chrono::steady_clock;
  std::size_t total_;
  std::FILE* out_;
  bool quiet_, interactive_;
  std::size_t every_;
  std::size_t first_step_ = 0;
  Clock::time_point start_, last_draw_;
  std::size_t tokens_ = 0;
  bool drawn_ = false;
  std::size_t last_width_ = 0;
};

}  // namespace tapegrad::train
