// The widened saturation study: the attention probe against autograd, the remedy arms'
// models and verdicts (failing when QK-norm is silently off or the scale is wrong), the
// learning-rate sensitivity number, the position checks, and --ablate on a checkpoint.
#if defined(TAPEGRAD_WITH_SATURATION)
#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "autograd/tape.hpp"
#include "examples/saturation/lr_sweep.hpp"
#include "examples/saturation/parallel.hpp"
#include "examples/saturation/position_report.hpp"
#include "examples/saturation/positions.hpp"
#include "examples/saturation/probe.hpp"
#include "examples/saturation/remedies_report.hpp"
#include "examples/saturation/training.hpp"
#include "nn/io/checkpoint.hpp"
#include "ops/elementwise.hpp"
#include "ops/reduce.hpp"
#include "ops/softmax.hpp"
#include "run_program.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::saturation;

TEST_CASE("saturation probe: the gradient at the scores equals autograd's through softmax", "[saturation]") {
  Generator gen(4);
  Tensor<float> scores = Tensor<float>::randn({1, 7}, gen, 0, 3, true);
  const Tensor<float> G = Tensor<float>::randn({1, 7}, gen);
  Tensor<float> w = softmax(scores, -1);
  w.retain_grad();
  sum(w * G).backward();
  double expected = 0;
  for (std::size_t j = 0; j < 7; ++j) expected += double(scores.grad().data()[j]) * scores.grad().data()[j];
  const double got = softmax_row_gradient_norm(w.data(), w.grad().data(), 7);
  CHECK(got == Approx(std::sqrt(expected)).epsilon(1e-5));
  // the trap: d loss / d w itself is not the gradient at the scores
  double naive = 0;
  for (std::size_t j = 0; j < 7; ++j) naive += double(G.data()[j]) * G.data()[j];
  CHECK(std::abs(std::sqrt(naive) - got) > 0.1 * got);
}

TEST_CASE("saturation probe: the gradient before a soft-cap equals autograd's through the cap", "[saturation]") {
  const double cap = 2;
  Generator gen(5);
  Tensor<float> logits = Tensor<float>::randn({1, 7}, gen, 0, 3, true);
  const Tensor<float> G = Tensor<float>::randn({1, 7}, gen);
  const Tensor<float> capped = softcap(logits, cap);
  Tensor<float> w = softmax(capped, -1);
  w.retain_grad();
  sum(w * G).backward();
  double expected = 0;
  for (std::size_t j = 0; j < 7; ++j) expected += double(logits.grad().data()[j]) * logits.grad().data()[j];
  const double got = capped_row_gradient_norm(w.data(), w.grad().data(), capped.data(), 7, cap);
  CHECK(got == Approx(std::sqrt(expected)).epsilon(1e-5));
  // the trap: the gradient at the capped scores misses tanh's slope
  CHECK(std::abs(softmax_row_gradient_norm(w.data(), w.grad().data(), 7) - got) > 0.1 * got);
}

namespace {

TrainingOptions remedy_options() {
  TrainingOptions o;
  o.heads = 1;
  o.layers = 2;
  o.remedy_d_head = 256;
  o.seeds = {1};
  o.eval_size = 64;
  return o;
}

// The initial probe of the model of one arm.
AttentionProbe initial_probe(const TransformerConfig& c) {
  Transformer<float> model(c);
  const TrainingOptions o = remedy_options();
  const tasks::SequenceTask task = tasks::SequenceTask::make(o.task);
  return probe_attention(model, probe_batch(o, task), task.first_answer_position());
}

}  // namespace

