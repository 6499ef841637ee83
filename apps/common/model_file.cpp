#include "apps/common/model_file.hpp"

#include "apps/common/run_options.hpp"
#include "nn/io/finite_weights.hpp"

namespace tapegrad::apps {

void add_allow_nonfinite_option(CLI::App& app, bool& allow, const std::string& group) {
  app.add_flag("--allow-nonfinite", allow, "load a model whose weights hold NaN or Inf (an error "
               "otherwise)")
      ->group(group);
}

void require_finite_parameters(const Module<float>& model, const std::string& label, bool allow) {
  if (allow) return;
  const std::string why = nonfinite_parameter(model, "--allow-nonfinite");
  if (!why.empty()) throw UsageError(label + ": " + why);
}

}  // namespace tapegrad::apps
