#include "apps/train/stop_signal.hpp"

#include <signal.h>

namespace tapegrad::train {

namespace {

volatile sig_atomic_t g_signal = 0;
struct sigaction g_previous_int, g_previous_term;

extern "C" void note_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
}

}  // namespace

StopSignals::StopSignals() {
  g_signal = 0;
  struct sigaction action {};
  action.sa_handler = note_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a write interrupted by the signal goes on
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

int StopSignals::pending() { return g_signal; }

}  // namespace tapegrad::train
