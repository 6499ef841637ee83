#pragma once
// Attention patterns as an SVG heat map: one panel per head, side by side, each a T x T
// grid (query rows, key columns) shaded from white (0) to dark blue (1), token labels on
// both axes. One layer per file.
#include <string>
#include <vector>

namespace tapegrad::plot {

struct HeatmapPanel {
  std::string title;            // "head 3"
  std::vector<double> weights;  // rows x cols, row-major: weights[i * cols + j] of query i, key j
};

struct HeatmapOptions {
  std::string title;
  std::vector<std::string> row_labels, col_labels;  // one per query / key (the tokens)
  double cell = 14;                                  // pixels per cell
};

// Throws std::invalid_argument when a panel's size is not rows x cols of the labels.
std::string heatmap_svg(const std::vector<HeatmapPanel>& panels, const HeatmapOptions& options);

}  // namespace tapegrad::plot
