#include "examples/saturation/report_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "examples/saturation/report_format.hpp"

namespace tapegrad::saturation {
namespace {

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

}  // namespace

std::string sweep_markdown(const ReportInputs& in) {
  std::string md;
  if (in.points.empty()) return md;
  const SweepContext c = sweep_context(in);
  for (auto part : {sweep_intro, spread_finding, spread_table, saturation_finding, saturation_by_keys,
                    saturation_table, gradient_finding, gradient_at_q, gradient_rms, gradient_table,
                    sweep_stability})
    part(c, md);
  return md;
}

}  // namespace tapegrad::saturation
