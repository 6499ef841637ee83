#include "examples/saturation/lr_report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "apps/common/svg_plot.hpp"
#include "examples/saturation/report_format.hpp"

namespace tapegrad::saturation {

LrFindings lr_findings(const std::vector<LrRun>& runs, const LrSweepOptions& o, bool quick,
                       double seconds) {
  LrFindings f;
  f.options = o;
  f.quick = quick;
  f.seconds = seconds;
  f.plain = lr_points(runs, false);
  f.qk_norm = lr_points(runs, true);
  f.plain_sensitivity = lr_sensitivity(f.plain);
  f.qk_sensitivity = lr_sensitivity(f.qk_norm);
  return f;
}

std::vector<Check> lr_checks(const LrFindings& f) {
  std::vector<Check> out;
  if (f.empty()) return out;
  const LrPoint &lo = f.plain.front(), &hi = f.plain.back(), &hi_qk = f.qk_norm.back();
  Check growth;
  growth.claim = "claim 1 (attention-logit growth at high rates, no QK-norm): the largest attention "
                 "logit at the highest rate is at least 10x the one at the lowest rate, and at least "
                 "3x the QK-norm model's at the highest rate";
  growth.measured = "no QK-norm: " + g(lo.max_logit) + " at lr " + g(lo.lr) + ", " + g(hi.max_logit) +
                    " at lr " + g(hi.lr) + "; QK-norm at lr " + g(hi.lr) + ": " + g(hi_qk.max_logit);
  growth.verdict = decide(!f.quick, hi.max_logit >= 10 * lo.max_logit && hi.max_logit >= 3 * hi_qk.max_logit);
  if (f.quick) growth.measured += " (a quick run is too short to decide)";
  out.push_back(growth);
  Check flat;
  flat.claim = "claim 2 (QK-norm flattens final loss against learning rate): its LR sensitivity is "
               "below the one without QK-norm";
  flat.measured = "LR sensitivity without QK-norm " + g(f.plain_sensitivity) + ", with QK-norm " +
                  g(f.qk_sensitivity) + " (nats)";
  flat.verdict = decide(!f.quick, f.qk_sensitivity < f.plain_sensitivity);
  if (f.quick) flat.measured += " (a quick run is too short to decide)";
  out.push_back(flat);
  return out;
}

namespace {

std::string table(const LrFindings& f) {
  std::string md = "| lr | final loss, no QK-norm (mean; min-max) | with QK-norm | largest logit, no "
                   "QK-norm | with QK-norm | diverged seeds (no / with) |\n|---|---|---|---|---|---|\n";
  for (std::size_t i = 0; i < f.plain.size() && i < f.qk_norm.size(); ++i) {
    const LrPoint &a = f.plain[i], &b = f.qk_norm[i];
    md += "| " + g(a.lr) + " | " + g(a.mean_final) + " (" + g(a.min_final) + "-" + g(a.max_final) +
          ") | " + g(b.mean_final) + " (" + g(b.min_final) + "-" + g(b.max_final) + ") | " +
          g(a.max_logit) + " | " + g(b.max_logit) + " | " + std::to_string(a.diverged) + " / " +
          std::to_string(b.diverged) + " |\n";
  }
  return md;
}

}  // namespace

std::string lr_markdown(const LrFindings& f, const std::vector<Check>& checks) {
  if (f.empty()) return "";
  const LrSweepOptions& o = f.options;
  std::string md = "## 4. Learning-rate sensitivity, with and without QK-norm\n\n";
  md += "Wortsman et al. 2023 (\"Small-scale proxies for large-scale Transformer training "
        "instabilities\") report that the growth of the attention logits seen in very large "
        "models already appears in small ones trained at high learning rates, and that "
        "QK-layernorm removes it, flattening final loss against learning rate. Here: the llama "
        "preset (RoPE, RMSNorm, SwiGLU, grouped-query attention), d_model " +
        std::to_string(o.d_model) + ", " + std::to_string(o.heads) + " heads, " +
        std::to_string(o.layers) + " layers, on `" + o.task + "`, " + std::to_string(o.steps) +
        " steps of AdamW (batch " + std::to_string(o.batch) + ", warm-up " +
        std::to_string(o.warmup) + ", cosine to a tenth of the peak, gradient clipping at 1), " +
        std::to_string(o.lrs.size()) + " peak rates, " + std::to_string(o.seeds.size()) +
        " seeds each, with and without QK-norm (gain 1) and nothing else different; " +
        secs(f.seconds) + ".\n\n";
  md += "The final loss is the held-out loss at the end; a run that diverged (a non-finite loss) "
        "or ended above its loss at initialisation counts as that initial loss, as the paper "
        "does. The LR sensitivity is the mean over the rates of that loss (mean over seeds) "
        "minus the best of them. The largest attention logit is the largest score any softmax "
        "saw on one held-out batch at any evaluation (every " + std::to_string(o.eval_every) +
        " steps).\n\n";
  md += table(f);
  md += "\nLR sensitivity: **" + g(f.plain_sensitivity) + "** without QK-norm, **" +
        g(f.qk_sensitivity) + "** with it.\n\n";
  md += "| claim | measured | verdict |\n|---|---|---|\n";
  for (const Check& c : checks) md += "| " + c.claim + " | " + c.measured + " | " + verdict_text(c.verdict) + " |\n";
  md += "\n![final loss against learning rate](lr_final_loss.svg)\n\n"
        "![largest attention logit against learning rate](lr_max_logit.svg)\n\n";
  return md;
}

void lr_plots(const std::string& dir, const LrFindings& f, std::vector<std::string>& written) {
  if (f.empty()) return;
  plot::LinePlot loss({"Final held-out loss against peak learning rate (mean; dotted: min and max over seeds)",
                       "peak learning rate", "final loss (capped at the initial loss)",
                       plot::Scale::Log, plot::Scale::Linear});
  plot::LinePlot logit({"Largest attention logit over training", "peak learning rate",
                        "largest score", plot::Scale::Log, plot::Scale::Log});
  auto add = [&](const std::vector<LrPoint>& pts, const std::string& name, const char* color) {
    plot::Series mean{name, {}, {}, color, false, true}, lo{"", {}, {}, color, true, false},
        hi = lo, top{name, {}, {}, color, false, true};
    for (const LrPoint& p : pts) {
      mean.x.push_back(p.lr);
      mean.y.push_back(p.mean_final);
      lo.x.push_back(p.lr);
      lo.y.push_back(p.min_final);
      hi.x.push_back(p.lr);
      hi.y.push_back(p.max_final);
      top.x.push_back(p.lr);
      top.y.push_back(p.max_logit);
    }
    loss.add(mean).add(lo).add(hi);
    logit.add(top);
  };
  add(f.plain, "no QK-norm", "#cb181d");
  add(f.qk_norm, "QK-norm", "#2171b5");
  loss.write((std::filesystem::path(dir) / "lr_final_loss.svg").string());
  logit.write((std::filesystem::path(dir) / "lr_max_logit.svg").string());
  written.push_back("lr_final_loss.svg");
  written.push_back("lr_max_logit.svg");
}

}  // namespace tapegrad::saturation
