// saturation: why attention divides its scores by sqrt(d_k), and what modern attention does
// about it, measured through tapegrad.
//
// 1. A sweep over d_k and the number of keys Tk with random unit-variance queries and keys:
//    score spread, softmax saturation and the gradient through the softmax, scaled and not.
// 2. Transformer trained on a task where attention matters, scaled against unscaled, for several
//    d_head, seeds and two initialisations.
// 3. Remedies at one d_head: QK-norm (two gain initialisations), a learned temperature;
//    and Gemma 2's and BLOOM's parts without the scale: soft-caps, sandwich norms, ALiBi.
// 4. Learning-rate sensitivity of a llama-preset model with and without QK-norm.
// 5. Position checks (permutation, RoPE's distance, the residual stream).
// 6. Head ablation of a trained model (or, with --ablate FILE, of any checkpoint).
// Then CSV tables, SVG plots and REPORT.md (which checks the stated expectations) in --out.
//
// Exit codes: 0 done (whatever the expectations' verdicts: they are findings), 1 a runtime
// failure, 2 a usage error (bad option or value, unwritable --out, an --ablate checkpoint
// that cannot be read or holds NaN/Inf, a configuration whose memory estimate exceeds the
// limit, an allocation that failed).
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "apps/common/cli.hpp"
#include "apps/common/model_source.hpp"
#include "apps/common/memory_budget.hpp"
#include "apps/common/model_file.hpp"
#include "apps/common/run_options.hpp"
#include "apps/common/svg_plot.hpp"
#include "examples/saturation/ablation.hpp"
#include "examples/saturation/options.hpp"
#include "examples/saturation/report.hpp"
#include "nn/io/checkpoint.hpp"
#include "ops/threads.hpp"
#include "tasks/tasks.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::saturation;

