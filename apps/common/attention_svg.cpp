#include "apps/common/attention_svg.hpp"

#include <cstdio>
#include <stdexcept>

#include "autograd/tape.hpp"
#include "apps/common/svg_heatmap.hpp"

namespace tapegrad::apps {

std::vector<std::string> attention_pattern_svgs(Transformer<float>& model,
                                                const std::vector<std::int64_t>& tokens,
                                                const std::vector<std::string>& labels) {
  const std::size_t T = tokens.size(), layers = model.blocks().size();
  if (T == 0 || labels.size() != T)
    throw std::invalid_argument("attention_pattern_svgs: " + std::to_string(T) + " tokens and " +
                                std::to_string(labels.size()) + " labels");
  const std::vector<std::string> names = block_points(layers, "attn.pattern");
  Indices row = Indices::from_shape({std::size_t(1), T});
  std::copy(tokens.begin(), tokens.end(), row.begin());
  CachedRun<float> run;
  {
    NoGradGuard no_grad;
    run = run_with_cache(model, row, names);
  }
  std::vector<std::string> svgs;
  for (std::size_t l = 0; l < layers; ++l) {
    // pattern (1, heads, T, T): one panel per head
    const Tensor<float>& w = run.cache[names[l]];
    const std::size_t heads = w.shape()[1];
    std::vector<plot::HeatmapPanel> panels;
    for (std::size_t h = 0; h < heads; ++h)
      panels.push_back({"head " + std::to_string(h),
                        std::vector<double>(w.data() + h * T * T, w.data() + (h + 1) * T * T)});
    svgs.push_back(plot::heatmap_svg(
        panels, {"attention patterns, layer " + std::to_string(l) + " (rows: queries, columns: keys)",
                 labels, labels, 14}));
  }
  return svgs;
}

std::string token_label(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c == ' ') {
      out += "\u2423";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c >= 0x21 && c < 0x7f) {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace tapegrad::apps
