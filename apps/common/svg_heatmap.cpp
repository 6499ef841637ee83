#include "apps/common/svg_heatmap.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "apps/common/svg_plot.hpp"  // escape_xml

namespace tapegrad::plot {

namespace {

// 0 -> white, 1 -> #08306b, linearly in RGB; values outside [0, 1] are clamped.
std::string shade(double w) {
  const double t = std::clamp(w, 0.0, 1.0);
  const int r = int(255 + (8 - 255) * t), g = int(255 + (48 - 255) * t), b = int(255 + (107 - 255) * t);
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

}  // namespace

std::string heatmap_svg(const std::vector<HeatmapPanel>& panels, const HeatmapOptions& o) {
  const std::size_t rows = o.row_labels.size(), cols = o.col_labels.size();
  for (const HeatmapPanel& p : panels)
    if (p.weights.size() != rows * cols)
      throw std::invalid_argument("heatmap_svg: panel '" + p.title + "' has " +
                                  std::to_string(p.weights.size()) + " weights for " +
                                  std::to_string(rows) + " x " + std::to_string(cols) + " labels");
  const double margin = 40, gap = margin, c = o.cell;
  const double panel_w = cols * c, panel_h = rows * c;
  const double width = margin + panels.size() * (panel_w + gap), height = margin * 2 + panel_h + 20;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"" << std::max(7.0, c * 0.6) << "\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << margin << "\" y=\"16\" font-size=\"14\">" << escape_xml(o.title) << "</text>\n";
  for (std::size_t p = 0; p < panels.size(); ++p) {
    const double x0 = margin + p * (panel_w + gap), y0 = margin + 20;
    svg << "<text x=\"" << x0 << "\" y=\"" << y0 - 22 << "\">" << escape_xml(panels[p].title) << "</text>\n";
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j)
        if (panels[p].weights[i * cols + j] >= 0.005)  // white cells are the background
          svg << "<rect x=\"" << x0 + j * c << "\" y=\"" << y0 + i * c << "\" width=\"" << c
              << "\" height=\"" << c << "\" fill=\"" << shade(panels[p].weights[i * cols + j])
              << "\"/>\n";
    svg << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << panel_w << "\" height=\""
        << panel_h << "\" fill=\"none\" stroke=\"#999\"/>\n";
    for (std::size_t j = 0; j < cols; ++j)  // key labels above the columns
      svg << "<text x=\"" << x0 + (j + 0.5) * c << "\" y=\"" << y0 - 4
          << "\" text-anchor=\"middle\">" << escape_xml(o.col_labels[j]) << "</text>\n";
    for (std::size_t i = 0; i < rows; ++i)  // query labels left of the rows
      svg << "<text x=\"" << x0 - 3 << "\" y=\"" << y0 + (i + 0.75) * c
          << "\" text-anchor=\"end\">" << escape_xml(o.row_labels[i]) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace tapegrad::plot
