#include "apps/train/progress.hpp"

#include <cmath>
#include <unistd.h>

namespace tapegrad::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  char buf[32];
  long s = std::lround(seconds);
  if (s < 60) std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

std::string format_progress(const ProgressLine& p) {
  char rate[32];
  if (p.tokens_per_second >= 1e6) std::snprintf(rate, sizeof rate, "%.2fM", p.tokens_per_second / 1e6);
  else if (p.tokens_per_second >= 1e3) std::snprintf(rate, sizeof rate, "%.1fk", p.tokens_per_second / 1e3);
  else std::snprintf(rate, sizeof rate, "%.0f", p.tokens_per_second);
  int width = int(std::to_string(p.total).size());
  char buf[160];
  std::snprintf(buf, sizeof buf, "step %*zu/%zu  loss %.4f  lr %.2e  %s tok/s  ETA %s", width,
                p.step, p.total, p.loss, p.lr, rate, format_duration(p.eta_seconds).c_str());
  return buf;
}

double eta_seconds(double elapsed, std::size_t first_step, std::size_t step, std::size_t total) {
  if (step <= first_step || step >= total) return 0.0;
  return elapsed / double(step - first_step) * double(total - step);
}

Progress::Progress(std::size_t total_steps, std::FILE* out, bool quiet, std::size_t every)
    : Progress(total_steps, out, quiet, every, out && ::isatty(::fileno(out))) {}

Progress::Progress(std::size_t total_steps, std::FILE* out, bool quiet, std::size_t every,
                   bool interactive)
    : total_(total_steps), out_(out), quiet_(quiet || !out), interactive_(interactive),
      every_(every == 0 ? 1 : every), start_(Clock::now()), last_draw_(start_) {}

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void Progress::update(std::size_t step, double loss, double lr, std::size_t tokens) {
  tokens_ += tokens;
  if (quiet_) return;
  auto now = Clock::now();
  bool last = step == total_;
  if (interactive_) {
    // Redrawing costs a write; ten times a second is plenty for a human.
    if (!last && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  } else if (step % every_ != 0 && !last && step != 1) {
    return;
  }
  last_draw_ = now;
  double elapsed = elapsed_seconds();
  ProgressLine p;
  p.step = step;
  p.total = total_;
  p.loss = loss;
  p.lr = lr;
  p.tokens_per_second = elapsed > 0 ? double(tokens_) / elapsed : 0.0;
  p.eta_seconds = eta_seconds(elapsed, first_step_, step, total_);
  std::string line = format_progress(p);
  if (interactive_) {
    std::size_t width = line.size();
    if (width < last_width_) line.append(last_width_ - width, ' ');  // erase leftovers
    last_width_ = width;
    std::fprintf(out_, "\r%s", line.c_str());
    drawn_ = true;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void Progress::finish() {
  if (!quiet_ && interactive_ && drawn_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  drawn_ = false;
  last_width_ = 0;
}

void Progress::message(const std::string& text) {
  if (quiet_) return;
  if (interactive_ && drawn_) std::fputc('\n', out_);
  drawn_ = false;
  last_width_ = 0;
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
}

}  // namespace tapegrad::train
