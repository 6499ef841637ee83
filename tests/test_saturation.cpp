// examples/saturation: the study's sweep run in-process at Tk = 16 (its first two findings,
// so a regression in scaling or softmax shows up here), exact cases of the
// measurement, the verdict logic, one tiny training run, and the binary's CLI.
#if defined(TAPEGRAD_WITH_SATURATION)
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "examples/saturation/ablation.hpp"
#include "examples/saturation/report.hpp"
#include "examples/saturation/sweep.hpp"
#include "examples/saturation/training.hpp"
#include "tasks/tasks.hpp"
#include "run_program.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::saturation;

namespace {

// The quick sweep of the tests: Tk 16, every d_k of the study, 2,048 query rows, float64.
const std::vector<SweepPoint>& tk16_sweep() {
  static const std::vector<SweepPoint> points = [] {
    SweepOptions o;
    o.tks = {16};
    o.rows = 2048;
    o.chunk_rows = 1024;
    return run_sweep(o);
  }();
  return points;
}

using Run = tapegrad::test::ProgramRun;
using tapegrad::test::slurp;

TEST_CASE("saturation ablation: each row through the zero_head hook is the head mask's numbers",
          "[saturation]") {
  const tasks::SequenceTask task = tasks::SequenceTask::make("sort");
  TransformerConfig c = gpt2_preset();
  c.vocab = task.vocab_size();
  c.context = task.context();
  c.d_model = 16;
  c.heads = 2;
  c.layers = 2;
  c.seed = 5;
  Transformer<float> model(c);
  TrainingOptions o;
  o.eval_size = 40;
  const std::vector<tasks::Batch> batches = eval_batches(o, task);
  const std::vector<AblationRow> rows = ablate_each_head(model, batches);
  REQUIRE(rows.size() == 1 + 2 * 2);
  const auto forward = [&model](const Indices& tokens) { return model.forward(tokens); };
  bool some_head_moves_the_margin = false;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    model.ablate_head(rows[i].layer, rows[i].head);
    const AblationRow masked = evaluate_margin(forward, batches);
    CHECK(rows[i].accuracy == masked.accuracy);
    CHECK(rows[i].mean_margin == Approx(masked.mean_margin).epsilon(1e-6));
    some_head_moves_the_margin |= std::abs(rows[i].mean_margin - rows[0].mean_margin) > 1e-4;
  }
  model.clear_head_masks();
  CHECK(some_head_moves_the_margin);
}

#if defined(TAPEGRAD_SATURATION_BIN)
Run run_binary(const std::string& args, const std::string& name) {
  return tapegrad::test::run_program(TAPEGRAD_SATURATION_BIN, args,
                                     tapegrad::test::scratch_dir("test_saturation", name));
}
#endif

}  // namespace

TEST_CASE("saturation sweep: score std is sqrt(d_k) unscaled and 1 scaled", "[saturation]") {
  // A dot product of d_k products of independent unit-variance entries has variance d_k.
  const auto& pts = tk16_sweep();
  REQUIRE(pts.size() == 18);
  for (const SweepPoint& p : pts) {
    INFO("d_k " << p.d_k << (p.scaled ? " scaled" : " unscaled") << ": std " << p.score_std);
    double theory = p.scaled ? 1.0 : std::sqrt(double(p.d_k));
    CHECK(std::abs(p.score_std / theory - 1) < 0.05);
    // The library's scaled_dot_product_attention sees the same numbers as the composition.
    CHECK(p.sdpa_weights_diff < 1e-12);
    CHECK(p.sdpa_grad_q_rel_diff < 1e-10);
  }
}

TEST_CASE("saturation sweep: at Tk 16 and large d_k unscaled rows saturate and the score gradient vanishes", "[saturation]") {
  const auto& pts = tk16_sweep();
  for (std::size_t d : {256, 512, 1024}) {
    const SweepPoint& u = find_point(pts, 16, d, false);
    const SweepPoint& s = find_point(pts, 16, d, true);
    INFO("d_k " << d << ": max weight " << u.mean_max_weight << ", gradients " << u.median_grad_scores
                << " vs " << s.median_grad_scores);
    CHECK(u.mean_max_weight > 0.9);
    CHECK(u.median_grad_scores < s.median_grad_scores / 10);
    // Scaled scores are normal(0, 1): the largest of 16 is about 1.8 above the mean, worth
    // about e^1.8 / (16 e^0.5) = 0.23 of the row, far from one-hot.
    CHECK(s.mean_max_weight < 0.5);
    CHECK(s.frac_saturated == 0.0);
  }
}

