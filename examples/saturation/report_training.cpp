#include "examples/saturation/report_training.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "examples/saturation/report_format.hpp"
#include "tasks/tasks.hpp"

namespace tapegrad::saturation {
namespace {

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

}  // namespace

std::string training_markdown(const ReportInputs& in) {
  std::string md;
  if (in.runs.empty()) return md;
  for (auto part : {training_setup, control_runs, arm_table, training_finding, gradient_norms,
                    diverged_runs, training_plot_links})
    part(in, md);
  return md;
}

}  // namespace tapegrad::saturation
