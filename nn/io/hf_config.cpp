// config.json -> TransformerConfig: the family's preset, then each of its keys read in order
// (nn/io/hf/<type>.cpp); what no key read is kept when it changes nothing, else refused.
// The way back is hf_config_export.cpp.
#include "nn/io/hf_config.hpp"

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/errors.hpp"
#include "nn/io/checkpoint_error.hpp"
#include "nn/io/hf/family.hpp"
#include "nn/io/hf/registry.hpp"
#include "nn/io/hf/rows.hpp"

namespace tapegrad {

namespace {

using json = nlohmann::json;
using hf::ConfigReader;

// Generic PretrainedConfig keys that change the model unless they hold their default.
void refuse_changed_generic_keys(ConfigReader& r) {
  if (const json* p = r.get("pruned_heads"); p && !(p->is_object() && p->empty()))
    r.refuse("pruned_heads={} is not supported (every head of every layer is kept)", p->dump());
  for (const char* key : {"add_cross_attention", "is_encoder_decoder"})
    if (r.flag(key, false)) r.refuse("{}=true is not supported (a decoder-only model)", key);
  if (r.get("quantization_config")) r.refuse("quantization_config is not supported");
  if (r.get("cross_attention_hidden_size"))
    r.refuse("cross_attention_hidden_size is not supported (no cross-attention)");
}

// The fields no key read: kept when harmless, refused otherwise; and those read but kept as
// the file has them.
json kept_fields(const ConfigReader& r, const hf::Family& family) {
  json kept = json::object();
  kept["model_type"] = r.type();
  for (const auto& item : r.all().items()) {
    const std::string& key = item.key();
    if (r.was_read(key)) continue;
    if (!hf::is_harmless_common_key(key) && !family.harmless_keys.count(key))
      r.refuse("field '{}' is not one tapegrad knows for model_type {} (it may change the "
               "numbers)", key, r.type());
    kept[key] = item.value();
  }
  for (const std::string& key : r.kept_as_is()) kept[key] = r.all().at(key);
  return kept;
}

json parse_object(const std::string& text, const std::string& op) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number no double holds
    fail_with<CheckpointError>(op, "not valid JSON ({})", e.what());
  }
  if (!j.is_object()) fail_with<CheckpointError>(op, "not a JSON object");
  return j;
}

}  // namespace

HfModelConfig hf_config_from_json(const std::string& json_text, const std::string& source) {
  const std::string op = "hf config " + source;
  const json j = parse_object(json_text, op);
  const auto type_it = j.find("model_type");
  if (type_it == j.end() || !type_it->is_string())
    fail_with<CheckpointError>(op, "model_type is missing (or not a string)");
  const std::string type = type_it->get<std::string>();
  const hf::Family* family = hf::find_family(type);
  if (!family)
    fail_with<CheckpointError>(op, "model_type '{}' is not supported ({} are)", type,
                               fmt::join(hf::model_types(), ", "));
  ConfigReader r(j, source, type);
  r.get("model_type");
  HfModelConfig out;
  out.model_type = type;
  out.config = family->preset();
  for (const hf::ConfigKey& key : family->keys)
    if (key.read) key.read(r, out.config);
  refuse_changed_generic_keys(r);
  out.kept_json = kept_fields(r, *family).dump();
  try {
    out.config.validate();
  } catch (const ShapeError& e) {
    r.refuse("the model it describes cannot be built: {}", e.what());
  }
  return out;
}

}  // namespace tapegrad
