#include "apps/common/svg_plot.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <ostream>
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

namespace {

// Where the plot area sits in the picture, and how data values map onto it.
struct Frame {
  double width, height;
  double left, top, pw, ph;  // the plot area: its top-left corner and its size
  double xlo, xhi, ylo, yhi;  // the data ranges, widened to the outer ticks
  Scale x_scale, y_scale;
  std::vector<Tick> x_ticks, y_ticks;

  double x(double v) const {
    double f = x_scale == Scale::Log ? (std::log10(v) - std::log10(xlo)) /
                                           (std::log10(xhi) - std::log10(xlo))
                                     : (v - xlo) / (xhi - xlo);
    return left + f * pw;
  }
  double y(double v) const {
    double f = y_scale == Scale::Log ? (std::log10(v) - std::log10(ylo)) /
                                           (std::log10(yhi) - std::log10(ylo))
                                     : (v - ylo) / (yhi - ylo);
    return top + (1.0 - f) * ph;
  }
};

// The margins leave room for the title, the tick labels and the axis labels; the data
// ranges are over the usable points (horizontal lines count for y only).
Frame frame_of(const PlotOptions& o, const std::vector<Series>& series) {
  Frame f;
  f.width = o.width;
  f.height = o.height;
  const double right = 24, bottom = 62;
  f.left = 78;
  f.top = o.title.empty() ? 24 : 48;
  f.pw = f.width - f.left - right;
  f.ph = f.height - f.top - bottom;
  f.x_scale = o.x_scale;
  f.y_scale = o.y_scale;
  const double inf = std::numeric_limits<double>::infinity();
  f.xlo = f.ylo = inf;
  f.xhi = f.yhi = -inf;
  for (const Series& s : series) {
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      bool hline = std::isnan(s.x[i]);
      if (!usable(s.y[i], o.y_scale)) continue;
      if (!hline) {
        if (!usable(s.x[i], o.x_scale)) continue;
        f.xlo = std::min(f.xlo, s.x[i]);
        f.xhi = std::max(f.xhi, s.x[i]);
      }
      f.ylo = std::min(f.ylo, s.y[i]);
      f.yhi = std::max(f.yhi, s.y[i]);
    }
  }
  f.x_ticks = axis_ticks(f.xlo, f.xhi, o.x_scale, 7);
  f.y_ticks = axis_ticks(f.ylo, f.yhi, o.y_scale, 6);
  return f;
}

// The opening tag, a white background and the title.
void write_head(std::ostream& svg, const PlotOptions& o) {
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << o.width << "\" height=\""
      << o.height << "\" viewBox=\"0 0 " << o.width << ' ' << o.height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect x=\"0\" y=\"0\" width=\"" << o.width << "\" height=\"" << o.height
      << "\" fill=\"white\"/>\n";
  if (!o.title.empty()) {
    svg << "<text class=\"title\" x=\"" << px(double(o.width) / 2) << "\" y=\"28\" text-anchor=\"middle\" "
        << "font-size=\"16\">" << escape_xml(o.title) << "</text>\n";
  }
}

// Grid lines, ticks and tick labels of both axes.
void write_ticks(std::ostream& svg, const Frame& f) {
  const double bottom = f.top + f.ph;
  svg << "<g class=\"x-ticks\">\n";
  for (const Tick& t : f.x_ticks) {
    double X = f.x(t.value);
    svg << "<line class=\"grid\" x1=\"" << px(X) << "\" y1=\"" << px(f.top) << "\" x2=\"" << px(X)
        << "\" y2=\"" << px(bottom) << "\" stroke=\"#e6e6e6\"/>"
        << "<line class=\"tick\" x1=\"" << px(X) << "\" y1=\"" << px(bottom) << "\" x2=\""
        << px(X) << "\" y2=\"" << px(bottom + 5) << "\" stroke=\"black\"/>"
        << "<text class=\"tick-label\" x=\"" << px(X) << "\" y=\"" << px(bottom + 19)
        << "\" text-anchor=\"middle\">" << escape_xml(t.label) << "</text>\n";
  }
  svg << "</g>\n<g class=\"y-ticks\">\n";
  for (const Tick& t : f.y_ticks) {
    double Y = f.y(t.value);
    svg << "<line class=\"grid\" x1=\"" << px(f.left) << "\" y1=\"" << px(Y) << "\" x2=\""
        << px(f.left + f.pw) << "\" y2=\"" << px(Y) << "\" stroke=\"#e6e6e6\"/>"
        << "<line class=\"tick\" x1=\"" << px(f.left - 5) << "\" y1=\"" << px(Y) << "\" x2=\""
        << px(f.left) << "\" y2=\"" << px(Y) << "\" stroke=\"black\"/>"
        << "<text class=\"tick-label\" x=\"" << px(f.left - 8) << "\" y=\"" << px(Y + 4)
        << "\" text-anchor=\"end\">" << escape_xml(t.label) << "</text>\n";
  }
  svg << "</g>\n";
}

