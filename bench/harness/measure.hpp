#pragma once
// Measuring one workload: peak RSS, page faults, wall and CPU time, the median, the
// Result and its JSON line, and require() (a failed start-up check ends the run).
// Part of bench/harness.hpp (which says what the harness is for).
#include <sys/resource.h>
#include <time.h>

#include <chrono>

#include "args.hpp"

namespace bench {

inline long peak_rss_kb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;  // kilobytes on Linux
}

// Minor page faults so far: a fresh page's first touch (about 12 us per 4 KiB page on
// these VMs) is the cost a framework that reuses its buffers does not pay.
inline long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

inline double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

// CPU time of the whole process (all its threads), ms: at one thread it is the wall time
// minus the time other programs held the core, a cross-check when the machine is shared.
inline double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// What a workload hands back: its timed samples and extra named numbers (GFLOP/s, the
// correctness-check errors, ...).
struct Result {
  std::vector<double> samples_ms, cpu_ms;  // wall and process-CPU time of each timed step
  double faults_per_step = 0;              // minor page faults per timed step
  std::vector<std::pair<std::string, double>> extra;
  void add(const std::string& k, double v) { extra.emplace_back(k, v); }
  // Runs `step` warmup times untimed, then `repeats` times, each timed on its own.
  void time_steps(int warmup, int repeats, const std::function<void()>& step) {
    time_parts(warmup, repeats, {step});
  }

  // A step made of parts timed one by one in the same loop, so that the machine's noise
  // hits every part alike. samples_ms, cpu_ms and faults_per_step describe parts[0] alone;
  // the wall times of every part (timed repeats only) are returned, parts[0]'s first.
  std::vector<std::vector<double>> time_parts(int warmup, int repeats,
                                              const std::vector<std::function<void()>>& parts) {
    for (int i = 0; i < warmup; ++i)
      for (const auto& part : parts) part();
    samples_ms.clear();
    cpu_ms.clear();
    std::vector<std::vector<double>> wall(parts.size());
    long faults = 0;
    for (int i = 0; i < repeats; ++i) {
      for (std::size_t p = 0; p < parts.size(); ++p) {
        const long f0 = minor_faults();
        const double c0 = process_cpu_ms(), t0 = now_ms();
        parts[p]();
        const double t1 = now_ms(), c1 = process_cpu_ms();
        wall[p].push_back(t1 - t0);
        if (p == 0) {
          samples_ms.push_back(t1 - t0);
          cpu_ms.push_back(c1 - c0);
          faults += minor_faults() - f0;
        }
      }
    }
    faults_per_step = double(faults) / double(std::max(repeats, 1));
    return wall;
  }
};

// One JSON line on stdout per workload; run_bench.py reads it. A number that is not finite
// (a median of no samples) is written as null.
inline void print_json(const char* framework, const Args& a, const Result& r, long start_rss_kb) {
  nlohmann::ordered_json o;
  o["framework"] = framework;
  o["workload"] = a.workload;
  o["threads"] = a.threads;
  o["repeats"] = a.repeats;
  o["warmup"] = a.warmup;
  o["median_ms"] = median(r.samples_ms);
  o["min_ms"] = r.samples_ms.empty()
                    ? std::nan("")
                    : *std::min_element(r.samples_ms.begin(), r.samples_ms.end());
  o["peak_rss_kb"] = peak_rss_kb();
  o["start_rss_kb"] = start_rss_kb;
  o["faults_per_step"] = r.faults_per_step;
  o["samples_ms"] = r.samples_ms;
  o["cpu_samples_ms"] = r.cpu_ms;
  for (const auto& [k, v] : r.extra) o[k] = v;
  std::fputs((o.dump() + "\n").c_str(), stdout);
  std::fflush(stdout);
}

// A failed correctness check ends the process with status 3 and no JSON line: the driver
// then reports the workload as broken instead of timing it.
inline void require(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "CORRECTNESS CHECK FAILED: %s\n", what.c_str());
  std::exit(3);
}

}  // namespace bench
