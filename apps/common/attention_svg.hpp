#pragma once
// A model's attention patterns on one token sequence as SVG heat maps: one file per layer,
// the layer's heads side by side, the tokens on both axes (apps/common/svg_heatmap).
#include <cstdint>
#include <string>
#include <vector>

#include "nn/transformer.hpp"

namespace tapegrad::apps {

// Runs `tokens` (one sequence, at most the context) through the model with each layer's
// attn.pattern cached (under no-grad) and returns one SVG per layer, labels[i] naming
// token i on the axes.
std::vector<std::string> attention_pattern_svgs(Transformer<float>& model,
                                                const std::vector<std::int64_t>& tokens,
                                                const std::vector<std::string>& labels);

// A token's text as an axis label: printable ASCII as is, a space as "␣", a newline as
// "\n", other bytes as \xNN (a BPE token may hold part of a character).
std::string token_label(const std::string& bytes);

}  // namespace tapegrad::apps
