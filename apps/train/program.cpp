// train_tiny_transformer: the main job of tapegrad. Trains a small decoder-only
// transformer (Transformer) on a built-in task (sort, reverse, recall, repeat) or a text
// file, after checking its gradients against finite differences, and leaves a checkpoint,
// metrics, the loss curve and a plot in --out.
//
// Exit codes: 0 done (or stopped at --stop-at); 1 the gradient check failed, training
// diverged or a checkpoint could not be written; 2 a usage error (bad option or value,
// unreadable input, unwritable output, unusable checkpoint, an option that disagrees with
// the checkpoint or the task, an MPI launch without --data-parallel) or not enough memory
// (the estimate exceeds the limit, or an allocation failed; an --out this run created and
// left empty is removed); 130 / 143 stopped by SIGINT / SIGTERM after writing a checkpoint.
#include "apps/train/program.hpp"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>

#include "apps/common/cli.hpp"
#include "apps/common/config_cli.hpp"
#include "apps/common/memory_budget.hpp"
#include "apps/train/checkpoints.hpp"
#include "apps/train/data_parallel.hpp"
#include "apps/train/model_check.hpp"
#include "apps/train/options.hpp"
#include "apps/train/outputs.hpp"
#include "apps/train/report.hpp"
#include "apps/train/setup.hpp"
#include "ops/precision.hpp"
#include "apps/train/stop_signal.hpp"
#include "apps/train/training.hpp"
#include "apps/common/model_source.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/io/pretrained.hpp"
#include "ops/threads.hpp"

using namespace tapegrad;
using namespace tapegrad::train;
using apps::one_line;

