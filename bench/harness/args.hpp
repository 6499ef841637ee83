#pragma once
// The command line both programs take (the same flags, the same checks).
// Part of bench/harness.hpp (which says what the harness is for).
#include "workloads.hpp"

namespace bench {

struct Args {
  std::string workload;
  int threads = 1;
  int repeats = 10;
  int warmup = 2;
  bool list = false, info = false;
  // Skips the start-up check of the attention workloads (seconds at S4): the driver checks
  // each (workload, framework, threads) in its first process and skips it in the others.
  bool skip_check = false;
  // Writes the workload's inputs and tapegrad's answer for them to this .npz and exits: the
  // reference the Python peers check themselves against at start-up.
  std::string dump;
};

inline void usage(const char* prog, const std::string& error) {
  std::fprintf(stderr,
               "%s: %s\nusage: %s --workload NAME [--threads N] [--repeats R] [--warmup W]"
               " [--skip-check] [--dump FILE.npz]\n       %s --list | --info\n",
               prog, error.c_str(), prog, prog);
  std::exit(2);
}

inline Args parse_args(int argc, char** argv) {
  Args a;
  auto number = [&](int& i, const std::string& flag, int min) {
    if (i + 1 >= argc) usage(argv[0], flag + " needs a value");
    const std::string v = argv[++i];
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < min || n > 100000)
      usage(argv[0], flag + ": bad value '" + v + "'");
    return int(n);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--workload") {
      if (i + 1 >= argc) usage(argv[0], "--workload needs a value");
      a.workload = argv[++i];
    } else if (f == "--threads") {
      a.threads = number(i, f, 1);
    } else if (f == "--repeats") {
      a.repeats = number(i, f, 1);
    } else if (f == "--warmup") {
      a.warmup = number(i, f, 0);
    } else if (f == "--list") {
      a.list = true;
    } else if (f == "--info") {
      a.info = true;
    } else if (f == "--skip-check") {
      a.skip_check = true;
    } else if (f == "--dump") {
      if (i + 1 >= argc) usage(argv[0], "--dump needs a file name");
      a.dump = argv[++i];
    } else {
      usage(argv[0], "unknown option '" + f + "'");
    }
  }
  if (a.list || a.info) return a;
  if (a.workload.empty()) usage(argv[0], "--workload is required");
  const auto names = workload_names();
  if (std::find(names.begin(), names.end(), a.workload) == names.end())
    usage(argv[0], "unknown workload '" + a.workload + "' (see --list)");
  return a;
}

}  // namespace bench
