#include "apps/train/metrics.hpp"

#include <cmath>
#include <cstdio>

#include "apps/common/svg_plot.hpp"

namespace tapegrad::train {

std::string loss_csv(const std::vector<LossRecord>& records, std::optional<double> bytes_per_token) {
  std::string out = bytes_per_token ? "step,loss,lr,bits_per_byte\n" : "step,loss,lr\n";
  char buf[128];
  for (const LossRecord& r : records) {
    int n = std::snprintf(buf, sizeof buf, "%zu,%.9g,%.9g", r.step, r.loss, r.lr);
    if (bytes_per_token)
      std::snprintf(buf + n, sizeof buf - std::size_t(n), ",%.9g",
                    r.loss / (*bytes_per_token * std::log(2.0)));
    out += buf;
    out += '\n';
  }
  return out;
}

std::string loss_svg(const std::vector<LossRecord>& records, const std::string& title,
                     std::size_t smooth) {
  plot::PlotOptions options;
  options.title = title;
  options.x_label = "step";
  options.y_label = "training loss (cross-entropy, nats)";
  options.y_scale = plot::Scale::Log;
  plot::LinePlot p(options);

  plot::Series raw;
  raw.label = "loss per step";
  raw.color = "#9ecae1";
  for (const LossRecord& r : records) {
    raw.x.push_back(double(r.step));
    raw.y.push_back(r.loss);
  }
  p.add(raw);
  if (smooth > 1 && records.size() > smooth) {
    plot::Series avg;
    avg.label = "moving average (" + std::to_string(smooth) + " steps)";
    avg.color = "#08519c";
    double window = 0;
    for (std::size_t i = 0; i < records.size(); ++i) {
      window += records[i].loss;
      if (i >= smooth) window -= records[i - smooth].loss;
      if (i + 1 >= smooth) {
        avg.x.push_back(double(records[i].step));
        avg.y.push_back(window / double(smooth));
      }
    }
    p.add(avg);
  }
  return p.to_svg();
}

}  // namespace tapegrad::train
