#pragma once
// What the training programs share on their command line: the optimiser's options (one
// definition of their names, ranges and help), the checks between them, and the output
// directory proven writable before any work. Errors here are usage errors (exit 2).
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/common/cli.hpp"
#include "ops/precision.hpp"

namespace tapegrad::apps {

// A mistake in the command line found after parsing: the program prints it on one line
// and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The one rule for an option given with a value that something else fixes (a checkpoint,
// a task): "--context 32 disagrees with the sort task's context 17". An option that
// agrees is accepted.
inline UsageError disagreement(const std::string& option, const std::string& given,
                               const std::string& fixed) {
  return UsageError(option + " " + given + " disagrees with " + fixed);
}

// The settings the options write into, owned by the program.
struct OptimiserSettings {
  std::size_t& steps;
  std::size_t& batch;
  std::size_t& warmup;
  double& lr;
  double& min_lr;
  double& weight_decay;
  double& clip;
};

// --steps, --batch, --lr, --min-lr, --warmup, --weight-decay, --clip in `group`; a program
// that accepts 0 steps (evaluate only) passes min_steps 0.
inline void add_optimiser_options(CLI::App& app, const OptimiserSettings& s, const std::string& group,
                                  std::size_t min_steps = 1) {
  app.add_option("--steps", s.steps, "optimiser steps")
      ->check(CLI::Range(min_steps, std::size_t(100000000)))->group(group);
  app.add_option("--batch", s.batch, "sequences per step")
      ->check(CLI::Range(std::size_t(1), std::size_t(65536)))->group(group);
  app.add_option("--lr", s.lr, "peak learning rate (AdamW)")->check(finite_range(1e-8, 10.0))->group(group);
  app.add_option("--min-lr", s.min_lr, "final learning rate of the cosine decay")
      ->check(finite_range(0.0, 10.0))->group(group);
  app.add_option("--warmup", s.warmup, "linear warm-up steps")
      ->check(CLI::Range(std::size_t(0), std::size_t(100000000)))->group(group);
  app.add_option("--weight-decay", s.weight_decay, "AdamW decoupled weight decay (matrices only)")
      ->check(finite_range(0.0, 10.0))->group(group);
  app.add_option("--clip", s.clip, "clip the global gradient norm to this (0: off)")
      ->check(finite_range(0.0, 1e6))->group(group);
}

// --precision f32|bf16, the same in every program: the float32 matrix products' precision
// (platform/execution.hpp), which use_precision sets for the calling thread.
inline CLI::Option* add_precision_option(CLI::App& app, std::string& precision,
                                         const std::string& group = "") {
  CLI::Option* o = app.add_option("--precision", precision,
                                  "matrix products in f32, or bf16 (operands rounded to bfloat16, "
                                  "sums in float32; weights, optimiser and checkpoints stay float32)")
                       ->check(CLI::IsMember(matmul_precision_names()))->capture_default_str();
  if (!group.empty()) o->group(group);
  return o;
}
inline void use_precision(const std::string& precision) {
  set_matmul_precision(matmul_precision_from_name(precision));
}

// The rules between the optimiser's options, as UsageError.
inline void check_optimiser_settings(const OptimiserSettings& s) {
  if (s.warmup > s.steps)
    throw UsageError("--warmup " + std::to_string(s.warmup) + " exceeds --steps " + std::to_string(s.steps));
  if (s.min_lr > s.lr) throw UsageError("--min-lr must not exceed --lr");
}

// Creates `dir` and proves it writable before any work, so a bad directory costs nothing
// and leaves nothing behind; `option` names it in the message ("--out").
inline void prepare_out_dir(const std::string& dir, const std::string& option = "--out") {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw UsageError("cannot create " + option + " directory " + dir +
                     (ec ? ": " + ec.message() : std::string(": not a directory")));
  const std::string probe = (fs::path(dir) / (".write-test." + std::to_string(::getpid()))).string();
  bool ok;
  {
    std::ofstream f(probe);
    ok = f && (f << "x") && f.flush();
  }
  std::remove(probe.c_str());
  if (!ok) throw UsageError("cannot write to " + option + " directory " + dir);
}

// The directories a run will create for `dir` (none when it exists), so that a run that
// fails before writing anything can leave the file system as it found it.
class CreatedDirectory {
 public:
  explicit CreatedDirectory(const std::string& dir) : leaf_(std::filesystem::absolute(dir)) {
    std::error_code ec;
    for (std::filesystem::path p = leaf_; !p.empty() && !std::filesystem::exists(p, ec);
         p = p.parent_path()) {
      top_ = p;
      if (p == p.parent_path()) break;
    }
  }
  // Removes what was created, deepest first, as long as it is empty.
  void remove_if_empty() const {
    if (top_.empty()) return;
    std::error_code ec;
    for (std::filesystem::path p = leaf_;; p = p.parent_path()) {
      if (!std::filesystem::is_directory(p, ec) || !std::filesystem::is_empty(p, ec)) return;
      std::filesystem::remove(p, ec);
      if (p == top_ || ec) return;
    }
  }

 private:
  std::filesystem::path leaf_, top_;
};

}  // namespace tapegrad::apps