namespace {

std::size_t held_out_sequences(const EvalData& eval) {
  std::size_t n = 0;
  for (const tasks::Batch& b : eval.batches) n += b.tokens.shape()[0];
  return n;
}

void print_summary(const Transformer<float>& model, const TaskSetup& task, const EvalData& eval,
                   const std::string& arch, const ResumeSource& resume, std::FILE* log) {
  std::fprintf(log, "model (--arch %s): %s, %zu parameters\n",
               !resume.active() ? arch.c_str() : resume.folder() ? "from the folder" : "from the checkpoint",
               config_summary(model.config()).c_str(), model.parameter_count());
  if (task.seq) {
    std::fprintf(log, "task %s: %zu input tokens -> %zu answer tokens, %zu held-out examples\n",
                 task.name.c_str(), task.seq->input_len(), task.seq->answer_len(),
                 eval.examples.size());
  } else if (task.repeat) {
    std::fprintf(log, "task repeat: %zu random tokens over %zu symbols, then the same %zu again; "
                 "%zu held-out sequences\n", task.repeat->length(), task.repeat->symbols(),
                 task.repeat->length(), held_out_sequences(eval));
  } else {
    const tasks::TextTask& t = *task.text;
    std::fprintf(log, "task text: %zu %s tokens (%zu train, %zu eval), vocabulary %zu\n",
                 t.train_tokens() + t.eval_tokens(), t.coder().kind(), t.train_tokens(),
                 t.eval_tokens(), t.vocab_size());
  }
  if (resume.active())
    std::fprintf(log, "%s %s\n", resume.folder() ? "fine-tuning" : "resumed from", resume.path.c_str());
  std::fflush(log);
}

// A data-parallel rank other than 0 trains in silence: rank 0 alone prints, evaluates and
// writes.
void silence_other_ranks(Settings& s, const DataParallel* ranks, std::FILE*& log) {
  if (!ranks || ranks->is_root()) return;
  s.quiet = true;
  s.examples = 0;
  s.sample = 0;
  static std::FILE* null = std::fopen("/dev/null", "w");
  if (null) log = null;  // the quiet flag already keeps the rest of its output short
}

void print_data_parallel(const DataParallel& ranks, const TrainingProgress& progress,
                         std::FILE* log) {
  std::fprintf(log, "data-parallel: %d ranks, all-reduce %.2f s of %.2f s training (%.1f %%), "
               "%zu bytes per step; parameters identical on every rank\n", ranks.size(),
               ranks.all_reduce_seconds(), progress.train_seconds,
               progress.train_seconds > 0 ? 100 * ranks.all_reduce_seconds() / progress.train_seconds : 0.0,
               ranks.all_reduce_bytes());
}

// Trains (from a checkpoint's step when resuming) with the checkpoints the options ask for.
// Returns the exit code when the run stops before its end, nothing when it finished.
// In a data-parallel run rank 0 alone writes and answers a signal: its early exit then
// ends the job, while ranks stopping on their own at different steps would leave one
// waiting in the all-reduce.
std::optional<int> train_with_checkpoints(TrainingRun& run, TrainingProgress& progress,
                                          const TrainerState& state, std::FILE* log) {
  const Settings& s = run.settings;
  const bool root = !run.ranks || run.ranks->is_root();
  std::string written;
  auto write = [&] {
    if (!root) return;
    const auto start = std::chrono::steady_clock::now();
    written = write_training_checkpoint(state);
    progress.checkpoint_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress.checkpoints_written += 1;
    progress.checkpoint_bytes = std::size_t(std::filesystem::file_size(written));
  };
  StopSignals signals;
  run.after_step = [&](const TrainingProgress& p) {
    const bool stop_here = p.step == s.stop_at;
    const bool periodic = s.checkpoint_every > 0 && (p.step % s.checkpoint_every == 0 || p.step == s.steps);
    const bool signalled = root && StopSignals::pending() != 0;
    if (signalled || stop_here || periodic) write();
    return signalled || stop_here;
  };
  const TrainOutcome outcome = run_training(run, progress);
  if (outcome == TrainOutcome::diverged) return 1;
  if (const int sig = root ? StopSignals::pending() : 0) {
    // a signal after the last step's check still gets its checkpoint
    if (written != checkpoint_path(s.out, progress.step)) write();
    std::fprintf(stderr, "%s: interrupted by %s after step %zu of %zu; checkpoint %s (continue "
                 "with --resume %s)\n", kProgram, sig == SIGINT ? "SIGINT" : "SIGTERM",
                 progress.step, s.steps, written.c_str(), written.c_str());
    return 128 + sig;
  }
  if (outcome == TrainOutcome::stopped) {
    std::fprintf(log, "stopped after step %zu of %zu (--stop-at); checkpoint %s\n", progress.step,
                 s.steps, written.c_str());
    return 0;
  }
  return std::nullopt;
}

// A --resume checkpoint, read and checked whole before anything is written: its model and,
// unless only evaluating, its training state, whose settings then fill the options not given.
void read_resumed_checkpoint(Settings& s, ResumeSource& resume,
                             std::optional<Transformer<float>>& model,
                             std::optional<TrainingState<float>>& state,
                             std::vector<std::string>& notices) {
  if (!resume.active()) return;
  model.emplace(load_resumed_model(s, resume));
  state = read_training_state(resume, *model);
  // evaluating only (below) is on the windows the run trained on too
  if (state) resume.windows = checkpoint_windows(s, *state, model->config());
  if (s.given("--steps") && s.steps == 0) state.reset();  // evaluate only
  if (state) apply_checkpoint_settings(s, *state, notices);
}

// The run's memory: training the model on a micro-batch of --batch / --grad-accum sequences
// of its context (per rank: that of the whole batch, an upper bound) and evaluating it, and
// the held-out data as token ids.
apps::MemoryNeed run_memory(const TransformerConfig& config, const TaskSetup& task,
                                const Settings& s) {
  const std::size_t eval_batch = std::min(eval_batch_size(task), s.eval_size);
  // SIGINT writes a checkpoint too, but then the run ends: an interrupted run is not
  // sized for one
  const bool checkpoints = s.checkpoint_every > 0 || s.stop_at > 0;
  apps::MemoryNeed need = apps::training_memory(
      config, std::max<std::size_t>(1, s.batch / s.grad_accum), task.context, eval_batch,
      checkpoints);
  const double held_out = double(s.eval_size) * double(task.context) * 2 * sizeof(std::int64_t);
  need.add("held-out data", held_out);
  return need;
}

// --grad-accum N slices each step's batch (each rank's share of it) into N micro-batches of
// equal rows: N must divide it.
void check_grad_accum(const Settings& s, const DataParallel* ranks) {
  const std::size_t n = ranks ? std::size_t(ranks->size()) : 1;
  if (s.batch % n != 0) return;  // the ranks' own check says so
  const std::size_t rows = s.batch / n;
  if (rows % s.grad_accum != 0)
    throw UsageError("--grad-accum " + std::to_string(s.grad_accum) + " does not divide the " +
                     std::to_string(rows) + " sequences of --batch" +
                     (ranks ? " on each of the " + std::to_string(n) + " ranks" : std::string()) +
                     " (each micro-batch takes batch/grad-accum of them)");
}

// --export-hf: a model no Hugging Face model_type expresses is refused before training.
void check_export(const Settings& s, const TransformerConfig& config, const ResumeSource& resume) {
  if (s.export_hf.empty()) return;
  std::error_code ec;
  const std::filesystem::path dir(s.export_hf);
  if (dir.extension() == ".npz" || (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)))
    throw UsageError("--export-hf " + s.export_hf + ": a folder, not a file (--out gets model.npz)");
  const std::string why = apps::hf_export_refusal(config, resume.kept_json);
  if (!why.empty()) throw UsageError("--export-hf " + s.export_hf + ": " + why);
}