TEST_CASE("saturation sweep: one key gives weight 1 zero entropy and zero gradient", "[saturation]") {
  // With Tk = 1 the softmax is identically 1, so its Jacobian is 0: nothing reaches the
  // scores or Q, whatever the upstream gradient.
  SweepOptions o;
  o.d_ks = {4};
  o.tks = {1};
  o.rows = 64;
  o.chunk_rows = 32;
  for (const SweepPoint& p : run_sweep(o)) {
    CHECK(p.mean_max_weight == 1.0);
    CHECK(p.mean_entropy == 0.0);
    CHECK(p.frac_saturated == 1.0);
    CHECK(p.median_grad_scores == 0.0);
    CHECK(p.median_grad_q == 0.0);
    CHECK(p.log_tk == 0.0);
  }
  o.rows = 48;  // not an even number of chunks
  CHECK_THROWS_AS(run_sweep(o), std::invalid_argument);
}

TEST_CASE("saturation checks: verdicts follow the numbers", "[saturation]") {
  std::vector<SweepPoint> pts;
  for (std::size_t d : {64, 256}) {
    for (bool scaled : {true, false}) {
      SweepPoint p;
      p.tk = 16;
      p.d_k = d;
      p.scaled = scaled;
      p.theory_std = scaled ? 1.0 : std::sqrt(double(d));
      p.score_std = p.theory_std * 1.04;
      p.mean_max_weight = scaled ? 0.25 : 0.95;
      p.median_grad_scores = scaled ? 2.0 : 0.1;
      pts.push_back(p);
    }
  }
  auto checks = sweep_checks(pts);
  REQUIRE(checks.size() >= 4);
  CHECK(checks[0].verdict == Check::held);  // unscaled std 4% off
  CHECK(checks[1].verdict == Check::held);  // scaled std 4% off
  CHECK(checks[2].verdict == Check::held);  // max weight 0.95 > 0.9
  CHECK(checks[3].verdict == Check::held);  // ratio 0.05 < 0.1
  CHECK(checks[4].verdict == Check::not_measured);  // no d_k 1024 in the sweep

  pts[2].score_std = pts[2].theory_std * 1.06;  // d_k 256 scaled: 6% off
  pts[3].mean_max_weight = 0.85;                // d_k 256 unscaled: not saturated
  pts[3].median_grad_scores = 0.3;              // ratio 0.15
  checks = sweep_checks(pts);
  CHECK(checks[0].verdict == Check::held);
  CHECK(checks[1].verdict == Check::failed);
  CHECK(checks[2].verdict == Check::failed);
  CHECK(checks[3].verdict == Check::failed);
}

TEST_CASE("saturation training: a tiny run is reproducible and sees uniform attention at gpt2 init", "[saturation]") {
  TrainingOptions o;
  o.task = "sort";
  o.heads = 1;
  o.layers = 1;
  o.steps = 4;
  o.warmup = 1;
  o.batch = 8;
  o.eval_every = 2;
  o.eval_size = 20;
  o.curve_every = 2;
  RunSpec spec{8, true, AttentionInit::gpt2, 3, ""};
  RunResult a = train_one(o, spec), b = train_one(o, spec);
  REQUIRE(a.curve.size() == 2);
  REQUIRE(a.evals.size() == 3);  // before training, steps 2 and 4
  for (std::size_t i = 0; i < a.curve.size(); ++i) {
    CHECK(a.curve[i].loss == b.curve[i].loss);
    CHECK(a.curve[i].grad_wq == b.curve[i].grad_wq);
    CHECK(a.curve[i].grad_wq > 0);
    CHECK(a.curve[i].grad_wk > 0);
  }
  // normal(0, 0.02) projections make every score nearly 0, so each causal row i is nearly
  // uniform over its i + 1 keys: entropy log(i + 1).
  const tasks::SequenceTask task = tasks::SequenceTask::make("sort");
  CHECK(a.evals[0].entropy_all == Approx(causal_uniform_entropy(task.context())).margin(0.01));
  CHECK(a.evals[0].entropy_answer ==
        Approx(causal_uniform_entropy(task.context(), task.first_answer_position())).margin(0.01));
  CHECK(causal_uniform_entropy(3) == Approx((std::log(1.0) + std::log(2.0) + std::log(3.0)) / 3));

  // Unit-variance queries and keys without the scale: rows far from uniform at step 0.
  RunSpec vp{32, false, AttentionInit::variance_preserving, 3, ""};
  o.steps = 1;
  o.eval_every = 1;
  RunResult c = train_one(o, vp);
  CHECK(c.evals[0].entropy_all < 0.6 * causal_uniform_entropy(task.context()));
}

#if defined(TAPEGRAD_SATURATION_BIN)
TEST_CASE("saturation CLI: usage errors exit 2 with one line", "[saturation]") {
  for (const char* args : {"--bogus", "--rows 1000", "--sweep-dtype half", "--d-k 0",
                           "--task nope", "--threads -1", "--out /proc/saturation-test"}) {
    INFO(args);
    Run r = run_binary(args, "usage");
    CHECK(r.code == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find("saturation:") == 0);
  }
}