// The frame of the plot area and the axis labels.
void write_axes(std::ostream& svg, const Frame& f, const PlotOptions& o) {
  svg << "<rect class=\"axes\" x=\"" << px(f.left) << "\" y=\"" << px(f.top) << "\" width=\""
      << px(f.pw) << "\" height=\"" << px(f.ph) << "\" fill=\"none\" stroke=\"black\"/>\n";
  if (!o.x_label.empty()) {
    svg << "<text class=\"x-label\" x=\"" << px(f.left + f.pw / 2) << "\" y=\"" << px(f.height - 16)
        << "\" text-anchor=\"middle\" font-size=\"13\">" << escape_xml(o.x_label)
        << "</text>\n";
  }
  if (!o.y_label.empty()) {
    svg << "<text class=\"y-label\" x=\"18\" y=\"" << px(f.top + f.ph / 2)
        << "\" text-anchor=\"middle\" font-size=\"13\" transform=\"rotate(-90 18 "
        << px(f.top + f.ph / 2) << ")\">" << escape_xml(o.y_label) << "</text>\n";
  }
}

// One series as a path (unusable points break the line) and, if asked, a dot per point.
void write_series(std::ostream& svg, const Frame& f, const Series& s) {
  std::string d;
  bool pen_down = false;
  std::vector<std::pair<double, double>> dots;
  for (std::size_t i = 0; i < s.x.size(); ++i) {
    double x = s.x[i];
    if (std::isnan(x)) x = i == 0 ? f.xlo : f.xhi;  // a horizontal reference line
    if (!usable(x, f.x_scale) || !usable(s.y[i], f.y_scale)) {
      pen_down = false;
      continue;
    }
    double X = f.x(x), Y = f.y(s.y[i]);
    d += (pen_down ? " L" : (d.empty() ? "M" : " M")) + px(X) + ',' + px(Y);
    pen_down = true;
    dots.emplace_back(X, Y);
  }
  if (d.empty()) return;
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

// Every series, clipped to the plot area.
void write_all_series(std::ostream& svg, const Frame& f, const std::vector<Series>& series) {
  svg << "<defs><clipPath id=\"plot-area\"><rect x=\"" << px(f.left) << "\" y=\"" << px(f.top)
      << "\" width=\"" << px(f.pw) << "\" height=\"" << px(f.ph) << "\"/></clipPath></defs>\n";
  svg << "<g clip-path=\"url(#plot-area)\">\n";
  for (const Series& s : series) write_series(svg, f, s);
  svg << "</g>\n";
}

// The labelled series, top right inside the plot area.
void write_legend(std::ostream& svg, const Frame& f, const std::vector<Series>& series) {
  std::vector<const Series*> listed;
  for (const Series& s : series)
    if (!s.label.empty()) listed.push_back(&s);
  if (listed.empty()) return;
  std::size_t longest = 0;
  for (const Series* s : listed) longest = std::max(longest, s->label.size());
  double lw = 36 + 7.0 * double(longest), lh = 8 + 18.0 * double(listed.size());
  double lx = f.left + f.pw - lw - 8, ly = f.top + 8;
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

}  // namespace

std::string LinePlot::to_svg() const {
  const Frame frame = frame_of(options_, series_);
  std::ostringstream svg;
  write_head(svg, options_);
  write_ticks(svg, frame);
  write_axes(svg, frame, options_);
  write_all_series(svg, frame, series_);
  write_legend(svg, frame, series_);
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
