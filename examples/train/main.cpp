// train_tiny_transformer: the main job of tapegrad. Trains a small decoder-only
// transformer (TinyGPT) on a built-in task (sort, reverse, recall) or a text file, after
// checking its gradients against finite differences, and leaves a checkpoint, metrics,
// the loss curve and a plot in --out.
//
// Exit codes: 0 done; 1 the gradient check failed or training diverged; 2 a usage error
// (bad option or value, unreadable input, unwritable output, unusable checkpoint).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#include "examples/common/cli.hpp"
#include "examples/common/config_cli.hpp"
#include "examples/train/model_check.hpp"
#include "examples/train/options.hpp"
#include "examples/train/outputs.hpp"
#include "examples/train/report.hpp"
#include "examples/train/setup.hpp"
#include "examples/train/training.hpp"
#include "nn/checkpoint.hpp"
#include "ops/kernels/gemm.hpp"

using namespace tapegrad;
using namespace tapegrad::train;
using examples::one_line;

namespace {

TinyGPT<float> build_model(const Settings& s, const TinyGPTConfig& config,
                           const ResumeSource& resume) {
  try {
    if (resume.active()) return load_checkpoint<float>(s.resume);
    return TinyGPT<float>(config);
  } catch (const std::exception& e) {
    throw UsageError("--resume " + s.resume + ": " + one_line(e.what()));
  }
}

void print_summary(const TinyGPT<float>& model, const TaskSetup& task, const EvalData& eval,
                   const std::string& arch, const ResumeSource& resume, std::FILE* log) {
  std::fprintf(log, "model (--arch %s): %s, %zu parameters\n",
               resume.active() ? "from the checkpoint" : arch.c_str(),
               config_summary(model.config()).c_str(), model.parameter_count());
  if (task.seq) {
    std::fprintf(log, "task %s: %zu input tokens -> %zu answer tokens, %zu held-out examples\n",
                 task.name.c_str(), task.seq->input_len(), task.seq->answer_len(),
                 eval.examples.size());
  } else {
    const tasks::TextTask& t = *task.text;
    std::fprintf(log, "task text: %zu characters (%zu train, %zu eval), vocabulary %zu\n",
                 t.train_chars() + t.eval_chars(), t.train_chars(), t.eval_chars(),
                 t.vocab_size());
  }
  if (resume.active()) std::fprintf(log, "resumed from %s\n", resume.path.c_str());
  std::fflush(log);
}

int run(Settings s, const examples::ConfigOptions& model_options) {
  std::FILE* log = stdout;
  const ResumeSource resume = read_resume_source(s);
  const std::string task_name = s.text_mode() || s.task == "text" ? "text" : s.task;
  const auto model_defaults = apply_task_defaults(s, task_name, model_options.arch());
  const TaskSetup task = build_task(s, resume);
  const TinyGPTConfig config = build_config(s, task, resume, model_options, model_defaults);

  // Everything the options can get wrong has been checked: only now touch the disk.
  prepare_out_dir(s.out);
  kernels::set_num_threads(s.threads);
  const EvalData eval = build_eval_data(task, s.eval_size);

  GradcheckSummary gradcheck;
  if (s.steps > 0 && !s.skip_gradcheck) {
    Generator check_gen(s.seed + 17);
    gradcheck = startup_gradcheck(config, task.check_batch(2, check_gen), s.seed, s.quiet, log);
    if (gradcheck.status != "passed") {
      std::fprintf(stderr, "%s: gradient check failed; refusing to train\n", kProgram);
      return 1;
    }
  }

  TinyGPT<float> model = build_model(s, config, resume);
  if (!s.quiet) print_summary(model, task, eval, model_options.arch(), resume, log);

  Optimizers optimizers(model, s);
  // Training batches come from their own stream, so the model's initialisation and the
  // data order are both fixed by --seed but do not disturb each other.
  Generator data_gen(s.seed * 0x9e3779b97f4a7c15ULL + 1);
  TrainingProgress progress;
  TrainingRun training{s, task, eval, model, optimizers, data_gen, {}};
  if (run_training(training, progress) == TrainOutcome::diverged) return 1;

  const FinalReport report = evaluate_and_report(model, task, eval, s, log);
  write_outputs({s, task, model, progress, report, gradcheck}, log);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{
      "Train a small decoder-only transformer (TinyGPT) with tapegrad on a built-in task or a\n"
      "text file. Before training, the same architecture at a small size is gradient-checked\n"
      "in double precision against finite differences. Writes model.npz, metrics.json,\n"
      "loss.csv and loss.svg to --out. Model and optimiser options left out take per-task\n"
      "defaults (docs/TRAINING.md). Exit codes: 0 ok, 1 gradient check failed or training\n"
      "diverged, 2 usage error.",
      kProgram};
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);
  add_task_options(app, s);
  // The model: --arch and one option per field of nn/config.hpp (the task fixes vocab and
  // context; --seed seeds the data too).
  examples::ConfigOptions model_options(app, {"vocab", "context", "seed"});
  add_training_options(app, s);

  if (const std::optional<int> code = examples::parse_command_line(app, argc, argv, kProgram))
    return *code;
  record_given_options(app, s);
  if (s.text_mode() && s.given("--task")) {
    std::fprintf(stderr, "%s: usage error: --text and --task exclude each other (see --help)\n",
                 kProgram);
    return 2;
  }
  try {
    return run(s, model_options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, one_line(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, one_line(e.what()).c_str());
    return 1;
  }
}
