#include "nn/init.hpp"

#include <cmath>

namespace tapegrad {

std::string to_string(AttentionInit init) {
  return init == AttentionInit::gpt2 ? "gpt2" : "variance_preserving";
}

AttentionInit parse_attention_init(const std::string& name) {
  if (name == "gpt2") return AttentionInit::gpt2;
  if (name == "variance_preserving") return AttentionInit::variance_preserving;
  fail("parse_attention_init", "unknown attention init '{}' (expected gpt2 or "
       "variance_preserving)", name);
}

namespace init {

double residual_std(std::size_t layers) {
  if (layers == 0) fail("init::residual_std", "needs at least one layer");
  return gpt2_std / std::sqrt(2.0 * static_cast<double>(layers));
}

double attention_std(AttentionInit kind, std::size_t d_model) {
  if (d_model == 0) fail("init::attention_std", "d_model must be positive");
  return kind == AttentionInit::gpt2 ? gpt2_std : 1.0 / std::sqrt(static_cast<double>(d_model));
}

}  // namespace init
}  // namespace tapegrad
