#include "examples/induction/report.hpp"

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "apps/common/svg_heatmap.hpp"
#include "apps/common/svg_plot.hpp"

namespace tapegrad::induction {

namespace {

std::string num(double v, const char* format = "%.4f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string run_label(const RunResult& r) {
  return to_string(r.variant) + " seed " + std::to_string(r.seed);
}

std::string head_name(std::size_t layer, std::size_t head) {
  return "L" + std::to_string(layer) + "H" + std::to_string(head);
}

std::string evaluations_csv(const Report& rep) {
  const StudyOptions& o = rep.options;
  std::ostringstream csv;
  csv << "variant,seed,step,loss_first,loss_repeat,in_context";
  for (const char* kind : {"induction", "previous"})
    for (std::size_t l = 0; l < o.layers; ++l)
      for (std::size_t h = 0; h < o.heads; ++h) csv << "," << kind << "_" << head_name(l, h);
  csv << "\n";
  for (const RunResult& r : rep.runs)
    for (const EvalPoint& p : r.points) {
      csv << to_string(r.variant) << "," << r.seed << "," << p.step << "," << num(p.loss_first, "%.6f")
          << "," << num(p.loss_repeat, "%.6f") << "," << num(p.in_context(), "%.6f");
      for (const std::vector<double>* scores : {&p.scores.induction, &p.scores.previous})
        for (double v : *scores) csv << "," << num(v, "%.5f");
      csv << "\n";
    }
  return csv.str();
}

std::string ablation_csv(const Report& rep) {
  std::ostringstream csv;
  csv << "variant,seed,layer,head,loss_first,loss_repeat,final_induction,final_previous\n";
  for (const RunResult& r : rep.runs)
    for (const AblatedHead& a : r.ablation) {
      const std::size_t i = a.layer * rep.options.heads + a.head;
      csv << to_string(r.variant) << "," << r.seed << "," << a.layer << "," << a.head << ","
          << num(a.loss_first, "%.6f") << "," << num(a.loss_repeat, "%.6f") << ","
          << num(r.last().scores.induction[i], "%.5f") << ","
          << num(r.last().scores.previous[i], "%.5f") << "\n";
    }
  return csv.str();
}

std::vector<double> steps_of(const RunResult& r) {
  std::vector<double> x;
  for (const EvalPoint& p : r.points) x.push_back(double(p.step));
  return x;
}

// One line per run of `value` over training.
template <class F>
plot::LinePlot over_training(const Report& rep, const std::string& title, const std::string& y,
                             F value) {
  plot::LinePlot plot({title, "training step", y});
  for (const RunResult& r : rep.runs) {
    std::vector<double> v;
    for (const EvalPoint& p : r.points) v.push_back(value(p));
    plot.add({run_label(r), steps_of(r), v, "", r.variant == Variant::unscaled, false});
  }
  return plot;
}

// Every head's induction (solid) and previous-token (dashed) score in one run.
plot::LinePlot head_plot(const RunResult& r, std::size_t heads) {
  plot::LinePlot plot({"heads over training, " + run_label(r), "training step", "score"});
  const std::size_t count = r.last().scores.induction.size();
  for (std::size_t i = 0; i < count; ++i)
    for (bool previous : {false, true}) {
      std::vector<double> v;
      for (const EvalPoint& p : r.points)
        v.push_back(previous ? p.scores.previous[i] : p.scores.induction[i]);
      plot.add({head_name(i / heads, i % heads) + (previous ? " previous" : " induction"),
                steps_of(r), v, "", previous, false});
    }
  return plot;
}

std::string pattern_svg(const RunResult& r, std::size_t layer, std::size_t heads) {
  std::vector<std::string> labels;
  for (std::int64_t t : r.tokens) labels.push_back(std::to_string(t));
  const std::size_t T = labels.size();
  std::vector<plot::HeatmapPanel> panels;
  for (std::size_t h = 0; h < heads; ++h) {
    const std::vector<double>& w = r.patterns[layer];
    panels.push_back({"head " + std::to_string(h),
                      std::vector<double>(w.begin() + h * T * T, w.begin() + (h + 1) * T * T)});
  }
  return plot::heatmap_svg(panels, {"attention patterns, layer " + std::to_string(layer) + ", " +
                                        run_label(r) + " (rows: queries, columns: keys)",
                                    labels, labels, 12});
}

const RunResult* first_of(const Report& rep, Variant v) {
  for (const RunResult& r : rep.runs)
    if (r.variant == v) return &r;
  return nullptr;
}

}  // namespace

std::string report_markdown(const Report& rep) {
  const StudyOptions& o = rep.options;
  std::ostringstream md;
  md << "# Induction heads\n\n"
     << "`" << rep.command << "` (" << num(rep.seconds, "%.0f") << " s): " << o.layers
     << "-layer attention-only models (d_model " << o.d_model << ", " << o.heads << " heads, "
     << (o.positions == PositionKind::rope ? "RoPE" : "learned positions")
     << ", no feed-forward) trained " << o.steps << " steps on "
     << o.batch << " sequences of " << 2 * o.half << " tokens, a random segment repeated once "
     << (o.fixed_period ? "(period " + std::to_string(o.half) + ", no prefix)"
                        : "after a random prefix (period " + std::to_string(std::max<std::size_t>(2, o.half / 2)) +
                              " to " + std::to_string(o.half) + ")")
     << ", vocabulary " << o.vocab << "; evaluated on " << o.eval_size << " held-out sequences.\n\n"
     << "Loss on each copy (nats; log vocab = " << num(std::log(double(o.vocab)), "%.3f")
     << "), the in-context advantage (first copy - repeat), the step at which the advantage "
        "reached half its final size, the head with the highest induction score (attention "
        "from a repeated token to the one after its earlier occurrence), the best "
        "previous-token head, and the repeat's loss with each head's output zeroed in turn "
        "(layer.head: loss).\n\n"
     << "| run | loss first | loss repeat | advantage | phase change | best induction head | "
        "best previous-token head | repeat loss, each head zeroed |\n"
     << "|---|---|---|---|---|---|---|---|\n";
  for (const RunResult& r : rep.runs) {
    const EvalPoint& p = r.last();
    const auto& prev = p.scores.previous;
    const std::size_t best_prev = std::max_element(prev.begin(), prev.end()) - prev.begin();
    std::string ablated;
    for (const AblatedHead& a : r.ablation)
      ablated += (ablated.empty() ? "" : ", ") + head_name(a.layer, a.head) + " " + num(a.loss_repeat, "%.2f");
    md << "| " << run_label(r) << " | " << num(p.loss_first, "%.3f") << " | "
       << num(p.loss_repeat, "%.3f") << " | " << num(p.in_context(), "%.3f") << " | "
       << (r.phase_step ? "step " + std::to_string(*r.phase_step) : std::string("none")) << " | "
       << head_name(r.best_layer, r.best_head) << " " << num(r.best_induction, "%.3f") << " | "
       << head_name(best_prev / o.heads, best_prev % o.heads) << " " << num(prev[best_prev], "%.3f")
       << " | " << ablated << " |\n";
  }
  md << "\nPlots: [in-context advantage](in_context.svg), [best induction score](induction_score.svg)";
  for (Variant v : o.variants)
    if (first_of(rep, v))
      md << ", [heads, " << to_string(v) << "](heads_" << to_string(v) << ".svg)";
  md << ". Attention patterns of the first seed's model on held-out sequence 0:";
  for (Variant v : o.variants)
    if (first_of(rep, v))
      for (std::size_t l = 0; l < o.layers; ++l)
        md << " [" << to_string(v) << " layer " << l << "](pattern_" << to_string(v) << "_layer" << l << ".svg)";
  md << ". Every number: [induction.csv](induction.csv), [ablation.csv](ablation.csv).\n";
  return md.str();
}

std::vector<std::string> write_report(const std::string& dir, const Report& rep) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> files;
  auto put = [&](const std::string& name, const std::string& text) {
    plot::write_file_atomic(dir + "/" + name, text);
    files.push_back(name);
  };
  put("induction.csv", evaluations_csv(rep));
  put("ablation.csv", ablation_csv(rep));
  put("in_context.svg", over_training(rep, "in-context advantage: loss on the first half - loss on the repeat",
                                      "nats", [](const EvalPoint& p) { return p.in_context(); }).to_svg());
  put("induction_score.svg", over_training(rep, "the highest induction score among the heads", "score",
                                           [](const EvalPoint& p) {
                                             return *std::max_element(p.scores.induction.begin(),
                                                                      p.scores.induction.end());
                                           }).to_svg());
  for (Variant v : rep.options.variants) {
    const RunResult* r = first_of(rep, v);
    if (!r) continue;
    put("heads_" + to_string(v) + ".svg", head_plot(*r, rep.options.heads).to_svg());
    for (std::size_t l = 0; l < rep.options.layers; ++l)
      put("pattern_" + to_string(v) + "_layer" + std::to_string(l) + ".svg",
          pattern_svg(*r, l, rep.options.heads));
  }
  put("REPORT.md", report_markdown(rep));
  return files;
}

}  // namespace tapegrad::induction
