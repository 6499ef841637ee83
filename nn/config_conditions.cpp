#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "nn/config.hpp"

namespace tapegrad {

namespace {

// What a field needs to shape the model, and what the configuration has instead.
struct Unmet {
  std::string needs, has;
};

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// "mlp=a, b or c": the feed-forward kinds that `holds` says yes to, in the list's order.
template <class Pred>
std::string mlp_kinds_where(Pred holds) {
  const std::vector<std::string> names = mlp_kind_names();
  std::vector<std::string> chosen;
  for (std::size_t k = 0; k < names.size(); ++k)
    if (holds(static_cast<MlpKind>(k))) chosen.push_back(names[k]);
  std::string text = "mlp=";
  for (std::size_t i = 0; i < chosen.size(); ++i)
    text += (i == 0 ? "" : i + 1 == chosen.size() ? " or " : ", ") + chosen[i];
  return text;
}

// The first condition `field` needs that c does not meet; nullopt when the field applies.
std::optional<Unmet> unmet_condition(const TransformerConfig& c, const std::string& field) {
  const auto is = [&](const char* f) { return std::string(f) + "=" + field_to_string(c, f); };
  const auto one_of = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (field == n) return true;
    return false;
  };
  if (starts_with(field, "rope_") && c.positions != PositionKind::rope)
    return Unmet{"positions=rope", is("positions")};
  const RopeScaling scaling = c.rope_scaling;
  if (field == "rope_factor" && scaling == RopeScaling::none)
    return Unmet{"rope_scaling=linear, ntk, llama3 or yarn", is("rope_scaling")};
  if (one_of({"rope_low_freq_factor", "rope_high_freq_factor"}) && scaling != RopeScaling::llama3)
    return Unmet{"rope_scaling=llama3", is("rope_scaling")};
  if (one_of({"rope_beta_fast", "rope_beta_slow"}) && scaling != RopeScaling::yarn)
    return Unmet{"rope_scaling=yarn", is("rope_scaling")};
  if (field == "rope_original_context" && scaling != RopeScaling::llama3 &&
      scaling != RopeScaling::yarn)
    return Unmet{"rope_scaling=llama3 or yarn", is("rope_scaling")};
  if (field == "window_pattern" && c.window == 0) return Unmet{"window > 0", is("window")};
  if (field == "window_global_first" && (c.window == 0 || c.window_pattern == 0))
    return Unmet{"window > 0 and window_pattern > 0",
                 c.window == 0 ? is("window") : is("window_pattern")};
  if (field == "query_scale" && c.attention_scale)
    return Unmet{"attention_scale=default", is("attention_scale")};
  if (field == "qk_norm_gain" && !c.qk_norm) return Unmet{"qk_norm=true", is("qk_norm")};
  if ((field == "experts_top_k" || starts_with(field, "moe_")) && c.experts == 0)
    return Unmet{"experts > 0", is("experts")};
  if (starts_with(field, "mlp_") && mlp_matrices(c.mlp) == 0)
    return Unmet{mlp_kinds_where([](MlpKind k) { return mlp_matrices(k) > 0; }), is("mlp")};
  if (field == "mlp_multiple" && !mlp_gated(c.mlp))
    return Unmet{mlp_kinds_where(mlp_gated), is("mlp")};
  if (one_of({"mlp_ratio", "mlp_multiple"}) && c.mlp_hidden != 0)
    return Unmet{"mlp_hidden=0", is("mlp_hidden")};
  return std::nullopt;
}

}  // namespace

std::optional<std::string> inapplicable_given_field(
    const TransformerConfig& c, const std::function<bool(const std::string&)>& given,
    const std::function<std::string(const std::string&)>& name) {
  for (const FieldInfo& f : config_fields()) {
    if (!given(f.name)) continue;
    if (const auto unmet = unmet_condition(c, f.name))
      return name(f.name) + " applies to " + unmet->needs + " only, not " + unmet->has;
  }
  return std::nullopt;
}

}  // namespace tapegrad
