#include "examples/saturation/report_plots.hpp"

#include <cmath>
#include <filesystem>
#include <map>

#include "apps/common/svg_plot.hpp"

namespace tapegrad::saturation {
namespace {

using plot::LinePlot;
using plot::PlotOptions;
using plot::Scale;
using plot::Series;

const char* kScaledColors[] = {"#6baed6", "#2171b5", "#08306b"};
const char* kUnscaledColors[] = {"#fb6a4a", "#cb181d", "#67000d"};
const char* color_for(bool scaled, std::size_t i) {
  return scaled ? kScaledColors[i % 3] : kUnscaledColors[i % 3];
}
std::string scaling_text(bool scaled) { return scaled ? "scaled" : "unscaled"; }

void save(const LinePlot& p, const std::string& dir, const std::string& name,
          std::vector<std::string>& written) {
  p.write((std::filesystem::path(dir) / name).string());
  written.push_back(name);
}

// ---- the sweep's plots --------------------------------------------------------------------

// One series per (Tk, scaling) of `field` against d_k, on a log d_k axis.
template <class F>
LinePlot field_plot(const std::vector<SweepPoint>& pts, const std::string& title,
                    const std::string& y_label, Scale y, F field) {
  LinePlot plot({title, "d_k (log scale)", y_label, Scale::Log, y});
  std::vector<std::size_t> tks = tks_of(pts);
  for (bool scaled : {true, false}) {
    for (std::size_t i = 0; i < tks.size(); ++i) {
      Series s;
      s.label = scaling_text(scaled) + ", Tk " + std::to_string(tks[i]);
      for (const SweepPoint& p : pts) {
        if (p.tk != tks[i] || p.scaled != scaled) continue;
        s.x.push_back(double(p.d_k));
        s.y.push_back(field(p));
      }
      s.color = color_for(scaled, i);
      s.dashed = !scaled;
      s.markers = true;
      plot.add(std::move(s));
    }
  }
  return plot;
}

// What the score spread should be: sqrt(d_k) unscaled, 1 scaled.
void add_spread_theory(LinePlot& p, const std::vector<std::size_t>& dks) {
  Series t1{"theory unscaled: sqrt(d_k)", {}, {}, "#444444", true, false};
  Series t2{"theory scaled: 1", {}, {}, "#999999", true, false};
  for (std::size_t d : dks) {
    t1.x.push_back(double(d));
    t1.y.push_back(std::sqrt(double(d)));
    t2.x.push_back(double(d));
    t2.y.push_back(1.0);
  }
  p.add(t1).add(t2);
}

// Unscaled / scaled median gradient at the scores, one series per Tk.
LinePlot gradient_ratio_plot(const std::vector<SweepPoint>& pts) {
  LinePlot p({"Unscaled / scaled median gradient at the scores", "d_k (log scale)",
              "ratio (log scale)", Scale::Log, Scale::Log});
  std::vector<std::size_t> tks = tks_of(pts);
  for (std::size_t i = 0; i < tks.size(); ++i) {
    Series s;
    s.label = "Tk " + std::to_string(tks[i]);
    for (std::size_t d : dks_of(pts)) {
      double r = grad_ratio(pts, tks[i], d);
      if (std::isfinite(r)) {
        s.x.push_back(double(d));
        s.y.push_back(r);
      }
    }
    s.color = kUnscaledColors[i % 3];
    s.markers = true;
    p.add(std::move(s));
  }
  p.add_hline(0.1, "1/10").add_hline(0.01, "1/100", "#bbbbbb");
  return p;
}

// ---- the training plots -------------------------------------------------------------------

std::string init_slug(AttentionInit i) { return to_string(i); }

// `label`'s line through (step, value(point)) of `points`.
template <class P, class F>
Series over_steps(const std::string& label, bool scaled, std::size_t k, bool markers,
                  const std::vector<P>& points, F value) {
  Series s{label, {}, {}, color_for(scaled, k), !scaled, markers};
  for (const P& p : points) {
    s.x.push_back(double(p.step));
    s.y.push_back(value(p));
  }
  return s;
}

// Training loss and held-out accuracy of one (d_head, init), one line per seed.
void seed_plots(const std::string& dir, const std::vector<RunResult>& runs,
                const TrainingOptions& o, std::size_t dh, AttentionInit init,
                std::vector<std::string>& written) {
  const std::string tag = "d_head " + std::to_string(dh) + ", " + to_string(init) + " init";
  LinePlot loss({"Training loss, " + tag + " (one line per seed)", "step",
                 "cross-entropy (log scale, mean of " + std::to_string(o.curve_every) + " steps)",
                 Scale::Linear, Scale::Log});
  LinePlot acc({"Held-out accuracy, " + tag, "step", "exact accuracy"});
  for (bool scaled : {true, false}) {
    std::size_t k = 0;
    for (const RunResult& r : runs) {
      if (!in_arm(r.spec, dh, init, scaled)) continue;
      const std::string label = scaling_text(scaled) + ", seed " + std::to_string(r.spec.seed);
      loss.add(over_steps(label, scaled, k, false, r.curve, [](const CurvePoint& c) { return c.loss; }));
      acc.add(over_steps(label, scaled, k, true, r.evals, [](const EvalPoint& e) { return e.accuracy; }));
      ++k;
    }
  }
  acc.add_hline(0.9, "0.9");
  const std::string slug = "d" + std::to_string(dh) + "_" + init_slug(init);
  save(loss, dir, "train_loss_" + slug + ".svg", written);
  save(acc, dir, "train_accuracy_" + slug + ".svg", written);
}

// What is followed over training and drawn as the mean over seeds.
enum class Trace { grad_wq, grad_wk, answer_entropy };

PlotOptions trace_options(Trace t, AttentionInit init) {
  PlotOptions po;
  po.x_label = "step";
  if (t == Trace::answer_entropy) {
    po.title = "Attention entropy of the answer rows, " + to_string(init) + " init (mean over seeds)";
    po.y_label = "entropy (nats)";
    return po;
  }
  const char* matrix = t == Trace::grad_wq ? "Wq" : "Wk";
  po.title = std::string("Gradient norm of ") + matrix + ", " + to_string(init) + " init (mean over seeds)";
  po.y_label = std::string("||dL/d") + matrix + "|| (log scale)";
  po.y_scale = Scale::Log;
  return po;
}

// Per step, the sum of `t` over the arm's seeds and how many seeds it adds.
std::map<std::size_t, std::pair<double, int>> trace_sums(const std::vector<RunResult>& runs,
                                                         std::size_t dh, AttentionInit init,
                                                         bool scaled, Trace t) {
  std::map<std::size_t, std::pair<double, int>> sums;
  auto add = [&](std::size_t step, double v) {
    auto& a = sums[step];
    a.first += v;
    a.second += 1;
  };
  for (const RunResult& r : runs) {
    if (!in_arm(r.spec, dh, init, scaled)) continue;
    if (t == Trace::answer_entropy)
      for (const EvalPoint& e : r.evals) add(e.step, e.entropy_answer);
    else
      for (const CurvePoint& c : r.curve) add(c.step, t == Trace::grad_wq ? c.grad_wq : c.grad_wk);
  }
  return sums;
}

// `t` over training under `init`: the mean over seeds per (d_head, scaling).
void trace_plot(const std::string& dir, const std::vector<RunResult>& runs,
                const TrainingOptions& o, AttentionInit init, Trace t,
                std::vector<std::string>& written) {
  LinePlot p(trace_options(t, init));
  for (bool scaled : {true, false}) {
    for (std::size_t i = 0; i < o.d_heads.size(); ++i) {
      Series s;
      s.label = scaling_text(scaled) + ", d_head " + std::to_string(o.d_heads[i]);
      for (const auto& [step, a] : trace_sums(runs, o.d_heads[i], init, scaled, t)) {
        s.x.push_back(double(step));
        s.y.push_back(a.first / a.second);
      }
      s.color = color_for(scaled, i);
      s.dashed = !scaled;
      p.add(std::move(s));
    }
  }
  const char* prefix = t == Trace::grad_wq   ? "train_grad_wq_"
                       : t == Trace::grad_wk ? "train_grad_wk_"
                                             : "train_entropy_";
  save(p, dir, prefix + init_slug(init) + ".svg", written);
}

}  // namespace

void sweep_plots(const std::string& dir, const std::vector<SweepPoint>& pts,
                 std::vector<std::string>& written) {
  LinePlot spread = field_plot(pts, "Score standard deviation against d_k, with theory",
                               "std of Q K^T * scale (log scale)", Scale::Log,
                               [](const SweepPoint& q) { return q.score_std; });
  add_spread_theory(spread, dks_of(pts));
  save(spread, dir, "sweep_score_std.svg", written);

  LinePlot max_weight = field_plot(pts, "Mean largest attention weight per row",
                                   "mean of each row's max weight", Scale::Linear,
                                   [](const SweepPoint& q) { return q.mean_max_weight; });
  max_weight.add_hline(0.9, "0.9");
  save(max_weight, dir, "sweep_max_weight.svg", written);

  LinePlot entropy = field_plot(pts, "Mean row entropy (dashed grey: log Tk, a uniform row)",
                                "entropy of the weights (nats)", Scale::Linear,
                                [](const SweepPoint& q) { return q.mean_entropy; });
  for (std::size_t tk : tks_of(pts)) entropy.add_hline(std::log(double(tk)), "log " + std::to_string(tk), "#777777");
  save(entropy, dir, "sweep_entropy.svg", written);

  save(field_plot(pts, "Fraction of rows whose largest weight exceeds 0.99", "fraction of rows",
                  Scale::Linear, [](const SweepPoint& q) { return q.frac_saturated; }),
       dir, "sweep_saturated_rows.svg", written);
  save(field_plot(pts, "Gradient reaching the scores through the softmax",
                  "median over rows of ||dL/dscores|| (log)", Scale::Log,
                  [](const SweepPoint& q) { return q.median_grad_scores; }),
       dir, "sweep_grad_scores.svg", written);
  save(field_plot(pts, "Gradient reaching the queries", "median over rows of ||dL/dQ|| (log)",
                  Scale::Log, [](const SweepPoint& q) { return q.median_grad_q; }),
       dir, "sweep_grad_q.svg", written);
  save(gradient_ratio_plot(pts), dir, "sweep_grad_ratio.svg", written);
}

void training_plots(const std::string& dir, const std::vector<RunResult>& runs,
                    const TrainingOptions& o, std::vector<std::string>& written) {
  for (std::size_t dh : o.d_heads)
    for (AttentionInit init : o.inits) seed_plots(dir, runs, o, dh, init, written);
  for (AttentionInit init : o.inits)
    for (Trace t : {Trace::grad_wq, Trace::grad_wk, Trace::answer_entropy})
      trace_plot(dir, runs, o, init, t, written);
}

}  // namespace tapegrad::saturation
