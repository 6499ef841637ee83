#include "examples/saturation/report_tables.hpp"

#include <cstdio>
#include <ctime>

#include "examples/saturation/lr_report.hpp"
#include "examples/saturation/position_report.hpp"
#include "examples/saturation/remedies_report.hpp"
#include "examples/saturation/report_format.hpp"
#include "examples/saturation/report_sweep.hpp"
#include "examples/saturation/report_training.hpp"

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
  md += sweep_markdown(in);
  md += training_markdown(in);
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
