// TransformerConfig -> config.json: the model_type that expresses the model (its family's
// requirements all hold), its keys written by the same rows that read them, and the kept
// fields of an imported model written back.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/errors.hpp"
#include "nn/io/checkpoint_error.hpp"
#include "nn/io/hf/family.hpp"
#include "nn/io/hf/registry.hpp"
#include "nn/io/hf/rows.hpp"
#include "nn/io/hf_config.hpp"

namespace tapegrad {

namespace {

using json = nlohmann::json;
using hf::Family;
using hf::Requirement;
constexpr const char* kOp = "hf_config_to_json";

std::string value_of(const TransformerConfig& c, const std::string& field) {
  return fmt::format("{}={}", field, field_to_string(c, field));
}

// What tapegrad builds and no supported model_type has.
std::optional<std::string> cannot_express_any(const TransformerConfig& c) {
  if (c.qk_norm) return value_of(c, "qk_norm") + ": no supported model_type has QK-norm";
  if (c.learned_temperature)
    return value_of(c, "learned_temperature") + ": no supported model_type has it";
  if (c.mlp == MlpKind::none)
    return value_of(c, "mlp") + ": every supported model_type has a feed-forward";
  if (c.positions == PositionKind::none)
    return value_of(c, "positions") + ": every supported model_type has positions (learned, "
           "RoPE or ALiBi)";
  return std::nullopt;
}

// Whether `family` accepts the model's value of `field`: none of its requirements on that
// field fails.
bool accepts(const Family& family, const TransformerConfig& c, const std::string& field) {
  for (const Requirement& r : family.requirements)
    if (r.field(c) == field && !r.holds(c)) return false;
  return true;
}

// "a", "a and b", "a, b and c".
std::string joined(const std::vector<std::string>& names) {
  if (names.size() == 1) return names[0];
  std::vector<std::string> head(names.begin(), names.end() - 1);
  return fmt::format("{} and {}", fmt::join(head, ", "), names.back());
}

// The types other than `family` that accept the model's value of `field`: "(bloom has)".
std::string hint(const Family& family, const TransformerConfig& c, const std::string& field) {
  std::vector<std::string> holders;
  for (const Family* other : hf::families())
    if (other != &family && accepts(*other, c, field)) holders.push_back(other->model_type);
  if (holders.empty()) return "";
  return " (" + joined(holders) + (holders.size() == 1 ? " has)" : " have)");
}

// The first of the model's fields that, of the supported types, only `family` accepts: what
// made the model that type.
std::optional<std::string> only_family_accepts(const Family& family, const TransformerConfig& c) {
  for (const Requirement& r : family.requirements) {
    if (!r.holds(c)) continue;
    const std::string field = r.field(c);
    bool unique = true;
    for (const Family* other : hf::families())
      if (other != &family && accepts(*other, c, field)) unique = false;
    if (unique) return field;
  }
  return std::nullopt;
}

std::string refusal(const Family& family, const Requirement& r, const TransformerConfig& c) {
  if (r.message) return r.message(c);
  const std::string field = r.field(c), type = family.model_type;
  // a part the type has and the model lacks: the model's own field is named first, then what
  // the type would also need
  if (r.type_has_part)
    if (const auto chosen = only_family_accepts(family, c))
      return value_of(c, *chosen) + ": of the supported model_types only " + type +
             " has it, and " + type + " also has " + r.part + ", which this model has not (" +
             value_of(c, field) + ")";
  std::string text = value_of(c, field) + ": " + type + (r.says.front() == '\'' ? "" : " ") + r.says;
  if (r.hint) text += hint(family, c, field);
  return text;
}

std::optional<std::string> cannot_express(const Family& family, const TransformerConfig& c) {
  for (const Requirement& r : family.requirements)
    if (!r.holds(c)) return refusal(family, r, c);
  return std::nullopt;
}

// The type the architecture is, before any kept type is considered.
const Family& natural_family(const TransformerConfig& c) {
  const Family* fallback = nullptr;
  for (const Family* f : hf::families()) {
    if (!f->claims) fallback = f;
    else if (f->claims(c)) return *f;
  }
  return *fallback;
}

json parse_kept(const std::string& kept_json) {
  if (kept_json.empty()) return json::object();
  json kept;
  try {
    kept = json::parse(kept_json);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number no double holds
    fail_with<CheckpointError>(kOp, "kept_json is not valid JSON ({})", e.what());
  }
  if (!kept.is_object()) fail_with<CheckpointError>(kOp, "kept_json is not a JSON object");
  return kept;
}

std::string kept_type(const json& kept) {
  const auto it = kept.find("model_type");
  return it != kept.end() && it->is_string() ? it->get<std::string>() : "";
}

// The kept fields that go into a file of `family`: the common ones always, a type's own only
// into a file of that type, and none a key row writes. Any other field is refused: it was
// not kept by an import.
json kept_for(const json& kept, const Family& family) {
  const std::string from = kept_type(kept);
  const Family* from_family = hf::find_family(from);
  json out = json::object();
  for (const auto& item : kept.items()) {
    const std::string& key = item.key();
    if (key == "model_type") continue;
    if (key == "architectures" && from_family != &family) continue;
    if (hf::is_harmless_common_key(key)) {
      out[key] = item.value();
    } else if (from_family && from_family->harmless_keys.count(key)) {
      if (from_family == &family) out[key] = item.value();
    } else if (!from_family || std::none_of(from_family->keys.begin(), from_family->keys.end(),
                                            [&](const hf::ConfigKey& k) { return k.key == key; })) {
      fail_with<CheckpointError>(kOp, "kept field '{}' is not one that leaves the numbers "
                                 "unchanged for model_type {}", key,
                                 from.empty() ? family.model_type : from);
    }
  }
  if (!out.contains("architectures")) out["architectures"] = json::array({family.causal_lm_class});
  return out;
}

}  // namespace

std::optional<std::string> hf_cannot_express(const TransformerConfig& config,
                                             const std::string& model_type) {
  const Family* family = hf::find_family(model_type);
  if (!family)
    return "model_type '" + model_type + "' is not one tapegrad writes (" +
           fmt::format("{}", fmt::join(hf::model_types(), ", ")) + ")";
  if (auto why = cannot_express_any(config)) return why;
  return cannot_express(*family, config);
}

std::string hf_model_type(const TransformerConfig& config, const std::string& kept_json) {
  try {
    config.validate();
  } catch (const ShapeError& e) {
    fail_with<CheckpointError>(kOp, "the configuration is not valid: {}", e.what());
  }
  const std::string kept = kept_type(parse_kept(kept_json));
  if (!kept.empty() && hf::is_model_type(kept) && !hf_cannot_express(config, kept)) return kept;
  if (auto why = cannot_express_any(config)) fail_with<CheckpointError>(kOp, "{}", *why);
  const Family& family = natural_family(config);
  if (auto why = cannot_express(family, config)) fail_with<CheckpointError>(kOp, "{}", *why);
  return family.model_type;
}

std::string hf_config_to_json(const TransformerConfig& config, const std::string& kept_json) {
  const Family& family = *hf::find_family(hf_model_type(config, kept_json));
  const json kept = parse_kept(kept_json);
  json out = kept_for(kept, family);
  out["model_type"] = family.model_type;
  for (const hf::ConfigKey& key : family.keys)
    if (key.write) out[key.key] = key.write(config, kept);
  return out.dump(2) + "\n";
}

}  // namespace tapegrad
