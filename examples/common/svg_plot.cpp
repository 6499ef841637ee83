#include "examples/common/svg_plot.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace tapegrad::plot {

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};


// Coordinates are printed with 2 decimals: sub-pixel precision, short files.
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

bool usable(double v, Scale s) { return std::isfinite(v) && (s == Scale::Linear || v > 0.0); }

std::vector<Tick> linear_ticks(double& lo, double& hi, int target) {
  if (!(hi > lo)) {  // a single value: open a unit-sized window around it
    double pad = lo == 0.0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  double raw = (hi - lo) / std::max(target, 2);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  double first = std::floor(lo / step + 1e-9) * step;
  double last = std::ceil(hi / step - 1e-9) * step;
  lo = first;
  hi = last;
  std::vector<Tick> ticks;
  for (int i = 0;; ++i) {
    double v = first + i * step;
    if (v > last + step * 1e-6) break;
    if (std::abs(v) < step * 1e-9) v = 0.0;  // print 0, not 1.3e-17
    ticks.push_back({v, format_number(v)});
  }
  return ticks;
}

std::vector<Tick> log_ticks(double& lo, double& hi) {
  double a = std::floor(std::log10(lo) + 1e-9);
  double b = std::ceil(std::log10(hi) - 1e-9);
  if (b <= a) b = a + 1;
  lo = std::pow(10.0, a);
  hi = std::pow(10.0, b);
  std::vector<Tick> ticks;
  // Many decades: label every k-th power so the labels do not collide.
  int stride = std::max(1, int(std::ceil((b - a) / 8.0)));
  bool fill = (b - a) < 3;
  for (double e = a; e <= b + 1e-9; e += 1) {
    double base = std::pow(10.0, e);
    if (int(e - a) % stride == 0) ticks.push_back({base, format_number(base)});
    if (fill && e < b) {
      for (double m : {2.0, 5.0}) ticks.push_back({m * base, format_number(m * base)});
    }
  }
  return ticks;
}

}  // namespace

std::string format_number(double v) {
  if (v == 0.0) return "0";
  char buf[32];
  double a = std::abs(v);
  if (a >= 1e5 || a < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.6g", v);
  }
  return buf;
}

std::vector<Tick> axis_ticks(double& lo, double& hi, Scale scale, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) {
    lo = scale == Scale::Log ? 1.0 : 0.0;
    hi = scale == Scale::Log ? 10.0 : 1.0;
  }
  if (scale == Scale::Log) {
    if (!(lo > 0.0)) lo = std::max(hi * 1e-3, std::numeric_limits<double>::min());
    if (!(hi > 0.0)) hi = 1.0;
    return log_ticks(lo, hi);
  }
  return linear_ticks(lo, hi, target);
}

LinePlot& LinePlot::add(Series series) {
  if (series.x.size() != series.y.size()) {
    throw std::invalid_argument("LinePlot::add: series '" + series.label + "' has " +
                                std::to_string(series.x.size()) + " x values and " +
                                std::to_string(series.y.size()) + " y values");
  }
  if (series.color.empty()) {
    series.color = kPalette[series_.size() % (sizeof kPalette / sizeof kPalette[0])];
  }
  series_.push_back(std::move(series));
  return *this;
}

LinePlot& LinePlot::add_hline(double y, std::string label, std::string color) {
  Series s;
  s.label = std::move(label);
  s.color = std::move(color);
  s.dashed = true;
  s.y = {y, y};
  s.x = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
  series_.push_back(std::move(s));  // x is filled with the axis range when drawn
  return *this;
}

