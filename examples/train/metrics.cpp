#include "examples/train/metrics.hpp"

#include <cmath>
#include <cstdio>

#include "examples/common/svg_plot.hpp"

namespace tapegrad::train {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);  // UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

JsonObject& JsonObject::raw(const std::string& key, std::string json) {
  for (auto& item : items_) {
    if (item.first == key) {
      item.second = std::move(json);
      return *this;
    }
  }
  items_.emplace_back(key, std::move(json));
  return *this;
}

JsonObject& JsonObject::set(const std::string& key, double value) {
  return raw(key, json_number(value));
}
JsonObject& JsonObject::set(const std::string& key, std::int64_t value) {
  return raw(key, std::to_string(value));
}
JsonObject& JsonObject::set(const std::string& key, bool value) {
  return raw(key, value ? "true" : "false");
}
JsonObject& JsonObject::set(const std::string& key, const std::string& value) {
  return raw(key, json_string(value));
}
JsonObject& JsonObject::set_null(const std::string& key) { return raw(key, "null"); }

std::string JsonObject::dump() const {
  std::string out = "{\n";
  for (std::size_t i = 0; i < items_.size(); ++i) {
    out += "  " + json_string(items_[i].first) + ": " + items_[i].second;
    out += i + 1 < items_.size() ? ",\n" : "\n";
  }
  return out + "}\n";
}

std::string loss_csv(const std::vector<LossRecord>& records) {
  std::string out = "step,loss,lr\n";
  char buf[96];
  for (const LossRecord& r : records) {
    std::snprintf(buf, sizeof buf, "%zu,%.9g,%.9g\n", r.step, r.loss, r.lr);
    out += buf;
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
