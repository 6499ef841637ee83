#include "examples/common/model_file.hpp"

#include <cmath>

#include <fmt/format.h>

#include "examples/common/run_options.hpp"

namespace tapegrad::examples {

void add_allow_nonfinite_option(CLI::App& app, bool& allow, const std::string& group) {
  app.add_flag("--allow-nonfinite", allow, "load a model whose weights hold NaN or Inf (an error "
               "otherwise)")
      ->group(group);
}

void require_finite_parameters(const Module<float>& model, const std::string& label, bool allow) {
  if (allow) return;
  for (const NamedParameter<float>& p : model.named_parameters()) {
    const float* x = p.tensor.value().data();
    for (std::size_t i = 0; i < p.tensor.size(); ++i)
      if (!std::isfinite(x[i]))
        throw UsageError(fmt::format("{}: parameter '{}' {} holds {} at element {} "
                                     "(--allow-nonfinite loads it anyway)", label, p.name,
                                     p.tensor.shape_string(), x[i], i));
  }
}

}  // namespace tapegrad::examples