TEST_CASE("saturation remedies: each arm's model starts with the score spread its verdict expects", "[saturation]") {
  const TrainingOptions o = remedy_options();
  const std::vector<RunSpec> specs = remedy_specs(o);
  REQUIRE(specs.size() == 10);
  CHECK(unit_spread_qk_gain(256) == Approx(0.25));
  const RunSpec unit = specs[3];
  REQUIRE(unit.remedy == Remedy::qk_norm_unit_spread);
  const TransformerConfig c = run_config(o, unit);
  CHECK(c.qk_norm);
  CHECK(c.qk_norm_gain == Approx(0.25));
  CHECK(c.attention_scale == std::optional<double>(1.0));
  const double spread = initial_probe(c).score_spread;
  CHECK(spread > 0.7);
  CHECK(spread < 1.4);
  // the trap: QK-norm silently off leaves the unscaled spread near sqrt(256) = 16
  TransformerConfig off = c;
  off.qk_norm = false;
  CHECK(initial_probe(off).score_spread > 8);
  // and the scaled arm with its scale lost is the unscaled model
  const TransformerConfig scaled = run_config(o, specs[0]);
  TransformerConfig lost = scaled;
  lost.attention_scale = 1.0;
  CHECK(initial_probe(scaled).score_spread < 1.4);
  CHECK(initial_probe(lost).score_spread > 8);
  // the binding soft-cap holds the spread below the cap, where the unscaled model has ~14
  const RunSpec binding = specs[7];
  REQUIRE(binding.remedy == Remedy::softcap_binding);
  TransformerConfig capped = run_config(o, binding);
  CHECK(capped.attn_softcap == kBindingSoftcap);
  const AttentionProbe p = initial_probe(capped);
  CHECK(p.score_spread > 3);
  CHECK(p.score_spread < 5);
  CHECK(p.median_grad_logits < p.median_grad_scores);
  capped.attn_softcap = 0;
  CHECK(initial_probe(capped).score_spread > 8);
}

TEST_CASE("saturation remedies: the architecture arms build the part they name and nothing else", "[saturation]") {
  const TrainingOptions o = remedy_options();
  const std::vector<RunSpec> specs = remedy_specs(o);
  const TransformerConfig plain = run_config(o, specs[1]);
  REQUIRE(specs[6].remedy == Remedy::softcap);
  CHECK(run_config(o, specs[6]).attn_softcap == kGemmaSoftcap);
  REQUIRE(specs[8].remedy == Remedy::post_norms);
  CHECK(run_config(o, specs[8]).post_norms);
  REQUIRE(specs[9].remedy == Remedy::alibi);
  CHECK(run_config(o, specs[9]).positions == PositionKind::alibi);
  for (std::size_t i = 6; i < 10; ++i) {
    INFO(arm_label(specs[i]));
    CHECK_FALSE(specs[i].scaled);
    CHECK(run_config(o, specs[i]).attention_scale == plain.attention_scale);
  }
  CHECK(plain.attn_softcap == 0);
  CHECK_FALSE(plain.post_norms);
  CHECK(plain.positions == PositionKind::learned);
}

namespace {

// A run whose initial probe and held-out attention are these, and that reaches 0.9 (or not).
struct FakeArm {
  double spread, entropy, grad, grad_logits;
  bool reaches;
};

RunResult fake_run(const RunSpec& spec, const FakeArm& a) {
  RunResult r;
  r.spec = spec;
  EvalPoint e;
  e.probe.score_spread = a.spread;
  e.probe.median_grad_scores = a.grad;
  e.probe.median_grad_logits = a.grad_logits;
  e.entropy_answer = a.entropy;
  r.evals = {e, e};
  r.evals.back().accuracy = a.reaches ? 0.95 : 0.05;
  if (a.reaches) r.step_to_90 = 300;
  return r;
}

// Runs with the numbers every expectation wants; `change` edits the arms first.
std::vector<RunResult> fake_runs(double unit_spread, double scaled_spread,
                                 void (*change)(std::vector<FakeArm>&) = nullptr) {
  const FakeArm learns{scaled_spread, 1.5, 1e-4, 1e-4, true}, saturated{16, 0.3, 1e-6, 1e-6, false};
  std::vector<FakeArm> arms = {learns, saturated, saturated, {unit_spread, 1.5, 1e-4, 1e-4, true},
                               {1, 1.5, 1e-4, 1e-4, true}, learns, saturated,
                               {4.5, 1.8, 1e-4, 1e-6, true}, saturated, saturated};
  if (change) change(arms);
  std::vector<RunResult> runs;
  const std::vector<RunSpec> specs = remedy_specs(remedy_options());
  for (std::size_t i = 0; i < specs.size(); ++i) runs.push_back(fake_run(specs[i], arms[i]));
  return runs;
}

std::size_t failed(const std::vector<Check>& checks) {
  return std::count_if(checks.begin(), checks.end(), [](const Check& c) { return c.verdict == Check::failed; });
}

}  // namespace

