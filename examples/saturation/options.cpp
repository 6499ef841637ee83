#include "examples/saturation/options.hpp"

#include <algorithm>
#include <filesystem>

#include "apps/common/cli.hpp"
#include "apps/common/run_options.hpp"

namespace tapegrad::saturation {

namespace {

using apps::UsageError;
using SizeRange = CLI::Range;

void add_general(CLI::App& app, StudyOptions& o) {
  app.add_option("--out", o.out, "output directory");
  app.add_option("--doc", o.doc, "also write REPORT.md to this file, its links pointing into --out "
                 "(docs/SATURATION.md is written by --out docs/saturation --doc docs/SATURATION.md)");
  app.add_flag("--quick", o.quick, "a reduced study that runs in seconds (for tests); options given "
               "explicitly still apply");
  app.add_option("--threads", o.threads, "threads: BLAS/kernels in the sweep, runs trained at once "
                 "in training (0: all cores)")->check(CLI::Range(0, 256));
  app.add_flag("--skip-sweep", o.skip_sweep, "do not run the sweep");
  app.add_flag("--skip-training", o.skip_training, "do not train (parts 2 and 3)");
  app.add_flag("--skip-lr", o.skip_lr, "do not run the learning-rate sweep (part 4)");
  app.add_flag("--skip-positions", o.skip_positions, "do not run the position checks (part 5)");
  app.add_flag("--skip-ablation", o.skip_ablation, "do not run the head ablation (part 6)");
  app.add_option("--ablate", o.ablate_checkpoint, "only ablate each head of this checkpoint or "
                 "Hugging Face folder (a model of --task) and print accuracy and margin per head");
  apps::add_precision_option(app, o.precision);
  app.add_flag("--detect-anomaly", o.train.detect_anomaly, "check every op's output and gradient "
               "for NaN/Inf while training and stop at the first, naming the op (slower)");
}

void add_sweep(CLI::App& app, StudyOptions& o) {
  const char* sg = "Sweep";
  SweepOptions& s = o.sweep;
  app.add_option("--d-k", s.d_ks, "key/query widths, comma-separated")
      ->delimiter(',')->check(SizeRange(std::size_t(1), std::size_t(8192)))->group(sg);
  app.add_option("--tk", s.tks, "numbers of keys per query, comma-separated")
      ->delimiter(',')->check(SizeRange(std::size_t(1), std::size_t(8192)))->group(sg);
  app.add_option("--rows", s.rows, "query rows per (Tk, d_k); a multiple of 2 x --chunk-rows")
      ->check(SizeRange(std::size_t(32), std::size_t(1) << 22))->group(sg);
  app.add_option("--chunk-rows", s.chunk_rows, "rows drawn and measured at once (bounds memory); "
                 "a multiple of 16")->check(SizeRange(std::size_t(16), std::size_t(1) << 20))->group(sg);
  app.add_option("--d-v", s.d_v, "width of the values V")
      ->check(SizeRange(std::size_t(1), std::size_t(4096)))->group(sg);
  app.add_option("--sweep-seed", s.seed, "seed of the sweep's random draws")
      ->check(apps::unsigned_integer())->group(sg);
  app.add_option("--sweep-dtype", o.dtype, "precision of the sweep")
      ->check(CLI::IsMember({"float", "double"}))->group(sg);
}

void add_training(CLI::App& app, StudyOptions& o) {
  const char* tg = "Training";
  TrainingOptions& t = o.train;
  app.add_option("--task", t.task, "built-in task: sort (8 tokens over 10 symbols -> sorted), "
                 "reverse, recall (8 key-value pairs, then a key -> its value)")
      ->check(CLI::IsMember({"recall", "sort", "reverse"}))->group(tg);
  app.add_option("--control-task", t.control_task, "also train one scaled model on this task "
                 "(the report says whether it learns within the budget); 'none' to skip")
      ->check(CLI::IsMember({"recall", "sort", "reverse", "none"}))->group(tg);
  app.add_option("--d-heads", t.d_heads, "head widths, comma-separated")
      ->delimiter(',')->check(SizeRange(std::size_t(1), std::size_t(1024)))->group(tg);
  app.add_option("--remedy-d-head", t.remedy_d_head, "head width of the remedies (0: none)")
      ->check(SizeRange(std::size_t(0), std::size_t(1024)))->group(tg);
  app.add_option("--seeds", t.seeds, "seeds, comma-separated (each trains every arm)")
      ->delimiter(',')->check(apps::unsigned_integer())->group(tg);
  app.add_option("--inits", o.inits, "initialisations of Wq, Wk, Wv: gpt2, variance_preserving")
      ->delimiter(',')->check(CLI::IsMember({"gpt2", "variance_preserving"}))->group(tg);
  app.add_option("--heads", t.heads, "heads per layer (d_model = heads x d_head)")
      ->check(SizeRange(std::size_t(1), std::size_t(64)))->group(tg);
  app.add_option("--layers", t.layers, "transformer blocks")
      ->check(SizeRange(std::size_t(1), std::size_t(16)))->group(tg);
  app.add_option("--mlp-ratio", t.mlp_ratio, "MLP hidden width as a multiple of d_model")
      ->check(SizeRange(std::size_t(1), std::size_t(16)))->group(tg);
  apps::add_optimiser_options(
      app, {t.steps, t.batch, t.warmup, t.lr, t.min_lr, t.weight_decay, t.clip}, tg);
  app.add_option("--eval-every", t.eval_every, "held-out evaluation every N steps")
      ->check(SizeRange(std::size_t(1), std::size_t(10000000)))->group(tg);
  app.add_option("--eval-size", t.eval_size, "held-out sequences")
      ->check(SizeRange(std::size_t(1), std::size_t(100000)))->group(tg);
}

void add_lr(CLI::App& app, StudyOptions& o) {
  const char* lg = "Learning-rate sweep";
  app.add_option("--lr-rates", o.lr.lrs, "peak learning rates, comma-separated")
      ->delimiter(',')->check(apps::finite_range(1e-8, 10.0))->group(lg);
  app.add_option("--lr-seeds", o.lr.seeds, "seeds, comma-separated")
      ->delimiter(',')->check(apps::unsigned_integer())->group(lg);
  app.add_option("--lr-steps", o.lr.steps, "optimiser steps of every run")
      ->check(SizeRange(std::size_t(1), std::size_t(1000000)))->group(lg);
  app.add_option("--ablation-steps", o.ablation.steps, "training steps of the ablated model")
      ->check(SizeRange(std::size_t(1), std::size_t(1000000)))->group("Head ablation");
}

// --quick: small versions of everything the user did not set explicitly.
void apply_quick(const CLI::App& app, StudyOptions& o) {
  auto given = [&](const char* name) { return app.count(name) > 0; };
  if (!given("--tk")) o.sweep.tks = {16, 64};
  if (!given("--rows")) o.sweep.rows = 1024;
  if (!given("--chunk-rows")) o.sweep.chunk_rows = 512;
  if (!given("--d-heads")) o.train.d_heads = {16};
  if (!given("--seeds")) o.train.seeds = {1};
  if (!given("--steps")) o.train.steps = 40;
  if (!given("--warmup")) o.train.warmup = 10;
  if (!given("--eval-every")) o.train.eval_every = 20;
  if (!given("--eval-size")) o.train.eval_size = 100;
  if (!given("--batch")) o.train.batch = 32;
  if (!given("--lr-seeds")) o.lr.seeds = {1};
  if (!given("--lr-steps")) o.lr.steps = 20;
  o.lr.warmup = std::min<std::size_t>(5, o.lr.steps);
  o.lr.eval_every = 10;
  o.lr.eval_size = 100;
  if (!given("--ablation-steps")) o.ablation.steps = 40;
  o.ablation.eval_size = 100;
}

// The options of a part the run skips would change nothing: refused rather than ignored.
void check_skipped_parts(const CLI::App& app, const StudyOptions& o) {
  struct Part {
    bool skipped;
    const char *group, *name, *flag;  // its options' group in --help
  };
  const Part parts[] = {{o.skip_sweep, "Sweep", "the sweep", "--skip-sweep"},
                        {o.skip_lr, "Learning-rate sweep", "the learning-rate sweep", "--skip-lr"},
                        {o.skip_ablation, "Head ablation", "the head ablation", "--skip-ablation"}};
  for (const Part& part : parts)
    for (const CLI::Option* option : app.get_options())
      if (part.skipped && option->count() > 0 && option->get_group() == part.group)
        throw UsageError(option->get_name() + " belongs to " + part.name + ", which " + part.flag +
                         " skips");
}

void check_options(const StudyOptions& o) {
  const SweepOptions& s = o.sweep;
  if (s.chunk_rows % s.queries_per_group != 0)
    throw UsageError("--chunk-rows must be a multiple of " + std::to_string(s.queries_per_group));
  if (s.rows % (2 * s.chunk_rows) != 0)
    throw UsageError("--rows " + std::to_string(s.rows) + " must be a multiple of 2 x --chunk-rows " +
                     std::to_string(s.chunk_rows));
  if (o.train.seeds.empty() || o.train.d_heads.empty() || s.d_ks.empty() || s.tks.empty() ||
      o.lr.lrs.empty() || o.lr.seeds.empty())
    throw UsageError("the lists --d-k, --tk, --d-heads, --seeds, --lr-rates and --lr-seeds must not be empty");
  TrainingOptions t = o.train;
  apps::check_optimiser_settings({t.steps, t.batch, t.warmup, t.lr, t.min_lr, t.weight_decay, t.clip});
}

}  // namespace

void add_study_options(CLI::App& app, StudyOptions& o) {
  add_general(app, o);
  add_sweep(app, o);
  add_training(app, o);
  add_lr(app, o);
}

void finish_study_options(const CLI::App& app, StudyOptions& o) {
  check_skipped_parts(app, o);
  if (o.quick) apply_quick(app, o);
  o.sweep.use_double = o.dtype == "double";
  TrainingOptions& t = o.train;
  if (t.control_task == "none" || t.control_task == t.task) t.control_task.clear();
  t.inits.clear();
  for (const std::string& s : o.inits) {
    const AttentionInit i = parse_attention_init(s);
    if (std::find(t.inits.begin(), t.inits.end(), i) == t.inits.end()) t.inits.push_back(i);
  }
  o.lr.task = o.ablation.task = t.task;
  check_options(o);
}

void prepare_study_outputs(const StudyOptions& o) {
  namespace fs = std::filesystem;
  if (!o.ablate_checkpoint.empty()) return;  // writes nothing
  if (!o.doc.empty()) {
    const fs::path parent = fs::absolute(o.doc).parent_path();
    if (!fs::is_directory(parent)) throw UsageError("--doc " + o.doc + ": no directory " + parent.string());
    apps::prepare_out_dir(parent.string(), "--doc");
  }
  apps::prepare_out_dir(o.out);
}

}  // namespace tapegrad::saturation