namespace {

constexpr const char* kProgram = "saturation";
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
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

void sweep_progress(std::size_t done, std::size_t total, const SweepPoint& p) {
  std::fprintf(stderr, "sweep %2zu/%zu  Tk %3zu  d_k %4zu  (%.2f s)\n", done, total, p.tk, p.d_k,
               2 * p.seconds);
}

void training_progress(std::size_t done, std::size_t total, const RunResult& r) {
  std::fprintf(stderr, "train %2zu/%zu  %-60s accuracy %.3f  step to 0.9 %-5s (%.1f s)\n", done,
               total, run_label(r.spec).c_str(), r.final_eval().accuracy,
               r.step_to_90 ? std::to_string(*r.step_to_90).c_str() : "none", r.seconds);
}

void lr_progress(std::size_t done, std::size_t total, const LrRun& r) {
  std::fprintf(stderr, "lr %2zu/%zu  %s lr %-7.3g seed %llu  final loss %.4f  largest logit %.3g (%.1f s)\n",
               done, total, r.qk_norm ? "QK-norm   " : "no QK-norm", r.lr,
               (unsigned long long)r.seed, r.final_loss(), r.max_logit(), r.result.seconds);
}

// Every part the options ask for; the runs of training use one thread each, side by side.
void run_parts(const StudyOptions& o, int threads, ReportInputs& in) {
  if (!o.skip_sweep) {
    const auto t = Clock::now();
    in.points = run_sweep(o.sweep, sweep_progress);
    in.sweep_seconds = since(t);
  }
  set_num_threads(1);
  in.training.workers = in.lr.workers = threads;
  if (!o.skip_training) {
    const auto t = Clock::now();
    in.runs = run_training(in.training, training_progress);
    in.training_seconds = since(t);
  }
  if (!o.skip_lr) {
    const auto t = Clock::now();
    in.lr_runs = run_lr_sweep(in.lr, lr_progress);
    in.lr_seconds = since(t);
  }
  if (!o.skip_positions) in.positions = run_position_checks();
  if (!o.skip_ablation) {
    const auto t = Clock::now();
    in.ablation = run_ablation(o.ablation);
    in.ablation_seconds = since(t);
  }
  set_num_threads(threads);
}

ReportInputs run_study(const StudyOptions& o, int argc, char** argv) {
  const auto start = Clock::now();
  const std::string load_at_start = load_average();
  const int threads = num_threads();
  ReportInputs in;
  in.quick = o.quick;
  in.threads = threads;
  in.precision = o.precision;
  in.sweep = o.sweep;
  in.training = o.train;
  in.lr = o.lr;
  in.ablation_options = o.ablation;
  in.command = kProgram;
  for (int i = 1; i < argc; ++i) in.command += std::string(" ") + argv[i];
  run_parts(o, threads, in);
  in.total_seconds = since(start);
  in.cpu_seconds = cpu_seconds();
  in.machine_load = "machine load average (1 min, all programs) " + load_at_start +
                    " at the start, " + load_average() + " at the end, on " +
                    std::to_string(std::thread::hardware_concurrency()) + " cores";
  return in;
}

// The files of --out, then the --doc copy with its links pointing into --out.
std::vector<std::string> write_results(const StudyOptions& o, ReportInputs& in) {
  std::vector<std::string> files = write_outputs(o.out, in);
  if (o.doc.empty()) return files;
  const fs::path rel = fs::absolute(o.out).lexically_normal().lexically_relative(
      fs::absolute(o.doc).parent_path().lexically_normal());
  in.link_prefix = rel.empty() || rel == "." ? "" : rel.generic_string() + "/";
  plot::write_file_atomic(o.doc, report_markdown(in));
  files.push_back(o.doc);
  return files;
}

void print_checks(const ReportInputs& in) {
  for (const Check& c : all_checks(in))
    std::printf("[%s] %s: %s\n",
                c.verdict == Check::held       ? "held"
                : c.verdict == Check::failed   ? "FAILED"
                : c.verdict == Check::reported ? "reported"
                                               : "n/a",
                c.claim.c_str(), c.measured.c_str());
}

// What the program's own options add to the study's.
struct Limits {
  bool allow_nonfinite = false;
  std::optional<double> max_memory;
};

// The largest Transformer the study trains (the widest d_head, the remedies' included) times
// the runs trained at once; the learning-rate sweep and the ablation train smaller ones.
apps::MemoryNeed study_memory(const StudyOptions& o) {
  const TrainingOptions& t = o.train;
  const tasks::SequenceTask task = tasks::SequenceTask::make(t.task);
  TransformerConfig c = gpt2_preset();
  c.vocab = task.vocab_size();
  c.context = task.context();
  std::size_t d_head = t.remedy_d_head;
  for (std::size_t d : t.d_heads) d_head = std::max(d_head, d);
  c.heads = t.heads;
  c.d_model = t.heads * d_head;
  c.layers = t.layers;
  c.mlp_ratio = t.mlp_ratio;
  apps::MemoryNeed one = apps::training_memory(c, t.batch, c.context, t.eval_size);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const double workers = o.threads > 0 ? double(o.threads) : double(cores);
  apps::MemoryNeed all;
  for (const auto& [name, bytes] : one.parts)
    all.add(name, name == "program" ? bytes : bytes * workers);
  return all;
}

// --ablate FILE: the head-ablation table of any checkpoint of a built-in task.
int ablate_checkpoint(const StudyOptions& o, const Limits& limits) {
  const std::string label = "--ablate " + o.ablate_checkpoint;
  const tasks::SequenceTask task = tasks::SequenceTask::make(o.train.task);
  std::optional<Transformer<float>> loaded;
  try {
    const TransformerConfig c = apps::read_model_config(o.ablate_checkpoint);
    apps::check_memory(apps::inference_memory(c, o.train.eval_size, c.context, 0),
                           limits.max_memory, "ablating this checkpoint");
    loaded.emplace(std::move(apps::load_model(o.ablate_checkpoint).model));
  } catch (const apps::UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw apps::UsageError(label + ": " + apps::one_line(e.what()));
  }
  Transformer<float>& model = *loaded;
  apps::require_finite_parameters(model, label, limits.allow_nonfinite);
  if (model.config().vocab != task.vocab_size() || model.config().context < task.context())
    throw apps::UsageError("--ablate " + o.ablate_checkpoint + ": the model (vocab " +
                               std::to_string(model.config().vocab) + ", context " +
                               std::to_string(model.config().context) + ") is not a model of --task " +
                               o.train.task);
  std::fputs(ablation_csv(ablate_each_head(model, eval_batches(o.train, task))).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  apps::prepare_process();
  StudyOptions o;
  CLI::App app{
      "The saturation study: why attention divides its scores by sqrt(d_k), and what modern\n"
      "attention does about it. A sweep of random queries and keys through the softmax, Transformer\n"
      "trained scaled against unscaled, the remedies (QK-norm, a learned temperature) and Gemma 2's\n"
      "and BLOOM's parts (soft-caps, sandwich norms, ALiBi) without the scale, the\n"
      "learning-rate sensitivity with and without QK-norm, position checks and head ablation;\n"
      "CSV tables, SVG plots and REPORT.md in --out. Exit codes: 0 ok, 1 runtime failure, 2 usage error.",
      kProgram};
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);
  add_study_options(app, o);
  Limits limits;
  apps::add_allow_nonfinite_option(app, limits.allow_nonfinite, "Head ablation");
  apps::add_max_memory_option(app, limits.max_memory);
  if (const std::optional<int> code = apps::parse_command_line(app, argc, argv, kProgram))
    return *code;
  try {
    finish_study_options(app, o);
    if (o.ablate_checkpoint.empty() && !o.skip_training)
      apps::check_memory(study_memory(o), limits.max_memory,
                             "training the study's largest model on every worker");
    prepare_study_outputs(o);
    set_num_threads(o.threads);
    apps::use_precision(o.precision);
    if (!o.ablate_checkpoint.empty()) return ablate_checkpoint(o, limits);
    ReportInputs in = run_study(o, argc, argv);
    const std::vector<std::string> files = write_results(o, in);
    print_checks(in);
    std::printf("%zu files in %s (REPORT.md); %.1f s (sweep %.1f s, training %.1f s, learning "
                "rates %.1f s, ablation %.1f s), threads %d\n",
                files.size(), o.out.c_str(), in.total_seconds, in.sweep_seconds,
                in.training_seconds, in.lr_seconds, in.ablation_seconds, in.threads);
    return 0;
  } catch (const apps::UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, apps::one_line(e.what()).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: %s\n", kProgram, apps::out_of_memory_message().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, apps::one_line(e.what()).c_str());
    return 1;
  }
}
