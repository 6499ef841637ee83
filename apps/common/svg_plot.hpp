#pragma once
// A small, dependency-free SVG line-plot writer for the example programs: several series,
// linear or log axes, "nice" ticks with labels, axis labels, a title and a legend. The
// output is a self-contained .svg that any browser shows.
#include <string>
#include <vector>

namespace tapegrad::plot {

enum class Scale { Linear, Log };

struct Series {
  std::string label;       // shown in the legend (empty: not listed)
  std::vector<double> x;   // same length as y
  std::vector<double> y;
  std::string color;       // CSS colour; empty picks one from the palette
  bool dashed = false;
  bool markers = false;    // a dot at every point (useful for short series)
};

struct PlotOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
  Scale x_scale = Scale::Linear;
  Scale y_scale = Scale::Linear;
  int width = 760;
  int height = 460;
};

// One tick of an axis: its value and its printed label.
struct Tick {
  double value;
  std::string label;
};

// Ticks for the data range [lo, hi]: 1/2/5 x 10^k steps on a linear axis (about `target`
// of them), powers of ten on a log axis (with 2 and 5 in between when the range spans
// fewer than three decades). Also widens [lo, hi] to the outer ticks.
std::vector<Tick> axis_ticks(double& lo, double& hi, Scale scale, int target = 6);

// s with &, <, > and " written as XML entities, for text and attributes.
std::string escape_xml(const std::string& s);

// A number as a short tick label: "0.001", "2.5", "1e+06", "1200".
std::string format_number(double v);

class LinePlot {
 public:
  explicit LinePlot(PlotOptions options = {}) : options_(std::move(options)) {}

  // Points that are not finite (or not positive on a log axis) are left out and break
  // the line there. Throws std::invalid_argument if x and y differ in length.
  LinePlot& add(Series series);
  // A horizontal reference line, e.g. a target accuracy or a theory value.
  LinePlot& add_hline(double y, std::string label, std::string color = "#888888");

  std::string to_svg() const;
  // Writes to_svg() atomically (a temporary file renamed over `path`); throws
  // std::runtime_error naming the path if it cannot be written.
  void write(const std::string& path) const;

  const std::vector<Series>& series() const { return series_; }

 private:
  PlotOptions options_;
  std::vector<Series> series_;
};

// Writes `text` to `path` through a temporary file in the same directory and a rename, so
// a reader never sees a half-written file. Throws std::runtime_error on failure.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace tapegrad::plot
