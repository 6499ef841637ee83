#include "examples/saturation/report_tables.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>

#include "examples/saturation/lr_report.hpp"
#include "examples/saturation/position_report.hpp"
#include "examples/saturation/remedies_report.hpp"
#include "examples/saturation/report_format.hpp"
#include "tasks/tasks.hpp"

namespace tapegrad::saturation {
namespace {

// The title, the run's command and timing, and every expectation with its verdict.
std::string report_header(const ReportInputs& in) {
  std::string md;
  md += "# Why attention divides its scores by sqrt(d_k): the saturation study\n\n";
  md += "Written by `examples/saturation` (tapegrad). Every number below was measured by this "
        "run through tapegrad's own autograd; nothing is copied from elsewhere.\n\n";
  md += "- Command: `" + in.command + "`" + (in.quick ? " (**quick mode**: a reduced study for tests, not the full one)" : "") + "\n";
  char buf[4096];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "- Written: %Y-%m-%d %H:%M UTC\n", std::gmtime(&now));
  md += buf;
  std::snprintf(buf, sizeof buf,
                "- Wall time: %s in all (sweep %s, training %s, learning rates %s, ablation %s), "
                "%d thread%s%s; CPU time %s%s%s.\n",
                secs(in.total_seconds).c_str(), secs(in.sweep_seconds).c_str(),
                secs(in.training_seconds).c_str(), secs(in.lr_seconds).c_str(),
                secs(in.ablation_seconds).c_str(), in.threads, in.threads == 1 ? "" : "s",
                in.precision == "bf16" ? ", float32 matrix products in bf16 (--precision bf16)" : "",
                secs(in.cpu_seconds).c_str(), in.machine_load.empty() ? "" : "; ",
                in.machine_load.c_str());
  md += buf;
  md += "\n";
  const std::vector<Check> checks = all_checks(in);
  md += "## The expectations, checked\n\n";
  md += "Stated before measuring; the verdict is computed from this run's numbers. Parts 3 to 6 "
        "repeat their own rows next to their measurements.\n\n";
  md += "| expectation | measured | verdict |\n|---|---|---|\n";
  for (const Check& c : checks) md += "| " + c.claim + " | " + c.measured + " | " + verdict_text(c.verdict) + " |\n";
  if (checks.empty()) md += "| (nothing was run) | | |\n";
  md += "\n";
  return md;
}

struct SweepContext {
  const std::vector<SweepPoint>& pts;
  std::vector<std::size_t> tks, dks;
  std::size_t dmin, dmax;
  const ReportInputs& in;
};

SweepContext sweep_context(const ReportInputs& in) {
  const std::vector<std::size_t> tks = tks_of(in.points), dks = dks_of(in.points);
  return {in.points, tks, dks, dks.front(), dks.back(), in};
}

// Part 1's heading and set-up.
void sweep_intro(const SweepContext& c, std::string& md) {
  const auto& pts = c.pts;
  const ReportInputs& in = c.in;
  char buf[4096];
  md += "## 1. The sweep: random queries and keys through the softmax\n\n";
  std::snprintf(buf, sizeof buf,
                "Q, K, V and the upstream gradient G have independent normal(0, 1) entries; "
                "%zu query rows per (Tk, d_k), in groups of %zu queries that share %s keys; "
                "V has d_v = %zu; %s. The scores are `matmul_nt(Q, K) * scale` on the tape "
                "(`retain_grad`), then `softmax`, then `@ V`, and `out.backward(G)` gives "
                "d(loss)/d(scores) and d(loss)/dQ for loss = sum(G * out). The same draws serve "
                "both scales. As a cross-check, tapegrad's `scaled_dot_product_attention` ran on the "
                "same inputs: the largest difference from the composition was %s in the weights "
                "and %s (relative) in dQ over every point.\n\n",
                in.sweep.rows, in.sweep.queries_per_group, "their own Tk", in.sweep.d_v,
                in.sweep.use_double ? "float64" : "float32",
                g([&] { double m = 0; for (auto& p : pts) m = std::max(m, p.sdpa_weights_diff); return m; }(), 2).c_str(),
                g([&] { double m = 0; for (auto& p : pts) m = std::max(m, p.sdpa_grad_q_rel_diff); return m; }(), 2).c_str());
  md += buf;
}

// Finding 1: the score spread against d_k.
void spread_finding(const SweepContext& c, std::string& md) {
  const auto& pts = c.pts;
  const auto& tks = c.tks;
  const std::size_t dmin = c.dmin, dmax = c.dmax;
  md += "### Finding 1: without the scale, the score spread grows as sqrt(d_k)\n\n";
  md += "![score std](sweep_score_std.svg)\n\n";
  std::size_t tk0 = tks.front();
  const SweepPoint* a = point(pts, tk0, dmin, false);
  const SweepPoint* b = point(pts, tk0, dmax, false);
  double lo = 1e9, hi = -1e9;
  for (const SweepPoint& p : pts)
    if (p.scaled) {
      lo = std::min(lo, p.score_std);
      hi = std::max(hi, p.score_std);
    }
  if (a && b) {
    md += "Unscaled, the standard deviation of the scores is " + g(a->score_std, 4) + " at d_k " +
          std::to_string(dmin) + " (theory " + g(a->theory_std, 4) + ") and " + g(b->score_std, 4) +
          " at d_k " + std::to_string(dmax) + " (theory " + g(b->theory_std, 4) + ") for Tk " +
          std::to_string(tk0) + "; scaled, it stays between " + g(lo, 4) + " and " + g(hi, 4) +
          " at every d_k and Tk. A dot product of d_k unit-variance products has variance d_k, "
          "and dividing by sqrt(d_k) puts it back to 1.\n\n";
  }
}

// The score std per (scaling, Tk) against d_k, with sqrt(d_k).
void spread_table(const SweepContext& c, std::string& md) {
  const auto& pts = c.pts;
  const auto& tks = c.tks;
  const auto& dks = c.dks;
  md += "| d_k |";
  for (std::size_t d : dks) md += " " + std::to_string(d) + " |";
  md += "\n|---|";
  for (std::size_t i = 0; i < dks.size(); ++i) md += "---|";
  md += "\n| sqrt(d_k) |";
  for (std::size_t d : dks) md += " " + g(std::sqrt(double(d)), 4) + " |";
  md += "\n";
  for (std::size_t tk : tks) {
    for (bool scaled : {false, true}) {
      md += std::string("| ") + (scaled ? "scaled" : "unscaled") + ", Tk " + std::to_string(tk) + " |";
      for (std::size_t d : dks) {
        const SweepPoint* p = point(pts, tk, d, scaled);
        md += " " + (p ? g(p->score_std, 4) : "") + " |";
      }
      md += "\n";
    }
  }
  md += "\n";
}

// Finding 2: the largest weight, the entropy and the saturated rows, per Tk.
void saturation_finding(const SweepContext& c, std::string& md) {
  const auto& pts = c.pts;
  const auto& tks = c.tks;
  const std::size_t dmin = c.dmin, dmax = c.dmax;
  md += "### Finding 2: large scores saturate the softmax into near one-hot rows\n\n";
  md += "![max weight](sweep_max_weight.svg)\n\n![entropy](sweep_entropy.svg)\n\n"
        "![saturated rows](sweep_saturated_rows.svg)\n\n";
  for (std::size_t tk : tks) {
    const SweepPoint* a = point(pts, tk, dmin, false);
    const SweepPoint* b = point(pts, tk, dmax, false);
    const SweepPoint* sa = point(pts, tk, dmin, true);
    const SweepPoint* sb = point(pts, tk, dmax, true);
    if (!a || !b || !sa || !sb) continue;
    double w_lo = 1e9, w_hi = -1e9, h_lo = 1e9, h_hi = -1e9;
    for (const SweepPoint& p : pts) {
      if (p.tk != tk || !p.scaled) continue;
      w_lo = std::min(w_lo, p.mean_max_weight);
      w_hi = std::max(w_hi, p.mean_max_weight);
      h_lo = std::min(h_lo, p.mean_entropy);
      h_hi = std::max(h_hi, p.mean_entropy);
    }
    md += "- Tk " + std::to_string(tk) + ": unscaled, the mean largest weight rises from " +
          g(a->mean_max_weight) + " (d_k " + std::to_string(dmin) + ") to " + g(b->mean_max_weight) +
          " (d_k " + std::to_string(dmax) + "), the rows with a weight above 0.99 from " +
          pct(a->frac_saturated) + " to " + pct(b->frac_saturated) + ", and the mean entropy falls from " +
          g(a->mean_entropy) + " to " + g(b->mean_entropy) + " nats (a uniform row: log " +
          std::to_string(tk) + " = " + g(a->log_tk) + "). Scaled, at every d_k, the largest weight stays "
          "between " + g(w_lo) + " and " + g(w_hi) + " and the entropy between " + g(h_lo) + " and " +
          g(h_hi) + " nats.\n";
  }
}

// Why more keys saturate later.
void saturation_by_keys(const SweepContext& c, std::string& md) {
  const auto& pts = c.pts;
  const auto& tks = c.tks;
  const std::size_t dmax = c.dmax;
  md += "\nMore keys need a larger d_k to saturate:";
  for (std::size_t d : {std::size_t(256), dmax}) {
    bool first = true;
    for (std::size_t tk : tks) {
      const SweepPoint* p = point(pts, tk, d, false);
      if (!p) continue;
      md += std::string(first ? " at d_k " + std::to_string(d) + " the unscaled mean largest weight is " : ", ") +
            g(p->mean_max_weight) + " for Tk " + std::to_string(tk);
      first = false;
    }
    if (!first) md += ";";
  }
  md += " a fixed score spread has more competitors to beat when Tk is larger, so the winner's "
        "share is smaller until d_k grows further.\n\n";
}

// A table with a row per (Tk, d_k) swept both scaled and unscaled: Tk, d_k, then the cells
// that `cells(unscaled, scaled, tk, d_k)` joins with " | ".
template <class Cells>
void per_point_table(const SweepContext& c, const std::string& header, Cells cells, std::string& md) {
  md += header + "|";
  for (std::size_t i = 1; i < std::size_t(std::count(header.begin(), header.end(), '|')); ++i) md += "---|";
  md += "\n";
  for (std::size_t tk : c.tks)
    for (std::size_t d : c.dks) {
      const SweepPoint* u = point(c.pts, tk, d, false);
      const SweepPoint* s = point(c.pts, tk, d, true);
      if (!u || !s) continue;
      md += "| " + std::to_string(tk) + " | " + std::to_string(d) + " | " + cells(*u, *s, tk, d) + " |\n";
    }
  md += "\n";
}

// The largest weight, the entropy and the saturated rows per (Tk, d_k).
void saturation_table(const SweepContext& c, std::string& md) {
  per_point_table(c, "| Tk | d_k | max weight unscaled | max weight scaled | entropy unscaled | entropy scaled | log Tk | rows > 0.99 unscaled | rows > 0.99 scaled |\n",
                  [](const SweepPoint& u, const SweepPoint& s, std::size_t, std::size_t) {
                    return g(u.mean_max_weight) + " | " + g(s.mean_max_weight) + " | " +
                           g(u.mean_entropy) + " | " + g(s.mean_entropy) + " | " + g(u.log_tk) +
                           " | " + pct(u.frac_saturated) + " | " + pct(s.frac_saturated);
                  },
                  md);
}

// Finding 3: the gradient at the scores, unscaled against scaled.
void gradient_finding(const SweepContext& c, std::string& md) {
  const auto& pts = c.pts;
  const auto& tks = c.tks;
  const auto& dks = c.dks;
  const std::size_t dmax = c.dmax;
  md += "### Finding 3: the gradient through a saturated softmax all but vanishes\n\n";
  md += "![gradient at the scores](sweep_grad_scores.svg)\n\n![ratio](sweep_grad_ratio.svg)\n\n"
        "![gradient at Q](sweep_grad_q.svg)\n\n";
  md += "The softmax's Jacobian is diag(w) - w w^T: when one weight is near 1 and the rest near 0, "
        "every entry is near 0, so whatever gradient arrives from above is multiplied by almost "
        "nothing on its way to the scores.\n\n";
  for (std::size_t tk : tks) {
    std::string line;
    for (std::size_t d : dks) {
      double r = grad_ratio(pts, tk, d);
      if (d >= 64 && std::isfinite(r)) line += (line.empty() ? "" : ", ") + std::string("d_k ") + std::to_string(d) + ": " + g(r, 2);
    }
    const SweepPoint* s = point(pts, tk, dmax, true);
    const SweepPoint* u = point(pts, tk, dmax, false);
    if (line.empty() || !s || !u) continue;
    md += "- Tk " + std::to_string(tk) + ": unscaled / scaled median ||dL/dscores|| = " + line +
          ". At d_k " + std::to_string(dmax) + " the medians are " + g(u->median_grad_scores) +
          " (unscaled) against " + g(s->median_grad_scores) + " (scaled).\n";
  }
}

// Why the gradient at Q first grows unscaled, and where it turns.
void gradient_at_q(const SweepContext& c, std::string& md) {
  const auto& pts = c.pts;
  const auto& tks = c.tks;
  const auto& dks = c.dks;
  const std::size_t dmin = c.dmin, dmax = c.dmax;
  md += "\nAt Q the picture has a twist that the report should not hide: dQ = scale * dL/dscores @ K, "
        "and unscaled the factor is 1 instead of 1/sqrt(d_k), so before the rows saturate the "
        "unscaled gradient at Q is *larger* than the scaled one. Measured unscaled / scaled "
        "median ||dL/dQ||:";
  for (std::size_t tk : tks) {
    std::string line;
    std::optional<std::size_t> cross;
    for (std::size_t d : dks) {
      double r = grad_ratio(pts, tk, d, true);
      if (!std::isfinite(r)) continue;
      line += (line.empty() ? "" : ", ") + g(r, 2);
      if (!cross && r < 1) cross = d;
    }
    md += " Tk " + std::to_string(tk) + ": " + line + " (d_k " + std::to_string(dmin) + " to " +
          std::to_string(dmax) + "; below 1 from d_k " + (cross ? std::to_string(*cross) : std::string("- never")) + ")";
    md += tk == tks.back() ? ".\n\n" : ";";
  }
  md += "Saturation wins in the end: the collapse of the softmax's Jacobian is exponential in the "
        "score spread, the extra factor sqrt(d_k) only polynomial.\n\n";
}

// The median row is the typical row; the RMS over rows is the total gradient per row.
void gradient_rms(const SweepContext& c, std::string& md) {
  const auto& pts = c.pts;
  const auto& tks = c.tks;
  const std::size_t dmax = c.dmax;
  std::string line;
  bool far_less = true;
  for (std::size_t tk : tks) {
    const SweepPoint* s = point(pts, tk, dmax, true);
    const SweepPoint* u = point(pts, tk, dmax, false);
    if (!s || !u) continue;
    double med = u->median_grad_scores / s->median_grad_scores;
    double rm = u->rms_grad_scores / s->rms_grad_scores;
    double med_q = u->median_grad_q / s->median_grad_q;
    double rm_q = u->rms_grad_q / s->rms_grad_q;
    far_less = far_less && rm > 10 * med;
    line += (line.empty() ? "" : "; ") + std::string("Tk ") + std::to_string(tk) + ": " + g(rm, 2) +
            " (median " + g(med, 2) + "), at Q " + g(rm_q, 2) + " (median " + g(med_q, 2) + ")";
  }
  if (!line.empty()) {
    md += "The median row is the typical row. The total gradient, the root mean square of the "
          "row norms over all rows, " +
          std::string(far_less ? "does not collapse like the median"
                               : "collapses about as much as the median") +
          ": at d_k " +
          std::to_string(dmax) + " the unscaled / scaled RMS ratio is " + line + "." +
          (far_less ? " The few rows that stay unsaturated keep a full gradient and carry the "
                      "total, so a saturated attention layer need not show a small gradient "
                      "norm; what it loses is the gradient of most of its rows."
                    : "") +
          "\n\n";
  }
}

// The median and RMS gradients at the scores and at Q per (Tk, d_k).
void gradient_table(const SweepContext& c, std::string& md) {
  const auto& pts = c.pts;
  per_point_table(c, "| Tk | d_k | median dL/dscores unscaled | scaled | ratio | RMS ratio | median dL/dQ unscaled | scaled | ratio | RMS ratio |\n",
                  [&](const SweepPoint& u, const SweepPoint& s, std::size_t tk, std::size_t d) {
                    return g(u.median_grad_scores) + " | " + g(s.median_grad_scores) + " | " +
                           g(grad_ratio(pts, tk, d), 2) + " | " +
                           g(u.rms_grad_scores / s.rms_grad_scores, 2) + " | " + g(u.median_grad_q) +
                           " | " + g(s.median_grad_q) + " | " + g(grad_ratio(pts, tk, d, true), 2) +
                           " | " + g(u.rms_grad_q / s.rms_grad_q, 2);
                  },
                  md);
}

// How stable the sweep's figures are (half-split standard errors).
void sweep_stability(const SweepContext& c, std::string& md) {
  const auto& pts = c.pts;
  const auto& tks = c.tks;
  const auto& dks = c.dks;
  double se_std = 0, se_w = 0, se_h = 0, se_gs = 0, se_gq = 0, se_gs_s = 0;
  for (const SweepPoint& p : pts) {
    se_std = std::max(se_std, p.se_score_std);
    se_w = std::max(se_w, p.se_max_weight);
    se_h = std::max(se_h, p.se_entropy);
    se_gq = std::max(se_gq, p.se_grad_q);
    if (p.scaled) se_gs_s = std::max(se_gs_s, p.se_grad_scores);
    else se_gs = std::max(se_gs, p.se_grad_scores);
  }
  md += "### How stable these figures are\n\n";
  md += "Each figure was also computed on two independent halves of the rows; |half A - half B| / 2 "
        "estimates its standard error on all rows. Largest estimate over the sweep: score std " +
        pct(se_std, 2) + ", mean largest weight " + pct(se_w, 2) + ", mean entropy " + pct(se_h, 2) +
        ", median gradient at the scores " + pct(se_gs_s, 2) + " scaled and " + pct(se_gs, 1) +
        " unscaled, at Q " + pct(se_gq, 1) + ". The medians of the unscaled gradients are the "
        "loose ones: once rows saturate, their gradient norms spread over many orders of "
        "magnitude, so the middle row moves with the sample.";
  {
    // How close the gradient ratios that the expectations test come to their thresholds.
    double margin = std::numeric_limits<double>::infinity();
    for (std::size_t d : dks)
      if (d >= 256) margin = std::min(margin, 0.1 / grad_ratio(pts, 16, d));
    for (std::size_t tk : tks) margin = std::min(margin, 0.01 / grad_ratio(pts, tk, 1024));
    if (std::isfinite(margin))
      md += " The closest of the gradient ratios that the expectations test is " + g(margin, 2) +
            " times below its threshold.";
  }
  md += " `sweep.csv` lists every estimate (the `se_*` columns).\n\n";
}

// Part 2's heading and set-up.
void training_setup(const ReportInputs& in, std::string& md) {
  const TrainingOptions& o = in.training;
  const tasks::SequenceTask task = tasks::SequenceTask::make(o.task);
  char buf[4096];
  md += "## 2. Training: Transformer on `" + o.task + "`, scaled against unscaled\n\n";
  std::snprintf(buf, sizeof buf,
                "Transformer with %zu head%s per layer (d_model = %zu x d_head), %zu layers, MLP x%zu, "
                "LayerNorm, learned positions; AdamW (lr %g, warm-up %zu, cosine to %g, betas "
                "%g/%g, weight decay %g on matrices), gradient clipping at %g, batch %zu, %zu steps "
                "for every run; held-out accuracy (teacher-forced, every answer token right) on "
                "%zu sequences every %zu steps. Seeds ",
                o.heads, o.heads == 1 ? "" : "s", o.heads, o.layers, o.mlp_ratio, o.lr, o.warmup,
                o.min_lr, o.beta1, o.beta2, o.weight_decay, o.clip, o.batch, o.steps, o.eval_size,
                o.eval_every);
  md += buf;
  for (std::size_t i = 0; i < o.seeds.size(); ++i) md += (i ? ", " : "") + std::to_string(o.seeds[i]);
  std::string gpt2_std;
  for (std::size_t dh : o.d_heads) {
    double d_model = double(o.heads * dh);
    gpt2_std += (gpt2_std.empty() ? "" : ", ") + g(0.02 * 0.02 * d_model * std::sqrt(double(dh)), 2) +
                " at d_head " + std::to_string(dh);
  }
  md += "; the scaled and unscaled run of a seed share the initial weights and the data stream and "
        "differ only in the attention scale. Two initialisations of Wq, Wk, Wv: `gpt2` = "
        "normal(0, 0.02), under which queries and keys start small (for the unit-variance output "
        "of LayerNorm, entries of standard deviation 0.02 sqrt(d_model)), so unscaled scores start "
        "with standard deviation 0.02^2 d_model sqrt(d_head) = " + gpt2_std +
        " (by hand, before training); and `variance_preserving` = normal(0, 1/d_model), under "
        "which queries and keys start with unit-variance entries as in the argument for the "
        "scale, so unscaled scores start with standard deviation sqrt(d_head). Uniform causal attention would have mean entropy " +
        g(causal_uniform_entropy(task.context())) + " nats over all rows and " +
        g(causal_uniform_entropy(task.context(), task.first_answer_position())) +
        " over the answer rows (the rows that predict an answer token).\n\n";
}

// Whether the control task was learnable, which says why the study trains on --task.
void control_runs(const ReportInputs& in, std::string& md) {
  const auto& runs = in.runs;
  const TrainingOptions& o = in.training;
  for (const RunResult& r : runs) {
    if (!r.spec.is_control()) continue;
    md += "**Why `" + o.task + "` and not `" + r.spec.task + "`.** A control run trained `" +
          r.spec.task + "` the same way (scaled, gpt2 init, d_head " + std::to_string(r.spec.d_head) +
          ", seed " + std::to_string(r.spec.seed) + ", " + std::to_string(o.steps) +
          " steps): held-out accuracy " + g(r.final_eval().accuracy, 3) + " at the end, step to 0.9: " +
          steps_text(r.step_to_90) + ". ";
    md += r.step_to_90
              ? "It is learnable within this budget, so `--task " + r.spec.task + "` would also serve.\n\n"
              : "Within this budget even the scaled model does not learn it, so it cannot show what "
                "the scale changes; `" + o.task + "` can.\n\n";
  }
}

// Per arm: accuracy, step to 0.9, answer-row entropy and gradient norms of Wq and Wk.
void arm_table(const ReportInputs& in, std::string& md) {
  const auto& runs = in.runs;
  const TrainingOptions& o = in.training;
  md += "| d_head | init | scaling | final accuracy per seed | step to 0.9 per seed | mean entropy of the answer rows (start -> end) | mean gradient norm of Wq, first -> last tenth of training | the same for Wk |\n";
  md += "|---|---|---|---|---|---|---|---|\n";
  for (std::size_t dh : o.d_heads)
    for (AttentionInit init : o.inits)
      for (bool scaled : {true, false}) {
        Group gr = group_of(runs, dh, init, scaled);
        if (gr.runs.empty()) continue;
        md += "| " + std::to_string(dh) + " | " + to_string(init) + " | " + (scaled ? "scaled" : "unscaled") +
              " | " + gr.per_seed_accuracy() + " | " + gr.per_seed_steps() + " | " +
              g(gr.mean([](const RunResult& r) { return r.evals.front().entropy_answer; })) + " -> " +
              g(gr.mean([](const RunResult& r) { return r.final_eval().entropy_answer; })) + " | " +
              g(gr.mean([](const RunResult& r) { return mean_grad(r, true, 0, 0.1); })) + " -> " +
              g(gr.mean([](const RunResult& r) { return mean_grad(r, true, 0.9, 1.0); })) + " | " +
              g(gr.mean([](const RunResult& r) { return mean_grad(r, false, 0, 0.1); })) + " -> " +
              g(gr.mean([](const RunResult& r) { return mean_grad(r, false, 0.9, 1.0); })) + " |\n";
      }
}

// Finding 4: what the scale does to training, per initialisation and d_head.
void training_finding(const ReportInputs& in, std::string& md) {
  const auto& runs = in.runs;
  const TrainingOptions& o = in.training;
  md += "\n### Finding 4: what the scale does to training\n\n";
  for (AttentionInit init : o.inits) {
    md += "- **" + to_string(init) + " init.**\n";
    for (std::size_t dh : o.d_heads) {
      Group s = group_of(runs, dh, init, true), u = group_of(runs, dh, init, false);
      if (s.runs.empty()) continue;
      int later, earlier, none, same;
      std::string cmp = seed_comparison(runs, dh, init, &later, &earlier, &none, &same);
      auto h_end = [](const RunResult& r) { return r.final_eval().entropy_answer; };
      md += "  - d_head " + std::to_string(dh) + ": mean final accuracy " + g(s.mean_accuracy(), 3) +
            " scaled vs " + g(u.mean_accuracy(), 3) + " unscaled; step to 0.9, scaled vs unscaled: " +
            cmp + ". The unscaled run is later or never in " + std::to_string(later) + " of " +
            std::to_string(s.runs.size()) + " seeds, earlier in " + std::to_string(earlier) +
            (none ? ", and neither reaches 0.9 in " + std::to_string(none) : std::string()) +
            (same ? ", the same step in " + std::to_string(same) : std::string()) +
            ". Final answer-row attention entropy " + g(s.mean(h_end)) + " scaled vs " +
            g(u.mean(h_end)) + " unscaled nats.\n";
    }
  }
}

// The total gradient of Wq and Wk at the largest d_head, scaled against unscaled.
void gradient_norms(const ReportInputs& in, std::string& md) {
  const auto& runs = in.runs;
  const TrainingOptions& o = in.training;
  const tasks::SequenceTask task = tasks::SequenceTask::make(o.task);
  const std::size_t dh = o.d_heads.back();
  std::string line;
  bool unscaled_larger = true, any = false;
  double h_unscaled = 0;
  for (AttentionInit init : o.inits) {
    Group s = group_of(runs, dh, init, true), u = group_of(runs, dh, init, false);
    if (s.runs.empty() || u.runs.empty()) continue;
    auto first_q = [](const RunResult& r) { return mean_grad(r, true, 0, 0.1); };
    auto last_q = [](const RunResult& r) { return mean_grad(r, true, 0.9, 1.0); };
    auto first_k = [](const RunResult& r) { return mean_grad(r, false, 0, 0.1); };
    line += (line.empty() ? "" : "; ") + to_string(init) + ": Wq scaled " + g(s.mean(first_q)) + " -> " +
            g(s.mean(last_q)) + ", unscaled " + g(u.mean(first_q)) + " -> " + g(u.mean(last_q)) +
            " (Wk in the first tenth: " + g(s.mean(first_k)) + " vs " + g(u.mean(first_k)) + ")";
    unscaled_larger = unscaled_larger && u.mean(first_q) > s.mean(first_q);
    h_unscaled = std::max(h_unscaled, u.mean([](const RunResult& r) { return r.final_eval().entropy_answer; }));
    any = true;
  }
  if (any) {
    md += "\nGradient norms at d_head " + std::to_string(dh) +
          " (Frobenius norm over the layers, before clipping, mean over seeds, first tenth of "
          "training -> last tenth): " + line + ".";
    const double uniform = causal_uniform_entropy(task.context(), task.first_answer_position());
    if (unscaled_larger && h_unscaled < 0.5 * uniform)
      md += " Unscaled, the total gradient of Wq is larger, not smaller, while its attention "
            "stays saturated (final answer-row entropy at most " + g(h_unscaled) +
            " nats, uniform " + g(uniform) + "): consistent with the sweep's RMS against median, "
            "a few unsaturated rows carry a large total while the typical row receives almost "
            "nothing, so here a large gradient norm is no sign of learning.";
    else if (unscaled_larger)
      md += " Unscaled, the total gradient of Wq is larger, not smaller.";
    md += "\n";
  }
}

// The runs that a non-finite loss stopped.
void diverged_runs(const ReportInputs& in, std::string& md) {
  const auto& runs = in.runs;
  bool any_div = false;
  for (const RunResult& r : runs) any_div = any_div || r.diverged;
  if (any_div) {
    md += "\nDiverged runs (a non-finite loss stopped them):";
    for (const RunResult& r : runs)
      if (r.diverged) md += " " + run_label(r.spec) + ";";
    md += "\n";
  }
}

// The training plots, linked per d_head and initialisation, shown at the largest d_head.
void training_plot_links(const ReportInputs& in, std::string& md) {
  const TrainingOptions& o = in.training;
  md += "\nPlots, per d_head and initialisation (scaled: solid blue, unscaled: dashed red, one line "
        "per seed):\n\n";
  for (std::size_t dh : o.d_heads)
    for (AttentionInit init : o.inits) {
      const std::string slug = "d" + std::to_string(dh) + "_" + to_string(init);
      md += "- d_head " + std::to_string(dh) + ", " + to_string(init) + ": [loss](train_loss_" + slug +
            ".svg), [accuracy](train_accuracy_" + slug + ".svg)\n";
    }
  md += "\n";
  for (AttentionInit init : o.inits) {
    const std::string slug = to_string(init);
    md += "![loss d_head " + std::to_string(o.d_heads.back()) + " " + slug + "](train_loss_d" +
          std::to_string(o.d_heads.back()) + "_" + slug + ".svg)\n\n";
    md += "![accuracy d_head " + std::to_string(o.d_heads.back()) + " " + slug + "](train_accuracy_d" +
          std::to_string(o.d_heads.back()) + "_" + slug + ".svg)\n\n";
    md += "![Wq gradient " + slug + "](train_grad_wq_" + slug + ".svg)\n\n";
    md += "![Wk gradient " + slug + "](train_grad_wk_" + slug + ".svg)\n\n";
    md += "![entropy " + slug + "](train_entropy_" + slug + ".svg)\n\n";
  }
}

// Parts 3 to 6: each computes its findings, checks them and writes its section.
std::string modern_sections(const ReportInputs& in) {
  std::string md;
  if (!in.runs.empty()) {
    const RemedyFindings f = remedy_findings(in.runs, in.training, in.quick);
    md += remedy_markdown(f, remedy_checks(f), architecture_checks(f));
  }
  if (!in.lr_runs.empty()) {
    const LrFindings f = lr_findings(in.lr_runs, in.lr, in.quick, in.lr_seconds);
    md += lr_markdown(f, lr_checks(f));
  }
  if (in.positions) md += position_markdown(*in.positions, position_checks(*in.positions));
  if (!in.ablation.rows.empty())
    md += ablation_markdown(in.ablation, in.ablation_options, ablation_checks(in.ablation, in.quick));
  return md;
}

std::string limitations(const ReportInputs& in) {
  std::string md = "## What this study does not show\n\n";
  md += "- **Toy scale.** Every model here has at most about a million parameters, two "
        "layers and sequences of about 20 tokens, trained for hundreds of steps on a synthetic "
        "task. The paper's claims are about models of millions to billions of parameters "
        "trained for much longer; agreement here says the mechanism exists at this scale, not "
        "that its size or threshold carries over, and a disagreement can be a matter of scale.\n";
  md += "- **Few seeds.** " + std::to_string(in.training.seeds.size()) + " seed(s) per arm in "
        "parts 2 and 3, " + std::to_string(in.lr.seeds.size()) + " per rate in part 4: a verdict "
        "of \"every seed\" over three seeds is not a rate, and the min-max bands are ranges of "
        "three numbers, not confidence intervals.\n";
  md += "- **One task, one optimiser recipe.** `sort` and AdamW with warm-up, cosine decay and "
        "gradient clipping at 1. Clipping bounds every update, which can hide part of the "
        "instability the paper measures without it; other tasks (recall needs far more steps "
        "here) and schedules were not run.\n";
  md += "- **The logit probe is one held-out batch** at each evaluation: the largest attention "
        "logit of the training batches in between is not seen, so a short spike can be missed.\n";
  md += "- **Head ablation zeroes a head** (it does not replace it by its mean output), on one "
        "trained model of one seed: which heads matter can differ from seed to seed.\n";
  md += "- **The position checks are exact identities** checked to round-off on random inputs; "
        "they show what the operations guarantee, not how a trained model uses positions.\n\n";
  return md;
}

// The list of files, for the parts that ran.
std::string files_markdown(const ReportInputs& in) {
  const auto& pts = in.points;
  const auto& runs = in.runs;
  std::string md;
  md += "## Files\n\n";
  if (!pts.empty())
    md += "- [sweep.csv](sweep.csv): every sweep point (score std, theory, largest weight, entropy, "
          "saturated rows, median gradients, cross-check with scaled_dot_product_attention, "
          "standard errors); [gradient_ratio.csv](gradient_ratio.csv): unscaled / scaled median "
          "gradients.\n";
  if (!runs.empty())
    md += "- [training_runs.csv](training_runs.csv): one row per run; "
          "[training_curves.csv](training_curves.csv): loss and gradient norms of Wq and Wk "
          "(means over windows of " + std::to_string(in.training.curve_every) +
          " steps); [training_evals.csv](training_evals.csv): held-out loss, accuracy and "
          "attention entropies.\n";
  if (!in.lr_runs.empty())
    md += "- [lr_sweep.csv](lr_sweep.csv): one row per learning-rate run (initial and final loss, "
          "accuracy, largest attention logit).\n";
  if (!in.ablation.rows.empty())
    md += "- [ablation.csv](ablation.csv): accuracy and margin per ablated head.\n";
  md += "- [expectations.csv](expectations.csv): the table at the top.\n";
  return md;
}

// Every link of the report is a file of the output directory: point them at it from elsewhere.
std::string with_link_prefix(const std::string& md, const std::string& prefix) {
  if (prefix.empty()) return md;
  std::string out;
  for (std::size_t i = 0; i < md.size(); ++i) {
    out += md[i];
    if (md[i] == '(' && i > 0 && md[i - 1] == ']') out += prefix;
  }
  return out;
}

}  // namespace

std::string report_markdown(const ReportInputs& in) {
  std::string md = report_header(in);
  if (!in.points.empty()) {
    const SweepContext c = sweep_context(in);
    for (auto part : {sweep_intro, spread_finding, spread_table, saturation_finding, saturation_by_keys,
                      saturation_table, gradient_finding, gradient_at_q, gradient_rms, gradient_table,
                      sweep_stability})
      part(c, md);
  }
  if (!in.runs.empty()) {
    for (auto part : {training_setup, control_runs, arm_table, training_finding, gradient_norms,
                      diverged_runs, training_plot_links})
      part(in, md);
  }
  md += modern_sections(in);
  md += limitations(in);
  md += files_markdown(in);
  return with_link_prefix(md, in.link_prefix);
}

std::string expectations_csv(const std::vector<Check>& checks) {
  std::string csv = "expectation,measured,verdict\n";
  auto quote = [](std::string s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const Check& c : checks)
    csv += quote(c.claim) + "," + quote(c.measured) + "," +
           (c.verdict == Check::held       ? "held"
            : c.verdict == Check::failed   ? "failed"
            : c.verdict == Check::reported ? "reported"
                                           : "not measured") +
           "\n";
  return csv;
}

}  // namespace tapegrad::saturation
