// saturation: why attention divides its scores by sqrt(d_k), measured through tapegrad.
//
// 1. A sweep over d_k and the number of keys Tk with random unit-variance queries and keys:
//    score spread, softmax saturation and the gradient through the softmax, scaled and not.
// 2. TinyGPT trained on a task where attention matters (associative recall by default),
//    scaled against unscaled, for several d_head, seeds and two initialisations.
// 3. CSV tables, SVG plots and REPORT.md (which checks the stated expectations) in --out.
//
// Exit codes: 0 done (whatever the expectations' verdicts: they are findings), 1 a runtime
// failure, 2 a usage error (bad option or value, unwritable --out).
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "examples/common/cli.hpp"
#include "examples/common/svg_plot.hpp"
#include "examples/saturation/report.hpp"
#include "examples/saturation/sweep.hpp"
#include "examples/saturation/training.hpp"
#include "tasks/tasks.hpp"
#include "ops/kernels/gemm.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::saturation;

namespace {

constexpr const char* kProgram = "saturation";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using examples::one_line;

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Creates --out and proves it writable before any work, so a bad directory costs nothing.
void prepare_out_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw UsageError("cannot create --out directory " + dir +
                     (ec ? ": " + ec.message() : std::string(": not a directory")));
  std::string probe = (fs::path(dir) / (".write-test." + std::to_string(::getpid()))).string();
  bool ok;
  {
    std::ofstream f(probe);
    ok = f && (f << "x") && f.flush();
  }
  std::remove(probe.c_str());
  if (!ok) throw UsageError("cannot write to --out directory " + dir);
}

void sweep_progress(std::size_t done, std::size_t total, const SweepPoint& p) {
  std::fprintf(stderr, "sweep %2zu/%zu  Tk %3zu  d_k %4zu  (%.2f s)\n", done, total, p.tk, p.d_k,
               2 * p.seconds);
}

void training_progress(std::size_t done, std::size_t total, const RunResult& r) {
  std::fprintf(stderr, "train %2zu/%zu  %-45s accuracy %.3f  step to 0.9 %-5s (%.1f s)\n", done,
               total, run_label(r.spec).c_str(), r.final_eval().accuracy,
               r.step_to_90 ? std::to_string(*r.step_to_90).c_str() : "none", r.seconds);
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The 1-minute load average: other programs on the machine slow the study down.
std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string first;
  return f >> first ? first : "?";
}

}  // namespace

