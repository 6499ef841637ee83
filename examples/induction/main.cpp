// induction: induction heads forming in a two-layer attention-only transformer trained on
// repeated random tokens, with the 1/sqrt(d_k) scale, without it, and with QK-norm
// (examples/induction/study.hpp says what is measured). Writes CSV tables, SVG plots and
// REPORT.md into --out.
//
// Exit codes: 0 done, 1 a runtime failure, 2 a usage error (bad option or value).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "apps/common/cli.hpp"
#include "apps/common/model_source.hpp"
#include "apps/common/run_options.hpp"
#include "examples/induction/report.hpp"
#include "examples/induction/study.hpp"
#include "ops/threads.hpp"

using namespace tapegrad;
using namespace tapegrad::induction;

namespace {

constexpr const char* kProgram = "induction";

struct Options {
  StudyOptions study;
  std::vector<std::string> variants = {"scaled", "unscaled", "qk_norm"};
  std::string out = "out/induction";
  bool quick = false;
  int threads = 1;
  std::string precision = "f32";
  std::string model;  // score this model instead of training the study's
};

void add_options(CLI::App& app, Options& o) {
  StudyOptions& s = o.study;
  app.add_flag("--quick", o.quick, "one seed, the scaled model, 1000 steps");
  app.add_option("--model", o.model, "score every head of this model (a checkpoint or a Hugging "
                 "Face folder) on --batch held-out sequences of 2 x --half tokens drawn from "
                 "[0, --vocab) (default: the model's vocab), and print the table; nothing is "
                 "trained or written");
  app.add_option("--steps", s.steps, "training steps per run")->capture_default_str()
      ->check(CLI::Range(std::size_t(1), std::size_t(1) << 24));
  app.add_option("--seeds", s.seeds, "seeds (each: the model's initialisation and its data)")
      ->capture_default_str()->check(apps::unsigned_integer())->expected(1, 64);
  app.add_option("--variants", o.variants, "scaled, unscaled (attention_scale 1) or qk_norm")
      ->capture_default_str()->check(CLI::IsMember({"scaled", "unscaled", "qk_norm"}))->expected(1, 3);
  app.add_flag("--fixed-period", s.fixed_period,
               "every sequence is n = half tokens twice, no prefix (a positional shortcut exists)");
  app.add_option("--half", s.half, "sequences are 2 x half tokens; the period n is in [half/2, half]")->capture_default_str()
      ->check(CLI::Range(2, 512));
  app.add_option("--positions", s.positions, "rope or learned")
      ->transform(CLI::CheckedTransformer(std::map<std::string, PositionKind>{
          {"rope", PositionKind::rope}, {"learned", PositionKind::learned}}))
      ->default_str("rope");
  app.add_option("--vocab", s.vocab, "tokens are drawn from [0, vocab)")->capture_default_str()
      ->check(CLI::Range(2, 1 << 16));
  app.add_option("--d-model", s.d_model, "width of the residual stream")->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--heads", s.heads, "heads per layer")->capture_default_str()->check(CLI::Range(1, 64));
  app.add_option("--layers", s.layers, "attention layers")->capture_default_str()->check(CLI::Range(1, 16));
  app.add_option("--batch", s.batch, "sequences per step")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--lr", s.lr, "AdamW's peak learning rate")->capture_default_str()
      ->check(apps::finite_range(1e-7, 1.0));
  app.add_option("--eval-every", s.eval_every, "steps between evaluations")->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--out", o.out, "folder for the CSV tables, plots and REPORT.md")->capture_default_str();
  app.add_option("--threads", o.threads, "threads for the kernels")->capture_default_str()
      ->check(CLI::Range(1, 256));
  apps::add_precision_option(app, o.precision);
}

// --model: every head's induction and previous-token score, as CSV on stdout.
int score_model(Options& o, const CLI::App& app) {
  StudyOptions& s = o.study;
  std::optional<apps::LoadedModel> m;
  try {
    m.emplace(apps::load_model(o.model));
  } catch (const std::exception& e) {
    throw apps::UsageError("--model " + o.model + ": " + apps::one_line(e.what()));
  }
  if (app.count("--vocab") == 0) s.vocab = m->model.config().vocab;
  if (s.vocab < min_vocab(s))
    throw apps::UsageError("--vocab " + std::to_string(s.vocab) + " is less than 2 x --half " +
                               std::to_string(s.half));
  set_num_threads(o.threads);
  apps::use_precision(o.precision);
  EvalPoint p;
  try {
    p = score_given_model(m->model, s, s.seeds.front());
  } catch (const std::invalid_argument& e) {
    throw apps::UsageError(apps::one_line(e.what()));
  }
  const std::size_t heads = m->model.config().heads;
  std::printf("layer,head,induction,previous_token\n");
  for (std::size_t i = 0; i < p.scores.induction.size(); ++i)
    std::printf("%zu,%zu,%.6f,%.6f\n", i / heads, i % heads, p.scores.induction[i],
                p.scores.previous[i]);
  std::fprintf(stderr, "%s: loss on the first copy %.4f, on the repeat %.4f (in-context gain %.4f)\n",
               kProgram, p.loss_first, p.loss_repeat, p.in_context());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  apps::prepare_process();
  CLI::App app{"Induction heads forming in a 2-layer attention-only transformer trained on repeated\n"
               "random segments, with the 1/sqrt(d_k) scale, without it and with QK-norm: each copy's\n"
               "loss and every head's scores over training, the phase change, each head zeroed;\n"
               "CSV tables, SVG plots and REPORT.md in --out. Exit codes: 0 ok, 1 runtime failure, 2 usage error.",
               kProgram};
  apps::use_help_formatter(app);
  Options o;
  add_options(app, o);
  if (std::optional<int> code = apps::parse_command_line(app, argc, argv, kProgram)) return *code;
  StudyOptions& s = o.study;
  if (!o.model.empty()) {
    try {
      return score_model(o, app);
    } catch (const apps::UsageError& e) {
      std::fprintf(stderr, "%s: usage error: %s\n", kProgram, apps::one_line(e.what()).c_str());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", kProgram, apps::one_line(e.what()).c_str());
      return 1;
    }
  }
  if (s.d_model % s.heads != 0) {
    std::fprintf(stderr, "%s: usage error: --d-model %zu is not divisible by --heads %zu (see --help)\n",
                 kProgram, s.d_model, s.heads);
    return 2;
  }
  if (s.vocab < min_vocab(s)) {
    std::fprintf(stderr, "%s: usage error: --vocab %zu is less than 2 x --half %zu: the held-out "
                 "sequences draw distinct tokens (see --help)\n", kProgram, s.vocab, s.half);
    return 2;
  }
  if (o.quick) {
    if (app.count("--steps") == 0) s.steps = 1000;
    if (app.count("--seeds") == 0) s.seeds = {1};
    if (app.count("--variants") == 0) o.variants = {"scaled"};
    if (app.count("--eval-every") == 0) s.eval_every = 50;
  }
  s.variants.clear();
  for (const std::string& v : o.variants) s.variants.push_back(variant_of(v));
  // minutes of training must not end in a folder that cannot be written
  const apps::CreatedDirectory created_out(o.out);
  std::error_code error;
  std::filesystem::create_directories(o.out, error);
  if (error || !std::filesystem::is_directory(o.out)) {
    std::fprintf(stderr, "%s: usage error: --out %s: cannot create the folder (%s) (see --help)\n",
                 kProgram, o.out.c_str(), error ? error.message().c_str() : "a file is in the way");
    return 2;
  }
  try {
    set_num_threads(o.threads);
    apps::use_precision(o.precision);
    Report report;
    report.options = s;
    report.command = kProgram;
    for (int i = 1; i < argc; ++i) report.command += std::string(" ") + argv[i];
    const auto start = std::chrono::steady_clock::now();
    for (Variant v : s.variants)
      for (std::uint64_t seed : s.seeds) {
        report.runs.push_back(run_one(s, v, seed));
        const RunResult& r = report.runs.back();
        std::fprintf(stderr, "%-8s seed %-3llu  loss first %.3f repeat %.3f  phase change %-10s "
                     "best induction head L%zuH%zu %.3f  (%.1f s)\n",
                     to_string(v).c_str(), (unsigned long long)seed, r.last().loss_first,
                     r.last().loss_repeat,
                     r.phase_step ? ("step " + std::to_string(*r.phase_step)).c_str() : "none",
                     r.best_layer, r.best_head, r.best_induction, r.seconds);
      }
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::vector<std::string> files = write_report(o.out, report);
    std::printf("%s", report_markdown(report).c_str());
    std::printf("\nwrote %zu files into %s\n", files.size(), o.out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, apps::one_line(e.what()).c_str());
    created_out.remove_if_empty();  // a run that failed before writing leaves no --out behind
    return 1;
  }
  return 0;
}
