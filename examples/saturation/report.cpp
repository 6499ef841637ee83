#include "examples/saturation/report.hpp"

#include <filesystem>

#include "apps/common/svg_plot.hpp"
#include "examples/saturation/lr_report.hpp"
#include "examples/saturation/position_report.hpp"
#include "examples/saturation/remedies_report.hpp"
#include "examples/saturation/report_plots.hpp"

namespace tapegrad::saturation {

std::vector<std::string> write_outputs(const std::string& dir, const ReportInputs& in) {
  std::vector<std::string> written;
  auto put = [&](const std::string& name, const std::string& text) {
    plot::write_file_atomic((std::filesystem::path(dir) / name).string(), text);
    written.push_back(name);
  };
  if (!in.points.empty()) {
    put("sweep.csv", sweep_csv(in.points));
    put("gradient_ratio.csv", gradient_ratio_csv(in.points));
    sweep_plots(dir, in.points, written);
  }
  if (!in.runs.empty()) {
    put("training_runs.csv", training_runs_csv(in.runs, in.training));
    put("training_curves.csv", training_curves_csv(in.runs, in.training));
    put("training_evals.csv", training_evals_csv(in.runs, in.training));
    training_plots(dir, in.runs, in.training, written);
  }
  if (!in.lr_runs.empty()) {
    put("lr_sweep.csv", lr_sweep_csv(in.lr_runs));
    lr_plots(dir, lr_findings(in.lr_runs, in.lr, in.quick, in.lr_seconds), written);
  }
  if (!in.runs.empty()) remedy_plots(dir, remedy_findings(in.runs, in.training, in.quick), written);
  if (!in.ablation.rows.empty()) {
    put("ablation.csv", ablation_csv(in.ablation.rows));
    ablation_plot(dir, in.ablation, written);
  }
  put("expectations.csv", expectations_csv(all_checks(in)));
  ReportInputs local = in;
  local.link_prefix.clear();
  put("REPORT.md", report_markdown(local));
  return written;
}

}  // namespace tapegrad::saturation