void export_folder(const Settings& s, const TaskSetup& task, const Transformer<float>& model,
                   const ResumeSource& resume, std::FILE* log) {
  const tasks::TextCoder* coder = task.text ? &task.text->coder() : nullptr;
  const std::string note = apps::save_model(model, task.name, coder, s.export_hf, resume.kept_json);
  std::fprintf(log, "wrote %s (a Hugging Face model folder)\n", s.export_hf.c_str());
  if (!note.empty()) std::fprintf(log, "--export-hf: note: %s\n", note.c_str());
}

// Sampling's options without --sample, or --top-p when the sampling is greedy, would change
// nothing: refused rather than ignored (checked before the other ranks drop --sample).
void check_sampling_options(const Settings& s) {
  if (s.sample == 0)
    for (const char* option : {"--temperature", "--top-p", "--prompt"})
      if (s.given(option)) throw UsageError(std::string(option) + " applies to --sample only");
  if (s.temperature == 0 && s.given("--top-p"))
    throw UsageError("--top-p applies to sampling only, and --temperature 0 is greedy");
}

int run(Settings s, const apps::ConfigOptions& model_options, DataParallel* ranks) {
  std::FILE* log = stdout;
  check_sampling_options(s);
  silence_other_ranks(s, ranks, log);
  const bool root = !ranks || ranks->is_root();
  ResumeSource resume = read_resume_source(s);
  const std::string task_name = s.text_mode() || s.task == "text" ? "text" : s.task;
  const auto model_defaults = apply_task_defaults(s, task_name, model_options.arch());
  std::optional<Transformer<float>> model_holder;
  std::optional<TrainingState<float>> state;
  std::vector<std::string> notices;  // printed once every check has passed
  read_resumed_checkpoint(s, resume, model_holder, state, notices);
  const TaskSetup task = build_task(s, resume);
  if (s.steps == 0) state.reset();  // a text model resumed without --text only samples
  const TransformerConfig config = build_config(s, task, resume, model_options, model_defaults, notices);
  check_sample_prompt(s, task, config);
  check_grad_accum(s, ranks);
  check_export(s, config, resume);
  apps::check_memory(run_memory(config, task, s), s.max_memory, "training this model");
  if (s.stop_at > s.steps)
    throw UsageError("--stop-at " + std::to_string(s.stop_at) + " is past --steps " + std::to_string(s.steps));
  if (s.stop_at > 0 && state && s.stop_at <= state->step)
    throw UsageError("--stop-at " + std::to_string(s.stop_at) + " is not after the checkpoint's step " +
                     std::to_string(state->step));
  if (ranks) ranks->check_batch(s.batch);

  if (root) check_no_later_checkpoints(s.out, state ? state->step : 0);

  // Everything the options can get wrong has been checked: only now speak and touch the disk.
  for (const std::string& notice : notices) std::fprintf(log, "%s\n", notice.c_str());
  if (root) {
    apps::prepare_out_dir(s.out);
    remove_stale_temporaries(s.out);
  }
  set_num_threads(s.threads);
  // The start-up gradient check runs in float64, which bf16 never touches.
  apps::use_precision(s.precision);
  const EvalData eval = root ? build_eval_data(task, s.eval_size) : EvalData{};

  GradcheckSummary gradcheck;
  if (s.steps > 0 && !s.skip_gradcheck && root) {
    Generator check_gen(s.seed + 17);
    gradcheck = startup_gradcheck(config, task.check_batch(2, check_gen), s.seed, s.quiet, log);
    if (gradcheck.status != "passed") {
      std::fprintf(stderr, "%s: gradient check failed; refusing to train\n", kProgram);
      return 1;
    }
  }

  if (!model_holder) model_holder.emplace(config);
  model_holder->set_objective(config);  // a resumed run's objective may be the options'
  model_holder->set_execution(config);  // and how it computes (--checkpoint-activations)
  Transformer<float>& model = *model_holder;
  if (ranks) ranks->check_same_parameters(model.parameters(), "at start-up");
  if (!s.quiet) print_summary(model, task, eval, model_options.arch(), resume, log);
  if (resume.active() && !state && s.steps > 0)
    std::fprintf(log, "%s holds no training state: its weights only are loaded; the "
                 "optimiser, the schedule and the batches start fresh\n", resume.label().c_str());

  Optimizers optimizers(model, s);
  // Training batches come from their own stream, so the model's initialisation and the
  // data order are both fixed by --seed but do not disturb each other.
  Generator data_gen(s.seed * 0x9e3779b97f4a7c15ULL + 1);
  TrainingProgress progress;
  if (state) restore_training(*state, task, model, optimizers, data_gen, progress, resume.path);
  TrainingRun training{s, task, eval, model, optimizers, data_gen, {}};
  training.ranks = ranks;
  const TrainerState trainer_state{s, task, model, optimizers, data_gen, progress};
  if (const std::optional<int> code = train_with_checkpoints(training, progress, trainer_state, log))
    return *code;
  if (ranks) {
    ranks->check_same_parameters(model.parameters(), "after training");
    if (!root) return 0;
    print_data_parallel(*ranks, progress, log);
  }

  const FinalReport report =
      evaluate_and_report(model, task, eval, s, progress.last_moe_dropped, log);
  write_outputs({s, task, model, progress, report, gradcheck, state ? state->step : 0}, log);
  if (!s.export_hf.empty()) export_folder(s, task, model, resume, log);
  return 0;
}

}  // namespace

