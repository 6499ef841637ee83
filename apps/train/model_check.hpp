#pragma once
// The pre-training gradient check: the same architecture at a small size, in double,
// has d(loss)/d(parameter) compared with central finite differences for every parameter
// tensor (a seeded sample of elements per tensor), on a real batch of the task.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "autograd/gradcheck.hpp"
#include "tasks/tasks.hpp"
#include "nn/transformer.hpp"

namespace tapegrad::train {

struct ParameterCheck {
  std::string name;
  Shape shape;
  std::size_t checked = 0;
  double max_abs_error = 0, max_rel_error = 0;
  bool passed = true;
};

struct ModelCheck {
  TransformerConfig config;  // the small double-precision model that was checked
  std::vector<ParameterCheck> rows;
  bool passed = true;
  double seconds = 0;
  double max_rel_error = 0;
};

// The small version of `config`: at most 2 heads of width 4 (d_model 4 * heads), at most 2
// layers, grouped-query sharing kept where it fits (else MQA), and every other part (vocab,
// context, norm, positions and RoPE, MLP kind and ratio, window, QK-norm, tied head,
// attention scale) as in `config`.
TransformerConfig small_config(const TransformerConfig& config);

// Checks every parameter of Transformer<double>(small) on `batch` (its loss with kIgnore).
ModelCheck check_model_gradients(const TransformerConfig& small, const tasks::Batch& batch,
                                 std::size_t max_elements = 6, std::uint64_t seed = 0);

// How the start-up gradient check went, for metrics.json.
struct GradcheckSummary {
  std::string status = "skipped";  // "skipped", "passed" or "FAILED"
  double max_rel_error = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0;
};

// The check before training: small_config(config) on `batch` (2 sequences of the task;
// a vocabulary above 4,096 cut to the ids the batch holds), 6 sampled elements per tensor; prints its table on `log` unless quiet (and always when
// it fails).
GradcheckSummary startup_gradcheck(const TransformerConfig& config, const tasks::Batch& batch,
                                   std::uint64_t seed, bool quiet, std::FILE* log);

// "parameter  shape  checked  max abs err  max rel err  pass" rows, one per tensor.
std::string format_model_check(const ModelCheck& check);

}  // namespace tapegrad::train
