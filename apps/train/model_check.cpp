#include "apps/train/model_check.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace tapegrad::train {

TransformerConfig small_config(const TransformerConfig& config) {
  TransformerConfig s = config;
  s.heads = std::min<std::size_t>(config.heads, 2);
  // keep the kind of sharing: MHA stays MHA, GQA keeps heads/kv_heads query heads per K/V
  // head while there are enough heads, and becomes MQA otherwise
  const std::size_t group = config.heads / config.resolved_kv_heads();
  s.kv_heads = group == 1 ? 0 : std::max<std::size_t>(1, s.heads / group);
  s.d_model = 4 * s.heads;
  s.head_dim = 0;    // d_model / heads = 4: even, as RoPE needs
  s.mlp_hidden = 0;  // from mlp_ratio
  s.layers = std::min<std::size_t>(config.layers, 2);
  return s;
}

ModelCheck check_model_gradients(const TransformerConfig& small, const tasks::Batch& batch,
                                 std::size_t max_elements, std::uint64_t seed) {
  auto start = std::chrono::steady_clock::now();
  Transformer<double> model(small);
  std::vector<Tensor<double>> params = model.parameters();
  // gradcheck perturbs the parameter tensors in place; the model reads the same handles.
  TensorFunction<double> f = [&](const std::vector<Tensor<double>>&) {
    return model.loss(batch.tokens, batch.targets, tasks::kIgnore);
  };
  GradcheckOptions options;  // double: eps 1e-6, atol 1e-5, rtol 1e-3
  options.max_elements = max_elements;
  options.seed = seed;
  GradcheckResult result = gradcheck<double>(f, params, options);

  ModelCheck out;
  out.config = small;
  const auto& named = model.named_parameters();
  for (std::size_t i = 0; i < named.size(); ++i) {
    const InputCheck& c = result.inputs.at(i);
    ParameterCheck row{named[i].name, c.shape, c.checked, c.max_abs_error, c.max_rel_error,
                       c.passed};
    out.passed = out.passed && c.passed;
    out.max_rel_error = std::max(out.max_rel_error, c.max_rel_error);
    out.rows.push_back(row);
  }
  out.passed = out.passed && result.passed;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

std::string format_model_check(const ModelCheck& check) {
  std::size_t name_w = 9;
  for (const ParameterCheck& r : check.rows) name_w = std::max(name_w, r.name.size());
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-*s  %-10s  %7s  %11s  %11s  %s\n", int(name_w), "parameter",
                "shape", "checked", "max abs err", "max rel err", "pass");
  out += line;
  for (const ParameterCheck& r : check.rows) {
    std::string shape = "(";
    for (std::size_t i = 0; i < r.shape.size(); ++i) {
      shape += (i ? "," : "") + std::to_string(r.shape[i]);
    }
    shape += ")";
    std::snprintf(line, sizeof line, "%-*s  %-10s  %7zu  %11.2e  %11.2e  %s\n", int(name_w),
                  r.name.c_str(), shape.c_str(), r.checked, r.max_abs_error, r.max_rel_error,
                  r.passed ? "yes" : "NO");
    out += line;
  }
  return out;
}

}  // namespace tapegrad::train

namespace tapegrad::train {

constexpr std::size_t kLargeVocab = 4096;

GradcheckSummary startup_gradcheck(const TransformerConfig& config, const tasks::Batch& batch,
                                   std::uint64_t seed, bool quiet, std::FILE* log) {
  TransformerConfig small = small_config(config);
  // A pretrained vocabulary (GPT-2's 50,257) would make the check a minute of head products;
  // the ids the batch uses are enough to exercise every part.
  if (small.vocab > kLargeVocab) {
    const std::int64_t top = std::max(*std::max_element(batch.tokens.begin(), batch.tokens.end()),
                                      *std::max_element(batch.targets.begin(), batch.targets.end()));
    small.vocab = std::size_t(top + 1);
  }
  const ModelCheck check = check_model_gradients(small, batch, 6, seed);
  if (!quiet || !check.passed) {
    std::fprintf(log,
                 "gradient check (double, d_model %zu, %zu heads, %zu layers, batch 2, up to "
                 "6 sampled elements per tensor, central differences eps 1e-6):\n%s",
                 small.d_model, small.heads, small.layers, format_model_check(check).c_str());
    std::fprintf(log, "gradient check %s: %zu tensors, max rel error %.2e (%.2fs)\n\n",
                 check.passed ? "passed" : "FAILED", check.rows.size(), check.max_rel_error,
                 check.seconds);
    std::fflush(log);
  }
  return {check.passed ? "passed" : "FAILED", check.max_rel_error, check.seconds};
}

}  // namespace tapegrad::train