int main(int argc, char** argv) {
  SweepOptions sweep;
  TrainingOptions train;
  std::string out = "out/saturation";
  std::string doc;
  bool quick = false, skip_sweep = false, skip_training = false;
  int threads = 0;
  std::string dtype = "double";
  std::vector<std::string> inits{"gpt2", "variance_preserving"};

  CLI::App app{
      "The saturation study: why attention divides its scores by sqrt(d_k). A sweep of random\n"
      "queries and keys through the softmax (score spread, saturation, gradients), TinyGPT\n"
      "trained scaled against unscaled, and CSV tables, SVG plots and REPORT.md in --out.\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 usage error.",
      kProgram};
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);

  app.add_option("--out", out, "output directory");
  app.add_option("--doc", doc, "also write REPORT.md to this file, its links pointing into --out "
                 "(docs/SATURATION.md is written by --out docs/saturation --doc docs/SATURATION.md)");
  app.add_flag("--quick", quick, "a reduced study that runs in seconds (for tests); options given "
               "explicitly still apply");
  app.add_option("--threads", threads, "threads: BLAS/kernels in the sweep, runs trained at once "
                 "in training (0: all cores)")->check(CLI::Range(0, 256));
  app.add_flag("--skip-sweep", skip_sweep, "do not run the sweep");
  app.add_flag("--skip-training", skip_training, "do not train");
  app.add_flag("--detect-anomaly", train.detect_anomaly, "check every op's output and gradient "
               "for NaN/Inf while training and stop at the first, naming the op (slower)");

  const char* sg = "Sweep";
  app.add_option("--d-k", sweep.d_ks, "key/query widths, comma-separated")
      ->delimiter(',')->check(CLI::Range(std::size_t(1), std::size_t(8192)))->group(sg);
  app.add_option("--tk", sweep.tks, "numbers of keys per query, comma-separated")
      ->delimiter(',')->check(CLI::Range(std::size_t(1), std::size_t(8192)))->group(sg);
  app.add_option("--rows", sweep.rows, "query rows per (Tk, d_k); a multiple of 2 x --chunk-rows")
      ->check(CLI::Range(std::size_t(32), std::size_t(1) << 22))->group(sg);
  app.add_option("--chunk-rows", sweep.chunk_rows, "rows drawn and measured at once (bounds memory); "
                 "a multiple of 16")->check(CLI::Range(std::size_t(16), std::size_t(1) << 20))->group(sg);
  app.add_option("--d-v", sweep.d_v, "width of the values V")
      ->check(CLI::Range(std::size_t(1), std::size_t(4096)))->group(sg);
  app.add_option("--sweep-seed", sweep.seed, "seed of the sweep's random draws")
      ->check(examples::unsigned_integer())->group(sg);
  app.add_option("--sweep-dtype", dtype, "precision of the sweep")
      ->check(CLI::IsMember({"float", "double"}))->group(sg);

  const char* tg = "Training";
  app.add_option("--task", train.task, "built-in task: sort (8 tokens over 10 symbols -> sorted), "
                 "reverse, recall (8 key-value pairs, then a key -> its value)")
      ->check(CLI::IsMember({"recall", "sort", "reverse"}))->group(tg);
  app.add_option("--control-task", train.control_task, "also train one scaled model on this task "
                 "(the report says whether it learns within the budget); 'none' to skip")
      ->check(CLI::IsMember({"recall", "sort", "reverse", "none"}))->group(tg);
  app.add_option("--d-heads", train.d_heads, "head widths, comma-separated")
      ->delimiter(',')->check(CLI::Range(std::size_t(1), std::size_t(1024)))->group(tg);
  app.add_option("--seeds", train.seeds, "seeds, comma-separated (each trains a scaled and an unscaled model)")
      ->delimiter(',')->check(examples::unsigned_integer())->group(tg);
  app.add_option("--inits", inits, "initialisations of Wq, Wk, Wv: gpt2, variance_preserving")
      ->delimiter(',')->check(CLI::IsMember({"gpt2", "variance_preserving"}))->group(tg);
  app.add_option("--heads", train.heads, "heads per layer (d_model = heads x d_head)")
      ->check(CLI::Range(std::size_t(1), std::size_t(64)))->group(tg);
  app.add_option("--layers", train.layers, "transformer blocks")
      ->check(CLI::Range(std::size_t(1), std::size_t(16)))->group(tg);
  app.add_option("--mlp-ratio", train.mlp_ratio, "MLP hidden width as a multiple of d_model")
      ->check(CLI::Range(std::size_t(1), std::size_t(16)))->group(tg);
  app.add_option("--steps", train.steps, "optimiser steps of every run")
      ->check(CLI::Range(std::size_t(1), std::size_t(10000000)))->group(tg);
  app.add_option("--batch", train.batch, "sequences per step")
      ->check(CLI::Range(std::size_t(1), std::size_t(65536)))->group(tg);
  app.add_option("--lr", train.lr, "peak learning rate (AdamW)")->check(examples::finite_range(1e-8, 10.0))->group(tg);
  app.add_option("--min-lr", train.min_lr, "final learning rate of the cosine decay")
      ->check(examples::finite_range(0.0, 10.0))->group(tg);
  app.add_option("--warmup", train.warmup, "linear warm-up steps")
      ->check(CLI::Range(std::size_t(0), std::size_t(10000000)))->group(tg);
  app.add_option("--weight-decay", train.weight_decay, "AdamW decoupled weight decay (matrices)")
      ->check(examples::finite_range(0.0, 10.0))->group(tg);
  app.add_option("--clip", train.clip, "clip the global gradient norm to this (0: off)")
      ->check(examples::finite_range(0.0, 1e6))->group(tg);
  app.add_option("--eval-every", train.eval_every, "held-out evaluation every N steps")
      ->check(CLI::Range(std::size_t(1), std::size_t(10000000)))->group(tg);
  app.add_option("--eval-size", train.eval_size, "held-out sequences")
      ->check(CLI::Range(std::size_t(1), std::size_t(100000)))->group(tg);

  if (const std::optional<int> code = examples::parse_command_line(app, argc, argv, kProgram))
    return *code;
  auto given = [&](const char* name) { return app.count(name) > 0; };

  try {
    // --quick: small versions of everything the user did not set explicitly.
    if (quick) {
      if (!given("--tk")) sweep.tks = {16, 64};
      if (!given("--rows")) sweep.rows = 1024;
      if (!given("--chunk-rows")) sweep.chunk_rows = 512;
      if (!given("--d-heads")) train.d_heads = {16};
      if (!given("--seeds")) train.seeds = {1};
      if (!given("--steps")) train.steps = 40;
      if (!given("--warmup")) train.warmup = 10;
      if (!given("--eval-every")) train.eval_every = 20;
      if (!given("--eval-size")) train.eval_size = 100;
      if (!given("--batch")) train.batch = 32;
    }
    sweep.use_double = dtype == "double";
    if (train.control_task == "none" || train.control_task == train.task) train.control_task.clear();
    train.inits.clear();
    for (const std::string& s : inits) {
      AttentionInit i = parse_attention_init(s);
      if (std::find(train.inits.begin(), train.inits.end(), i) == train.inits.end()) train.inits.push_back(i);
    }
    if (sweep.chunk_rows % sweep.queries_per_group != 0)
      throw UsageError("--chunk-rows must be a multiple of " + std::to_string(sweep.queries_per_group));
    if (sweep.rows % (2 * sweep.chunk_rows) != 0)
      throw UsageError("--rows " + std::to_string(sweep.rows) + " must be a multiple of 2 x --chunk-rows " +
                       std::to_string(sweep.chunk_rows));
    if (train.seeds.empty() || train.d_heads.empty() || sweep.d_ks.empty() || sweep.tks.empty())
      throw UsageError("the lists --d-k, --tk, --d-heads and --seeds must not be empty");
    if (train.min_lr > train.lr) throw UsageError("--min-lr must not exceed --lr");
    if (train.warmup > train.steps) throw UsageError("--warmup must not exceed --steps");
    if (!doc.empty()) {
      fs::path parent = fs::absolute(doc).parent_path();
      if (!fs::is_directory(parent)) throw UsageError("--doc " + doc + ": no directory " + parent.string());
      try {
        prepare_out_dir(parent.string());
      } catch (const UsageError&) {  // its message names --out, the wrong option here
        throw UsageError("--doc " + doc + ": cannot write to its directory " + parent.string());
      }
    }
    prepare_out_dir(out);

    kernels::set_num_threads(threads);
    const int nthreads = kernels::num_threads();
    auto start = std::chrono::steady_clock::now();
    const std::string load_at_start = load_average();

    ReportInputs in;
    in.quick = quick;
    in.threads = nthreads;
    in.sweep = sweep;
    in.training = train;
    in.command = kProgram;
    for (int i = 1; i < argc; ++i) in.command += std::string(" ") + argv[i];

    if (!skip_sweep) {
      auto t = std::chrono::steady_clock::now();
      in.points = run_sweep(sweep, sweep_progress);
      in.sweep_seconds = since(t);
    }
    if (!skip_training) {
      auto t = std::chrono::steady_clock::now();
      // One run per thread: the models are small, so whole runs in parallel use the cores
      // better than BLAS threads inside one run's small products.
      train.workers = nthreads;
      in.training = train;
      kernels::set_num_threads(1);
      in.runs = run_training(train, training_progress);
      kernels::set_num_threads(nthreads);
      in.training_seconds = since(t);
    }
    in.total_seconds = since(start);
    in.cpu_seconds = cpu_seconds();
    in.machine_load = "machine load average (1 min, all programs) " + load_at_start +
                      " at the start, " + load_average() + " at the end, on " +
                      std::to_string(std::thread::hardware_concurrency()) + " cores";

    std::vector<std::string> files = write_outputs(out, in);
    if (!doc.empty()) {
      fs::path rel = fs::absolute(out).lexically_normal().lexically_relative(
          fs::absolute(doc).parent_path().lexically_normal());
      in.link_prefix = rel.empty() || rel == "." ? "" : rel.generic_string() + "/";
      plot::write_file_atomic(doc, report_markdown(in));
      files.push_back(doc);
    }
    std::vector<Check> checks;
    if (!in.points.empty()) checks = sweep_checks(in.points);
    if (!in.runs.empty()) {
      auto t = training_checks(in.runs);
      checks.insert(checks.end(), t.begin(), t.end());
    }
    for (const Check& c : checks)
      std::printf("[%s] %s: %s\n",
                  c.verdict == Check::held       ? "held"
                  : c.verdict == Check::failed   ? "FAILED"
                  : c.verdict == Check::reported ? "reported"
                                                 : "n/a",
                  c.claim.c_str(), c.measured.c_str());
    std::printf("%zu files in %s (REPORT.md); %.1f s (sweep %.1f s, training %.1f s), threads %d\n",
                files.size(), out.c_str(), in.total_seconds, in.sweep_seconds, in.training_seconds,
                nthreads);
    return 0;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, one_line(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, one_line(e.what()).c_str());
    return 1;
  }
}
