#pragma once
// How the study's reports print numbers and verdicts (one place for every part).
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "examples/saturation/report_study.hpp"  // Check

namespace tapegrad::saturation {

// A number with `sig` significant digits, without exponent clutter for ordinary values.
inline std::string g(double v, int sig = 3) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", sig, v);
  return buf;
}
inline std::string pct(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%%", decimals, 100 * v);
  return buf;
}
inline std::string secs(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f s", v);
  return buf;
}
inline std::string steps_text(const std::optional<std::size_t>& s) {
  return s ? std::to_string(*s) : "none";
}
inline const char* verdict_text(Check::Verdict v) {
  switch (v) {
    case Check::held: return "held";
    case Check::failed: return "**did not hold**";
    case Check::reported: return "reported as measured";
    default: return "not measured";
  }
}
// held when `ok`, failed otherwise; not_measured when the run could not decide.
inline Check::Verdict decide(bool decidable, bool ok) {
  return !decidable ? Check::not_measured : ok ? Check::held : Check::failed;
}

}  // namespace tapegrad::saturation
