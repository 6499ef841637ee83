#include "examples/saturation/remedies_report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "apps/common/svg_plot.hpp"
#include "examples/saturation/report_format.hpp"

namespace tapegrad::saturation {

bool RemedyArm::every_seed_reaches_90() const {
  return std::all_of(steps_to_90.begin(), steps_to_90.end(), [](auto s) { return s.has_value(); });
}
bool RemedyArm::no_seed_reaches_90() const {
  return std::none_of(steps_to_90.begin(), steps_to_90.end(), [](auto s) { return s.has_value(); });
}

const RemedyArm* RemedyFindings::arm(bool scaled, Remedy remedy) const {
  for (const RemedyArm& a : arms)
    if (a.spec.scaled == scaled && a.spec.remedy == remedy) return &a;
  return nullptr;
}

namespace {

bool same_arm(const RunSpec& a, const RunSpec& b) {
  return a.d_head == b.d_head && a.scaled == b.scaled && a.init == b.init && a.remedy == b.remedy &&
         a.task == b.task;
}

void summarise(RemedyArm& a) {
  double n = 0, evals = 0;
  for (const RunResult* r : a.runs) {
    a.steps_to_90.push_back(r->step_to_90);
    a.final_accuracy.push_back(r->final_eval().accuracy);
    a.initial_spread += r->evals.front().probe.score_spread;
    a.final_spread += r->final_eval().probe.score_spread;
    a.initial_grad += r->evals.front().probe.median_grad_scores;
    a.initial_grad_logits += r->evals.front().probe.median_grad_logits;
    a.initial_entropy += r->evals.front().entropy_answer;
    a.final_entropy += r->final_eval().entropy_answer;
    for (const EvalPoint& e : r->evals) {
      a.mean_max_weight += e.probe.mean_max_weight;
      a.mean_grad += e.probe.median_grad_scores;
      ++evals;
    }
    ++n;
  }
  if (n == 0) return;
  a.initial_spread /= n;
  a.final_spread /= n;
  a.initial_grad /= n;
  a.initial_grad_logits /= n;
  a.initial_entropy /= n;
  a.final_entropy /= n;
  a.mean_max_weight /= evals;
  a.mean_grad /= evals;
}

}  // namespace

RemedyFindings remedy_findings(const std::vector<RunResult>& runs, const TrainingOptions& o,
                               bool quick) {
  RemedyFindings f;
  f.d_head = o.remedy_d_head;
  f.unit_spread_gain = unit_spread_qk_gain(o.remedy_d_head);
  f.quick = quick;
  const tasks::SequenceTask task = tasks::SequenceTask::make(o.task);
  f.uniform_answer_entropy = causal_uniform_entropy(task.context(), task.first_answer_position());
  for (const RunSpec& spec : remedy_specs(o)) {
    auto it = std::find_if(f.arms.begin(), f.arms.end(),
                           [&](const RemedyArm& a) { return same_arm(a.spec, spec); });
    if (it == f.arms.end()) {
      RemedyArm arm;
      arm.spec = spec;
      arm.label = arm_label(spec);
      f.arms.push_back(arm);
      it = f.arms.end() - 1;
    }
    for (const RunResult& r : runs)
      if (r.spec == spec) it->runs.push_back(&r);
  }
  f.arms.erase(std::remove_if(f.arms.begin(), f.arms.end(), [](const RemedyArm& a) { return a.runs.empty(); }),
               f.arms.end());
  for (RemedyArm& a : f.arms) summarise(a);
  return f;
}

namespace {

std::string per_seed_steps(const RemedyArm& a) {
  std::string s;
  for (std::size_t i = 0; i < a.runs.size(); ++i)
    s += (s.empty() ? "" : ", ") + std::string("seed ") + std::to_string(a.runs[i]->spec.seed) +
         ": " + steps_text(a.steps_to_90[i]);
  return s;
}

// The two expectations stated for one arm: where its initial score spread lies, and whether
// its seeds reach 0.9 (every seed, or none).
void arm_checks(const RemedyFindings& f, bool scaled, Remedy remedy, double lo, double hi,
                bool learns, const std::string& why, std::vector<Check>& out) {
  const RemedyArm* a = f.arm(scaled, remedy);
  const std::string name = a ? a->label : arm_label({f.d_head, scaled, AttentionInit::variance_preserving, 0, "", remedy});
  Check spread;
  spread.claim = "d_head " + std::to_string(f.d_head) + ", " + name + ": initial score spread between " +
                 g(lo) + " and " + g(hi) + " (" + why + ")";
  if (a) {
    spread.measured = "mean over seeds " + g(a->initial_spread, 4);
    spread.verdict = decide(true, a->initial_spread >= lo && a->initial_spread <= hi);
  }
  out.push_back(spread);
  Check steps;
  steps.claim = "d_head " + std::to_string(f.d_head) + ", " + name + ": " +
                (learns ? "every seed reaches 0.9 accuracy" : "no seed reaches 0.9 accuracy");
  if (a) {
    steps.measured = "step to 0.9: " + per_seed_steps(*a);
    steps.verdict = decide(!f.quick, learns ? a->every_seed_reaches_90() : a->no_seed_reaches_90());
    if (f.quick) steps.measured += " (a quick run is too short to decide)";
  }
  out.push_back(steps);
}

}  // namespace

std::vector<Check> remedy_checks(const RemedyFindings& f) {
  std::vector<Check> out;
  if (f.arms.empty()) return out;
  const double s = std::sqrt(double(f.d_head));
  const std::string root = "sqrt(" + std::to_string(f.d_head) + ") = " + g(s);
  arm_checks(f, true, Remedy::none, 0.7, 1.4, true, "q.k / sqrt(d_head) of unit-variance q, k", out);
  arm_checks(f, false, Remedy::none, s / 1.4, s * 1.4, false, "q.k has std " + root, out);
  arm_checks(f, false, Remedy::qk_norm, s / 1.4, s * 1.4, false,
             "RMSNorm gives q and k the norm sqrt(d_head), so q.k has std " + root +
                 "; the gains must fall 4x by learning first", out);
  arm_checks(f, false, Remedy::qk_norm_unit_spread, 0.7, 1.4, true,
             "gain^2 sqrt(d_head) = 1 at gain d_head^(-1/4) = " + g(f.unit_spread_gain), out);
  arm_checks(f, true, Remedy::qk_norm, 0.7, 1.4, true, "unit-RMS heads, then the scale", out);
  arm_checks(f, false, Remedy::temperature, 0.7, 1.4, true,
             "the temperature starts at 1/sqrt(d_head): the scaled model's scores", out);
  // The temperature arm starts as the scaled model exactly (the same draws, the same scores).
  const RemedyArm *sc = f.arm(true, Remedy::none), *t = f.arm(false, Remedy::temperature),
                  *u = f.arm(false, Remedy::none), *q1 = f.arm(false, Remedy::qk_norm);
  Check same;
  same.claim = "unscaled + learned temperature starts with the scaled model's score spread (within 0.1%)";
  if (sc && t) {
    same.measured = g(t->initial_spread, 6) + " vs " + g(sc->initial_spread, 6);
    same.verdict = decide(true, std::abs(t->initial_spread / sc->initial_spread - 1) < 1e-3);
  }
  out.push_back(same);
  Check grad;
  grad.claim = "at initialisation the median gradient at the scores of unscaled and of unscaled + "
               "QK-norm (gain 1) is below 1/10 of the scaled one";
  if (sc && u && q1) {
    grad.measured = "scaled " + g(sc->initial_grad) + ", unscaled " + g(u->initial_grad) +
                    ", unscaled + QK-norm (gain 1) " + g(q1->initial_grad);
    grad.verdict = decide(true, u->initial_grad < 0.1 * sc->initial_grad &&
                                    q1->initial_grad < 0.1 * sc->initial_grad);
  }
  out.push_back(grad);
  return out;
}

namespace {

// The unscaled arms with one part of Gemma 2 or BLOOM that leaves the scores' size alone
// (all but the binding cap), those present.
std::vector<const RemedyArm*> unbinding_arms(const RemedyFindings& f) {
  std::vector<const RemedyArm*> out;
  for (Remedy r : {Remedy::softcap, Remedy::post_norms, Remedy::alibi})
    if (const RemedyArm* a = f.arm(false, r)) out.push_back(a);
  return out;
}

// "unscaled + soft-cap 50 0.31, unscaled + ALiBi 0.29": one figure of each arm.
std::string arm_values(const std::vector<const RemedyArm*>& arms, double RemedyArm::*field) {
  std::string s;
  for (const RemedyArm* a : arms) s += (s.empty() ? "" : ", ") + a->label + " " + g(a->*field);
  return s;
}

bool all_within(const std::vector<const RemedyArm*>& arms, double RemedyArm::*field, double lo,
                double hi) {
  return std::all_of(arms.begin(), arms.end(),
                     [&](const RemedyArm* a) { return a->*field >= lo && a->*field <= hi; });
}

Check measured_check(std::string claim, std::string measured, bool decidable, bool ok) {
  Check c;
  c.claim = std::move(claim);
  if (decidable) {
    c.measured = std::move(measured);
    c.verdict = decide(true, ok);
  }
  return c;
}

}  // namespace

std::vector<Check> architecture_checks(const RemedyFindings& f) {
  std::vector<Check> out;
  if (f.arms.empty()) return out;
  const double s = std::sqrt(double(f.d_head));
  arm_checks(f, false, Remedy::softcap, s / 1.4, s * 1.4, false,
             "50 tanh(x / 50) takes a score of 16 to 15.5: the cap hardly binds", out);
  arm_checks(f, false, Remedy::softcap_binding, 3, 5, true,
             "5 tanh(x / 5) holds scores of std 16 mostly near -5 and +5, and no spread can exceed "
             "the cap", out);
  arm_checks(f, false, Remedy::post_norms, s / 1.4, s * 1.4, false,
             "the sandwich norms act on the sub-layers' outputs, after the scores are formed", out);
  arm_checks(f, false, Remedy::alibi, s / 1.4, s * 1.4, false,
             "one head's ALiBi slope is 1/256: a bias of at most 1/16 over the 17 positions beside "
             "scores of std 16", out);
  const RemedyArm *sc = f.arm(true, Remedy::none), *u = f.arm(false, Remedy::none),
                  *b = f.arm(false, Remedy::softcap_binding);
  const std::vector<const RemedyArm*> same = unbinding_arms(f);
  const std::string names = "unscaled + soft-cap " + g(kGemmaSoftcap) + ", + sandwich norms and + ALiBi";
  const bool have = u && sc && same.size() == 3;
  out.push_back(measured_check(
      "at initialisation the answer-row attention entropy of " + names +
          " is within a factor 1.5 of the unscaled arm's (none of them flattens a row of scores of std 16)",
      have ? "unscaled " + g(u->initial_entropy) + "; " + arm_values(same, &RemedyArm::initial_entropy) : "",
      have, have && all_within(same, &RemedyArm::initial_entropy, u->initial_entropy / 1.5, u->initial_entropy * 1.5)));
  out.push_back(measured_check(
      "at initialisation the median gradient at the scores of " + names + " is below 1/10 of the scaled one",
      have ? "scaled " + g(sc->initial_grad) + "; " + arm_values(same, &RemedyArm::initial_grad) : "",
      have, have && all_within(same, &RemedyArm::initial_grad, 0, 0.1 * sc->initial_grad)));
  const std::string cap = "unscaled + soft-cap " + g(kBindingSoftcap);
  const bool have_b = u && sc && b;
  out.push_back(measured_check(
      cap + ": answer-row attention entropy at initialisation at least 3x the unscaled arm's (the cap "
            "ties the top of each row near +5)",
      have_b ? g(b->initial_entropy) + " vs unscaled " + g(u->initial_entropy) : "", have_b,
      have_b && b->initial_entropy >= 3 * u->initial_entropy));
  out.push_back(measured_check(
      cap + ": at initialisation the median gradient at the softmax's input is above 1/10 of the scaled one",
      have_b ? g(b->initial_grad) + " vs scaled " + g(sc->initial_grad) : "", have_b,
      have_b && b->initial_grad > 0.1 * sc->initial_grad));
  out.push_back(measured_check(
      cap + ": at initialisation the median gradient before the cap (at q.k) is below 1/10 of the scaled "
            "one (tanh's flat ends take over the softmax's vanishing)",
      have_b ? g(b->initial_grad_logits) + " vs scaled " + g(sc->initial_grad) : "", have_b,
      have_b && b->initial_grad_logits < 0.1 * sc->initial_grad));
  return out;
}

namespace {

std::string checks_table(const std::vector<Check>& checks) {
  std::string md = "| expectation | measured | verdict |\n|---|---|---|\n";
  for (const Check& c : checks) md += "| " + c.claim + " | " + c.measured + " | " + verdict_text(c.verdict) + " |\n";
  return md;
}

// The arms of the architecture section: the two references, then Gemma 2's and BLOOM's parts.
std::vector<const RemedyArm*> architecture_arms(const RemedyFindings& f) {
  std::vector<const RemedyArm*> out;
  for (auto [scaled, r] : {std::pair{true, Remedy::none}, {false, Remedy::none}, {false, Remedy::softcap},
                           {false, Remedy::softcap_binding}, {false, Remedy::post_norms}, {false, Remedy::alibi}})
    if (const RemedyArm* a = f.arm(scaled, r)) out.push_back(a);
  return out;
}

std::size_t seeds_reaching_90(const RemedyArm& a) {
  return std::size_t(std::count_if(a.steps_to_90.begin(), a.steps_to_90.end(),
                                   [](const auto& step) { return step.has_value(); }));
}

// What each part did, from the numbers: whether it reached 0.9, whether it held the scores
// below half the unscaled model's final spread, and whether the gradient at the scores stayed
// alive (its mean over training above 1/10 of the scaled model's).
std::string architecture_findings(const RemedyFindings& f) {
  const RemedyArm *sc = f.arm(true, Remedy::none), *u = f.arm(false, Remedy::none);
  if (!sc || !u || f.quick) return "";
  std::string md = "### Finding 5: what they do without the scale\n\n";
  md += "Unscaled, the score spread grows from " + g(u->initial_spread) + " to " +
        g(u->final_spread) + ", the answer rows' entropy falls from " + g(u->initial_entropy) +
        " to " + g(u->final_entropy) + " nats, and the gradient at the scores averages " +
        g(u->mean_grad) + " over training against the scaled model's " + g(sc->mean_grad) + ".\n\n";
  for (const Remedy r : {Remedy::softcap, Remedy::softcap_binding, Remedy::post_norms, Remedy::alibi}) {
    const RemedyArm* a = f.arm(false, r);
    if (!a) continue;
    const bool bounded = a->final_spread < 0.5 * u->final_spread;
    const bool alive = a->mean_grad > 0.1 * sc->mean_grad;
    md += "- **" + a->label + "**: " + std::to_string(seeds_reaching_90(*a)) + " of " +
          std::to_string(a->runs.size()) + " seeds reach 0.9; spread " + g(a->initial_spread) +
          " -> " + g(a->final_spread) + (bounded ? ", held" : ", not held") +
          " below half the unscaled model's final spread; entropy " + g(a->initial_entropy) +
          " -> " + g(a->final_entropy) + " nats; gradient at the scores over training " +
          g(a->mean_grad) + (alive ? ", alive (above" : ", vanished (below") +
          " 1/10 of the scaled model's).\n";
  }
  return md + "\n";
}

std::string architecture_markdown(const RemedyFindings& f, const std::vector<Check>& checks) {
  std::string md = "### Soft-caps, sandwich norms and ALiBi in place of 1/sqrt(d_k)\n\n";
  md += "Gemma 2 and BLOOM each carry parts that bound or reshape attention: an attention soft-cap "
        "c tanh(x / c) on the scaled scores (Gemma 2: c = " + g(kGemmaSoftcap) + "), a norm on each "
        "sub-layer's output before the residual add (Gemma 2's sandwich, `post_norms`), and ALiBi's "
        "bias -slope (i - j) in place of learned positions (BLOOM). Each arm below is the unscaled "
        "model with one of them; the soft-cap also at " + g(kBindingSoftcap) + ", a cap below the "
        "unscaled spread. The entropy is the mean over the held-out answer rows of the softmax row's "
        "entropy (uniform: " + g(f.uniform_answer_entropy) + " nats); the gradient before the cap is the "
        "probe's gradient at the scores times tanh's slope 1 - (s / c)^2, i.e. at scale x q.k.\n\n";
  md += "| arm | answer-row entropy, init -> end | median grad at the scores, init | the same before the cap | "
        "same at the scores, mean over training | step to 0.9 per seed |\n|---|---|---|---|---|---|\n";
  for (const RemedyArm* a : architecture_arms(f)) {
    std::string steps;
    for (std::size_t i = 0; i < a->runs.size(); ++i) steps += (i ? ", " : "") + steps_text(a->steps_to_90[i]);
    md += "| " + a->label + " | " + g(a->initial_entropy) + " -> " + g(a->final_entropy) + " | " +
          g(a->initial_grad) + " | " + g(a->initial_grad_logits) + " | " + g(a->mean_grad) + " | " + steps + " |\n";
  }
  md += "\n" + architecture_findings(f);
  md += "Expectations, stated before running, and their verdicts:\n\n" + checks_table(checks);
  md += "\n![answer-row attention entropy per arm](remedies_entropy.svg)\n\n"
        "![median gradient at the scores per arm](remedies_grad.svg)\n\n";
  return md;
}

}  // namespace

std::string remedy_markdown(const RemedyFindings& f, const std::vector<Check>& remedies,
                            const std::vector<Check>& architectures) {
  if (f.arms.empty()) return "";
  std::string md = "## 3. Remedies at d_head " + std::to_string(f.d_head) + "\n\n";
  md += "The training set-up of part 2 (the same task, sizes, optimiser, steps and data stream per "
        "seed; variance-preserving initialisation, under which the unscaled model saturates from "
        "the first step), with " + std::to_string(f.arms.size()) + " arms. QK-norm is an RMSNorm over each head's q and k with a "
        "learned gain shared by the heads. Its gain for an initial spread of 1 is d_head^(-1/4) = " +
        g(f.unit_spread_gain) + ": RMSNorm makes |q| = |k| = sqrt(d_head), so for independent "
        "directions q.k has std sqrt(d_head); the gain multiplies both q and k, so the unscaled "
        "scores have std gain^2 sqrt(d_head). The learned temperature is one scalar per head "
        "multiplying q.k, initialised to 1/sqrt(d_head), so that arm starts as the scaled model "
        "and may learn its own scale. The soft-cap, sandwich-norm and ALiBi arms are described "
        "below.\n\n";
  md += "The score spread is the mean over the answer rows of the std of the row's visible "
        "scores (what the softmax sees); the largest weight is the row's maximum; the gradient "
        "is the median over those rows of ||d loss / d scores||, all from one held-out batch at "
        "every evaluation, over every layer.\n\n";
  md += "| arm | step to 0.9 per seed | final accuracy per seed | spread at init | spread at end | "
        "mean largest weight | median grad at scores, init | same, mean over training |\n"
        "|---|---|---|---|---|---|---|---|\n";
  for (const RemedyArm& a : f.arms) {
    std::string steps, acc;
    for (std::size_t i = 0; i < a.runs.size(); ++i) {
      steps += (i ? ", " : "") + steps_text(a.steps_to_90[i]);
      acc += (i ? ", " : "") + g(a.final_accuracy[i]);
    }
    md += "| " + a.label + " | " + steps + " | " + acc + " | " + g(a.initial_spread) + " | " +
          g(a.final_spread) + " | " + g(a.mean_max_weight) + " | " + g(a.initial_grad) + " | " +
          g(a.mean_grad) + " |\n";
  }
  md += "\nExpectations, stated before running, and their verdicts:\n\n" + checks_table(remedies);
  md += "\n![accuracy per arm](remedies_accuracy.svg)\n\n![score spread per arm](remedies_spread.svg)\n\n";
  if (!architectures.empty()) md += architecture_markdown(f, architectures);
  return md;
}

namespace {

using Metric = double (*)(const EvalPoint&);

// One arm's metric at every evaluation, the mean over its seeds.
plot::Series mean_series(const RemedyArm& a, Metric metric, std::string label, std::string color,
                         bool dashed) {
  plot::Series out{std::move(label), {}, {}, std::move(color), dashed, true};
  const std::size_t n = a.runs.front()->evals.size();
  for (std::size_t k = 0; k < n; ++k) {
    double y = 0, m = 0;
    for (const RunResult* r : a.runs)
      if (k < r->evals.size()) {
        y += metric(r->evals[k]);
        ++m;
      }
    out.x.push_back(double(a.runs.front()->evals[k].step));
    out.y.push_back(y / m);
  }
  return out;
}

const char* arm_color(std::size_t i) {
  static const char* colors[] = {"#2171b5", "#cb181d", "#ff7f00", "#33a02c", "#6a3d9a",
                                 "#b15928", "#e7298a", "#666666", "#1b9e77", "#a6761d"};
  return colors[i % 10];
}

// Each arm's colour is its place in f.arms, the same in every plot.
std::size_t arm_index(const RemedyFindings& f, const RemedyArm* a) { return std::size_t(a - f.arms.data()); }

void add_arms(plot::LinePlot& p, const RemedyFindings& f, const std::vector<const RemedyArm*>& arms,
              Metric metric) {
  for (const RemedyArm* a : arms) p.add(mean_series(*a, metric, a->label, arm_color(arm_index(f, a)), false));
}

void write_plot(plot::LinePlot& p, const std::string& dir, const char* name, std::vector<std::string>& written) {
  p.write((std::filesystem::path(dir) / name).string());
  written.push_back(name);
}

}  // namespace

void remedy_plots(const std::string& dir, const RemedyFindings& f, std::vector<std::string>& written) {
  if (f.arms.empty()) return;
  std::vector<const RemedyArm*> all;
  for (const RemedyArm& a : f.arms) all.push_back(&a);
  plot::LinePlot acc({"Held-out exact accuracy, d_head " + std::to_string(f.d_head) + " (mean over seeds)",
                      "step", "exact accuracy", plot::Scale::Linear, plot::Scale::Linear});
  add_arms(acc, f, all, [](const EvalPoint& e) { return e.accuracy; });
  acc.add_hline(0.9, "0.9");
  write_plot(acc, dir, "remedies_accuracy.svg", written);
  plot::LinePlot spread({"Score spread over training (mean over seeds)", "step",
                         "std of a row's scores", plot::Scale::Linear, plot::Scale::Log});
  add_arms(spread, f, all, [](const EvalPoint& e) { return e.probe.score_spread; });
  spread.add_hline(1.0, "spread 1");
  write_plot(spread, dir, "remedies_spread.svg", written);

  const std::vector<const RemedyArm*> parts = architecture_arms(f);
  plot::LinePlot entropy({"Answer-row attention entropy, held out (mean over seeds)", "step",
                          "entropy (nats)", plot::Scale::Linear, plot::Scale::Linear});
  add_arms(entropy, f, parts, [](const EvalPoint& e) { return e.entropy_answer; });
  entropy.add_hline(f.uniform_answer_entropy, "uniform");
  write_plot(entropy, dir, "remedies_entropy.svg", written);
  plot::LinePlot grad({"Median gradient at the scores (mean over seeds); dashed: before the cap", "step",
                       "||d loss / d scores|| of a row", plot::Scale::Linear, plot::Scale::Log});
  add_arms(grad, f, parts, [](const EvalPoint& e) { return e.probe.median_grad_scores; });
  if (const RemedyArm* b = f.arm(false, Remedy::softcap_binding))
    grad.add(mean_series(*b, [](const EvalPoint& e) { return e.probe.median_grad_logits; },
                         b->label + ", before the cap", arm_color(arm_index(f, b)), true));
  write_plot(grad, dir, "remedies_grad.svg", written);
}

}  // namespace tapegrad::saturation