TEST_CASE("saturation remedies: verdicts follow the numbers", "[saturation]") {
  const TrainingOptions o = remedy_options();
  const std::vector<RunResult> good = fake_runs(1.0, 1.0);
  const std::vector<Check> checks = remedy_checks(remedy_findings(good, o, false));
  REQUIRE(checks.size() == 14);
  CHECK(failed(checks) == 0);
  // QK-norm silently off: the unit-spread arm starts at 16
  const std::vector<RunResult> no_norm = fake_runs(16, 1.0);
  CHECK(failed(remedy_checks(remedy_findings(no_norm, o, false))) == 1);
  // the scale wrong: the scaled arms (and the temperature arm, which copies them) start at 16
  const std::vector<RunResult> no_scale = fake_runs(1.0, 16);
  CHECK(failed(remedy_checks(remedy_findings(no_scale, o, false))) >= 2);
  // a quick run does not decide the steps-to-0.9 rows
  const std::vector<Check> quick = remedy_checks(remedy_findings(good, o, true));
  CHECK(std::count_if(quick.begin(), quick.end(), [](const Check& c) { return c.verdict == Check::not_measured; }) == 6);
}

TEST_CASE("saturation architectures: verdicts follow the numbers", "[saturation]") {
  const TrainingOptions o = remedy_options();
  const std::vector<Check> checks = architecture_checks(remedy_findings(fake_runs(1.0, 1.0), o, false));
  REQUIRE(checks.size() == 13);
  CHECK(failed(checks) == 0);
  // the binding cap silently off: its arm is the unscaled model
  const auto cap_off = [](std::vector<FakeArm>& a) { a[7] = a[1]; };
  CHECK(failed(architecture_checks(remedy_findings(fake_runs(1.0, 1.0, cap_off), o, false))) == 4);
  // a sandwich norm that flattened attention would show in the entropy
  const auto flat = [](std::vector<FakeArm>& a) { a[8].entropy = 2.4; };
  CHECK(failed(architecture_checks(remedy_findings(fake_runs(1.0, 1.0, flat), o, false))) == 1);
}

TEST_CASE("saturation architectures: the findings say which part bounded the scores and kept the gradient", "[saturation]") {
  const TrainingOptions o = remedy_options();
  const std::vector<RunResult> runs = fake_runs(1.0, 1.0);  // the findings point into them
  const RemedyFindings f = remedy_findings(runs, o, false);
  const std::string md = remedy_markdown(f, remedy_checks(f), architecture_checks(f));
  const auto line_of = [&](const std::string& label) {
    const std::size_t at = md.find("- **" + label + "**");
    REQUIRE(at != std::string::npos);
    return md.substr(at, md.find('\n', at) - at);
  };
  // the fake binding cap starts and ends at spread 4.5 with a live gradient; the others saturate
  const std::string binding = line_of("unscaled + soft-cap 5");
  CHECK_THAT(binding, Catch::Contains("seeds reach 0.9") && Catch::Contains(", held below") &&
                          Catch::Contains("alive") && !Catch::Contains("**: 0 of"));
  for (const char* label : {"unscaled + soft-cap 50", "unscaled + sandwich norms", "unscaled + ALiBi"}) {
    INFO(label);
    CHECK_THAT(line_of(label), Catch::Contains("**: 0 of") && Catch::Contains("not held") &&
                                   Catch::Contains("vanished"));
  }
  // a quick run has no findings to report
  const RemedyFindings quick = remedy_findings(runs, o, true);
  CHECK_THAT(remedy_markdown(quick, remedy_checks(quick), architecture_checks(quick)),
             !Catch::Contains("Finding 5"));
}

