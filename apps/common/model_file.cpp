#include "apps/common/model_file.hpp"

#include <fmt/format.h>

#include "apps/common/run_options.hpp"
#include "nn/io/checkpoint.hpp"  // nonfinite_value

namespace tapegrad::apps {

void add_allow_nonfinite_option(CLI::App& app, bool& allow, const std::string& group) {
  app.add_flag("--allow-nonfinite", allow, "load a model whose weights hold NaN or Inf (an error "
               "otherwise)")
      ->group(group);
}

void require_finite_parameters(const Module<float>& model, const std::string& label, bool allow) {
  if (allow) return;
  for (const NamedParameter<float>& p : model.named_parameters()) {
    const std::string why = nonfinite_value(p.name, p.tensor.shape_string(),
                                            p.tensor.value().data(), p.tensor.size());
    if (!why.empty())
      throw UsageError(fmt::format("{}: parameter {} (--allow-nonfinite loads it anyway)", label, why));
  }
}

}  // namespace tapegrad::apps
