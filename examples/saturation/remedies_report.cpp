#include "examples/saturation/remedies_report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "examples/common/svg_plot.hpp"
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
  for (const RunSpec& spec : remedy_specs(o)) {
    auto it = std::find_if(f.arms.begin(), f.arms.end(),
                           [&](const RemedyArm& a) { return same_arm(a.spec, spec); });
    if (it == f.arms.end()) {
      f.arms.push_back({spec, arm_label(spec), {}, {}, {}, 0, 0, 0, 0, 0});
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

std::string remedy_markdown(const RemedyFindings& f, const std::vector<Check>& checks) {
  if (f.arms.empty()) return "";
  std::string md = "## 3. Remedies at d_head " + std::to_string(f.d_head) + "\n\n";
  md += "The training set-up of part 2 (the same task, sizes, optimiser, steps and data stream per "
        "seed; variance-preserving initialisation, under which the unscaled model saturates from "
        "the first step), with six arms. QK-norm is an RMSNorm over each head's q and k with a "
        "learned gain shared by the heads. Its gain for an initial spread of 1 is d_head^(-1/4) = " +
        g(f.unit_spread_gain) + ": RMSNorm makes |q| = |k| = sqrt(d_head), so for independent "
        "directions q.k has std sqrt(d_head); the gain multiplies both q and k, so the unscaled "
        "scores have std gain^2 sqrt(d_head). The learned temperature is one scalar per head "
        "multiplying q.k, initialised to 1/sqrt(d_head), so that arm starts as the scaled model "
        "and may learn its own scale.\n\n";
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
  md += "\nExpectations, stated before running, and their verdicts:\n\n| expectation | measured | verdict |\n|---|---|---|\n";
  for (const Check& c : checks) md += "| " + c.claim + " | " + c.measured + " | " + verdict_text(c.verdict) + " |\n";
  md += "\n![accuracy per arm](remedies_accuracy.svg)\n\n![score spread per arm](remedies_spread.svg)\n\n";
  return md;
}

void remedy_plots(const std::string& dir, const RemedyFindings& f, std::vector<std::string>& written) {
  if (f.arms.empty()) return;
  const char* colors[] = {"#2171b5", "#cb181d", "#ff7f00", "#33a02c", "#6a3d9a", "#b15928"};
  plot::LinePlot acc({"Held-out exact accuracy, d_head " + std::to_string(f.d_head) + " (mean over seeds)",
                      "step", "exact accuracy", plot::Scale::Linear, plot::Scale::Linear});
  plot::LinePlot spread({"Score spread over training (mean over seeds)", "step",
                         "std of a row's scores", plot::Scale::Linear, plot::Scale::Log});
  for (std::size_t i = 0; i < f.arms.size(); ++i) {
    const RemedyArm& a = f.arms[i];
    plot::Series sa{a.label, {}, {}, colors[i % 6], false, true}, ss = sa;
    const std::size_t n = a.runs.front()->evals.size();
    for (std::size_t k = 0; k < n; ++k) {
      double x = 0, y = 0, m = 0;
      for (const RunResult* r : a.runs)
        if (k < r->evals.size()) {
          x += r->evals[k].accuracy;
          y += r->evals[k].probe.score_spread;
          ++m;
        }
      sa.x.push_back(double(a.runs.front()->evals[k].step));
      sa.y.push_back(x / m);
      ss.x.push_back(sa.x.back());
      ss.y.push_back(y / m);
    }
    acc.add(sa);
    spread.add(ss);
  }
  acc.add_hline(0.9, "0.9");
  spread.add_hline(1.0, "spread 1");
  acc.write((std::filesystem::path(dir) / "remedies_accuracy.svg").string());
  spread.write((std::filesystem::path(dir) / "remedies_spread.svg").string());
  written.push_back("remedies_accuracy.svg");
  written.push_back("remedies_spread.svg");
}

}  // namespace tapegrad::saturation