TEST_CASE("saturation learning rates: the sensitivity number as Wortsman et al. define it", "[saturation]") {
  std::vector<LrRun> runs;
  auto run = [](bool qk, double lr, double initial, double final_loss, bool diverged) {
    LrRun r;
    r.qk_norm = qk;
    r.lr = lr;
    EvalPoint a, b;
    a.loss = initial;
    b.loss = final_loss;
    r.result.evals = {a, b};
    r.result.diverged = diverged;
    return r;
  };
  runs.push_back(run(false, 1e-3, 2.3, 1.0, false));
  runs.push_back(run(false, 1e-2, 2.3, 0.5, false));
  runs.push_back(run(false, 1e-1, 2.3, std::nan(""), true));  // diverged: counts as 2.3
  runs.push_back(run(true, 1e-3, 2.3, 0.9, false));
  runs.push_back(run(true, 1e-2, 2.3, 0.6, false));
  runs.push_back(run(true, 1e-1, 2.3, 3.0, false));  // worse than at the start: counts as 2.3
  const std::vector<LrPoint> plain = lr_points(runs, false), qk = lr_points(runs, true);
  REQUIRE(plain.size() == 3);
  CHECK(plain[2].mean_final == Approx(2.3));
  CHECK(plain[2].diverged == 1);
  CHECK(lr_sensitivity(plain) == Approx((1.0 + 0.5 + 2.3) / 3 - 0.5));
  CHECK(lr_sensitivity(qk) == Approx((0.9 + 0.6 + 2.3) / 3 - 0.6));
}

TEST_CASE("saturation positions: the identities hold to round-off and the breaks are large", "[saturation]") {
  const PositionResults p = run_position_checks();
  CHECK(p.no_position_gap < 1e-12);
  CHECK(p.learned_gap > 0.1);
  CHECK(p.rope_shift_gap < 1e-9);
  CHECK(p.learned_shift_gap > 0.1);
  REQUIRE(p.residual.size() == 6);
  CHECK(p.residual.back().layer == 32);
  for (const Check& c : position_checks(p)) {
    INFO(c.claim << ": " << c.measured);
    CHECK(c.verdict == Check::held);
  }
  // the checks can fail: a "residual" stream that never grows
  PositionResults flat = p;
  for (ResidualRow& r : flat.residual) r.residual_norm = p.input_norm;
  CHECK(position_checks(flat).back().verdict == Check::failed);
}

TEST_CASE("saturation runs: every worker trains at the caller's matrix-product precision", "[saturation][bf16]") {
  // the precision is a per-thread setting: a worker thread left at its own default would
  // train a --precision bf16 study in float32
  for (MatmulPrecision want : {MatmulPrecision::bf16, MatmulPrecision::f32}) {
    MatmulPrecisionGuard caller(want);
    std::vector<MatmulPrecision> seen(6, want == MatmulPrecision::f32 ? MatmulPrecision::bf16
                                                                      : MatmulPrecision::f32);
    std::vector<std::thread::id> threads(6);
    run_parallel(6, 3, {}, [&](std::size_t i) {
      seen[i] = matmul_precision();
      threads[i] = std::this_thread::get_id();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // let the others take jobs
    });
    for (MatmulPrecision p : seen) CHECK(p == want);
    CHECK(std::count(threads.begin(), threads.end(), std::this_thread::get_id()) < 6);
  }
}

#if defined(TAPEGRAD_SATURATION_BIN)
TEST_CASE("saturation CLI: --ablate prints accuracy and margin per head of any checkpoint", "[saturation]") {
  const fs::path dir = tapegrad::test::scratch_dir("test_saturation", "ablate");
  const tasks::SequenceTask task = tasks::SequenceTask::make("sort");
  TransformerConfig c;
  c.vocab = task.vocab_size();
  c.context = task.context();
  c.d_model = 16;
  c.heads = 2;
  c.layers = 2;
  save_checkpoint((dir / "model.npz").string(), Transformer<float>(c));
  auto r = tapegrad::test::run_program(TAPEGRAD_SATURATION_BIN,
                                       "--ablate '" + (dir / "model.npz").string() + "' --eval-size 50", dir);
  REQUIRE(r.code == 0);
  CHECK(tapegrad::test::count_lines(r.out) == 1 + 1 + 2 * 2);  // header, intact, 4 heads
  CHECK(r.out.find("head,1,1,") != std::string::npos);
  auto bad = tapegrad::test::run_program(TAPEGRAD_SATURATION_BIN,
                                         "--ablate '" + (dir / "model.npz").string() + "' --task recall", dir);
  CHECK(bad.code == 2);
  CHECK(bad.err.find("not a model of --task recall") != std::string::npos);
}
#endif

#endif  // TAPEGRAD_WITH_SATURATION