std::string LinePlot::to_svg() const {
  const PlotOptions& o = options_;
  const double W = o.width, H = o.height;
  const double left = 78, right = 24, top = o.title.empty() ? 24 : 48, bottom = 62;
  const double pw = W - left - right, ph = H - top - bottom;

  // Data ranges over the usable points (horizontal lines count for y only).
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const Series& s : series_) {
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      bool hline = std::isnan(s.x[i]);
      if (!usable(s.y[i], o.y_scale)) continue;
      if (!hline) {
        if (!usable(s.x[i], o.x_scale)) continue;
        xlo = std::min(xlo, s.x[i]);
        xhi = std::max(xhi, s.x[i]);
      }
      ylo = std::min(ylo, s.y[i]);
      yhi = std::max(yhi, s.y[i]);
    }
  }
  std::vector<Tick> xt = axis_ticks(xlo, xhi, o.x_scale, 7);
  std::vector<Tick> yt = axis_ticks(ylo, yhi, o.y_scale, 6);

  auto tx = [&](double x) {
    double f = o.x_scale == Scale::Log ? (std::log10(x) - std::log10(xlo)) /
                                             (std::log10(xhi) - std::log10(xlo))
                                       : (x - xlo) / (xhi - xlo);
    return left + f * pw;
  };
  auto ty = [&](double y) {
    double f = o.y_scale == Scale::Log ? (std::log10(y) - std::log10(ylo)) /
                                             (std::log10(yhi) - std::log10(ylo))
                                       : (y - ylo) / (yhi - ylo);
    return top + (1.0 - f) * ph;
  };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << o.width << "\" height=\""
      << o.height << "\" viewBox=\"0 0 " << o.width << ' ' << o.height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect x=\"0\" y=\"0\" width=\"" << o.width << "\" height=\"" << o.height
      << "\" fill=\"white\"/>\n";
  if (!o.title.empty()) {
    svg << "<text class=\"title\" x=\"" << px(W / 2) << "\" y=\"28\" text-anchor=\"middle\" "
        << "font-size=\"16\">" << escape_xml(o.title) << "</text>\n";
  }

  // Grid, ticks and tick labels.
  svg << "<g class=\"x-ticks\">\n";
  for (const Tick& t : xt) {
    double X = tx(t.value);
    svg << "<line class=\"grid\" x1=\"" << px(X) << "\" y1=\"" << px(top) << "\" x2=\"" << px(X)
        << "\" y2=\"" << px(top + ph) << "\" stroke=\"#e6e6e6\"/>"
        << "<line class=\"tick\" x1=\"" << px(X) << "\" y1=\"" << px(top + ph) << "\" x2=\""
        << px(X) << "\" y2=\"" << px(top + ph + 5) << "\" stroke=\"black\"/>"
        << "<text class=\"tick-label\" x=\"" << px(X) << "\" y=\"" << px(top + ph + 19)
        << "\" text-anchor=\"middle\">" << escape_xml(t.label) << "</text>\n";
  }
  svg << "</g>\n<g class=\"y-ticks\">\n";
  for (const Tick& t : yt) {
    double Y = ty(t.value);
    svg << "<line class=\"grid\" x1=\"" << px(left) << "\" y1=\"" << px(Y) << "\" x2=\""
        << px(left + pw) << "\" y2=\"" << px(Y) << "\" stroke=\"#e6e6e6\"/>"
        << "<line class=\"tick\" x1=\"" << px(left - 5) << "\" y1=\"" << px(Y) << "\" x2=\""
        << px(left) << "\" y2=\"" << px(Y) << "\" stroke=\"black\"/>"
        << "<text class=\"tick-label\" x=\"" << px(left - 8) << "\" y=\"" << px(Y + 4)
        << "\" text-anchor=\"end\">" << escape_xml(t.label) << "</text>\n";
  }
  svg << "</g>\n";

  // Axes and their labels.
  svg << "<rect class=\"axes\" x=\"" << px(left) << "\" y=\"" << px(top) << "\" width=\""
      << px(pw) << "\" height=\"" << px(ph) << "\" fill=\"none\" stroke=\"black\"/>\n";
  if (!o.x_label.empty()) {
    svg << "<text class=\"x-label\" x=\"" << px(left + pw / 2) << "\" y=\"" << px(H - 16)
        << "\" text-anchor=\"middle\" font-size=\"13\">" << escape_xml(o.x_label)
        << "</text>\n";
  }
  if (!o.y_label.empty()) {
    svg << "<text class=\"y-label\" x=\"18\" y=\"" << px(top + ph / 2)
        << "\" text-anchor=\"middle\" font-size=\"13\" transform=\"rotate(-90 18 "
        << px(top + ph / 2) << ")\">" << escape_xml(o.y_label) << "</text>\n";
  }

  // The series, clipped to the plot area; unusable points break the line.
  svg << "<defs><clipPath id=\"plot-area\"><rect x=\"" << px(left) << "\" y=\"" << px(top)
      << "\" width=\"" << px(pw) << "\" height=\"" << px(ph) << "\"/></clipPath></defs>\n";
  svg << "<g clip-path=\"url(#plot-area)\">\n";
  for (const Series& s : series_) {
    std::string d;
    bool pen_down = false;
    std::vector<std::pair<double, double>> dots;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      double x = s.x[i];
      if (std::isnan(x)) x = i == 0 ? xlo : xhi;  // a horizontal reference line
      if (!usable(x, o.x_scale) || !usable(s.y[i], o.y_scale)) {
        pen_down = false;
        continue;
      }
      double X = tx(x), Y = ty(s.y[i]);
      d += (pen_down ? " L" : (d.empty() ? "M" : " M")) + px(X) + ',' + px(Y);
      pen_down = true;
      dots.emplace_back(X, Y);
    }
    if (d.empty()) continue;
    svg << "<path class=\"series\" data-label=\"" << escape_xml(s.label) << "\" d=\"" << d
        << "\" fill=\"none\" stroke=\"" << escape_xml(s.color) << "\" stroke-width=\"1.8\""
        << (s.dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>\n";
    if (s.markers) {
      for (auto [X, Y] : dots) {
        svg << "<circle cx=\"" << px(X) << "\" cy=\"" << px(Y) << "\" r=\"2.8\" fill=\""
            << escape_xml(s.color) << "\"/>\n";
      }
    }
  }
  svg << "</g>\n";

  // Legend, top right inside the plot area.
  std::vector<const Series*> listed;
  for (const Series& s : series_)
    if (!s.label.empty()) listed.push_back(&s);
  if (!listed.empty()) {
    std::size_t longest = 0;
    for (const Series* s : listed) longest = std::max(longest, s->label.size());
    double lw = 36 + 7.0 * double(longest), lh = 8 + 18.0 * double(listed.size());
    double lx = left + pw - lw - 8, ly = top + 8;
    svg << "<g class=\"legend\">\n<rect x=\"" << px(lx) << "\" y=\"" << px(ly) << "\" width=\""
        << px(lw) << "\" height=\"" << px(lh)
        << "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#bbbbbb\"/>\n";
    for (std::size_t i = 0; i < listed.size(); ++i) {
      double Y = ly + 14 + 18.0 * double(i);
      svg << "<line x1=\"" << px(lx + 6) << "\" y1=\"" << px(Y - 4) << "\" x2=\""
          << px(lx + 28) << "\" y2=\"" << px(Y - 4) << "\" stroke=\""
          << escape_xml(listed[i]->color) << "\" stroke-width=\"2\""
          << (listed[i]->dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>"
          << "<text x=\"" << px(lx + 32) << "\" y=\"" << px(Y) << "\">"
          << escape_xml(listed[i]->label) << "</text>\n";
    }
    svg << "</g>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

void LinePlot::write(const std::string& path) const { write_file_atomic(path, to_svg()); }

void write_file_atomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    }
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw std::runtime_error("cannot write " + path + ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
  }
}

}  // namespace tapegrad::plot