int tapegrad::train::train_program(int argc, char** argv) {
  apps::prepare_process();
  Settings s;
  CLI::App app{
      "Train a small decoder-only transformer (Transformer) with tapegrad on a built-in task or a\n"
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
  apps::ConfigOptions model_options(app, {"vocab", "context", "seed"});
  add_training_options(app, s);
  bool data_parallel = false;
  app.add_flag("--data-parallel", data_parallel,
               "under mpirun -np N: the same model on every rank, each rank its share of every "
               "--batch (N must divide it), gradients summed across the ranks")
      ->group("Run");

  show_task_defaults(app, model_options);

  if (const std::optional<int> code = apps::parse_command_line(app, argc, argv, kProgram))
    return *code;
  s.given_options = apps::given_options(app);
  if (s.text_mode() && s.given("--task")) {
    std::fprintf(stderr, "%s: usage error: --text and --task exclude each other (see --help)\n",
                 kProgram);
    return 2;
  }
  if (const std::string launch = mpi_launch_variable(); !data_parallel && !launch.empty()) {
    std::fprintf(stderr, "%s: usage error: started by an MPI launcher (%s) without "
                 "--data-parallel: every process would train the whole job into the same --out; "
                 "add --data-parallel, or run one process\n", kProgram, launch.c_str());
    return 2;
  }
  const apps::CreatedDirectory created_out(s.out);
  std::unique_ptr<DataParallel> ranks;
  int code = 0;
  try {
    if (data_parallel) ranks = DataParallel::start(argc, argv);
    code = run(s, model_options, ranks.get());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: %s\n", kProgram, apps::out_of_memory_message().c_str());
    code = 2;
  } catch (const std::exception& e) {
    const bool usage = dynamic_cast<const UsageError*>(&e) || dynamic_cast<const DataParallelError*>(&e);
    // every rank meets the same usage error: rank 0 speaks for them
    if (!ranks || ranks->is_root() || !usage)
      std::fprintf(stderr, "%s: error: %s\n", kProgram, one_line(e.what()).c_str());
    code = usage ? 2 : 1;
    // Rank 0 meets the same usage error and its abort ends this rank; waiting for it keeps
    // two aborts at once from garbling mpirun's report (and bounds the wait if it did not).
    if (ranks && usage && !ranks->is_root()) std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  // a run that failed before writing anything leaves no --out behind
  if (code != 0 && (!ranks || ranks->is_root())) created_out.remove_if_empty();
  // a rank that stops early must not leave the others waiting in the next all-reduce
  if (ranks && code != 0) ranks->abort(code);
  return code;
}