TEST_CASE("saturation CLI: quick mode writes the report the tables and the plots", "[saturation]") {
  fs::path root = fs::path(TAPEGRAD_BINARY_DIR) / "test_saturation" / "quick-doc";
  fs::remove_all(root);
  fs::create_directories(root);
  fs::path dir = root / "saturation";
  // A few d_k only: the sweep itself is tested in-process above; this checks the program.
  // Under the sanitizers a few steps per run: what this test checks is decided at step 0
  // (the initial spreads and gradients, the position checks), and 40 steps of the d_head 256
  // arms took four minutes there.
#ifdef __SANITIZE_ADDRESS__
  const std::string steps = " --steps 4 --warmup 1 --eval-every 2 --lr-steps 4 --ablation-steps 4";
#else
  const std::string steps;
#endif
  Run r = run_binary("--quick --threads 2 --d-k 4,256,1024" + steps + " --out '" + dir.string() +
                         "' --doc '" + (root / "SATURATION.md").string() + "'",
                     "quick");
  REQUIRE(r.code == 0);
  for (const char* f : {"REPORT.md", "sweep.csv", "gradient_ratio.csv", "expectations.csv",
                        "training_runs.csv", "training_curves.csv", "training_evals.csv",
                        "sweep_score_std.svg", "sweep_max_weight.svg", "sweep_entropy.svg",
                        "sweep_grad_scores.svg", "sweep_grad_q.svg", "train_loss_d16_gpt2.svg",
                        "train_loss_d16_variance_preserving.svg"}) {
    INFO(f);
    CHECK(fs::exists(dir / f));
  }
  std::string report = slurp(dir / "REPORT.md");
  CHECK(report.find("quick mode") != std::string::npos);
  CHECK(report.find("](sweep_score_std.svg)") != std::string::npos);
  // The --doc copy is the same report with its links pointing into the output directory.
  std::string doc = slurp(root / "SATURATION.md");
  CHECK(doc.find("](saturation/sweep_score_std.svg)") != std::string::npos);
  CHECK(doc.find("](sweep_score_std.svg)") == std::string::npos);
  // The two score-std expectations are the first rows of expectations.csv.
  std::string csv = slurp(dir / "expectations.csv");
  std::istringstream lines(csv);
  std::string header, first, second;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  CHECK(first.substr(first.size() - 5) == ",held");
  CHECK(second.substr(second.size() - 5) == ",held");
  CHECK(slurp(dir / "sweep_score_std.svg").find("<svg") != std::string::npos);
  // What a quick run can decide of the later parts: every arm's initial score spread (wrong
  // when QK-norm or a soft-cap is silently off or the scale is lost), the temperature arm
  // starting as the scaled model, the vanished gradient of the saturated arms, the binding
  // cap's live one, and the position checks.
  for (const char* claim : {"d_head 256, scaled: initial score spread",
                            "d_head 256, unscaled: initial score spread",
                            "d_head 256, unscaled + QK-norm (gain 1): initial score spread",
                            "d_head 256, unscaled + QK-norm (gain 0.25): initial score spread",
                            "d_head 256, scaled + QK-norm (gain 1): initial score spread",
                            "d_head 256, unscaled + learned temperature: initial score spread",
                            "d_head 256, unscaled + soft-cap 50: initial score spread",
                            "d_head 256, unscaled + soft-cap 5: initial score spread",
                            "d_head 256, unscaled + sandwich norms: initial score spread",
                            "d_head 256, unscaled + ALiBi: initial score spread",
                            "at initialisation the median gradient at the scores of unscaled + soft-cap",
                            "unscaled + soft-cap 5: at initialisation the median gradient at the softmax",
                            "unscaled + learned temperature starts with the scaled model",
                            "at initialisation the median gradient at the scores",
                            "without positions, shuffling the tokens", "with RoPE, shifting",
                            "with residuals (RMSNorm"}) {
    INFO(claim);
    const std::size_t at = csv.find(claim);
    REQUIRE(at != std::string::npos);
    const std::string line = csv.substr(at, csv.find('\n', at) - at);
    CHECK(line.substr(line.size() - 5) == ",held");
  }
  for (const char* f : {"remedies_spread.svg", "remedies_entropy.svg", "remedies_grad.svg", "lr_final_loss.svg", "lr_max_logit.svg", "ablation.svg",
                        "lr_sweep.csv", "ablation.csv"}) {
    INFO(f);
    CHECK(fs::exists(dir / f));
  }
  CHECK(report.find("## What this study does not show") != std::string::npos);
}
#endif

#endif  // TAPEGRAD_WITH_SATURATION
