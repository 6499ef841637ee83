#pragma once
// The rows families are made of: config.json keys that map one field each way, and the
// requirements a model must meet to be written as a type.
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "nn/io/hf/family.hpp"

namespace tapegrad::hf {

using Config = TransformerConfig;

// ---- keys --------------------------------------------------------------------------------

// A size, a real or a flag: the field as it is, `absent` when the file leaves the key out.
ConfigKey size_key(std::string key, std::size_t Config::*field, std::size_t absent);
ConfigKey real_key(std::string key, double Config::*field, double absent);
ConfigKey flag_key(std::string key, bool Config::*field, bool absent);
// A size read into the field and written as the configuration resolves it (intermediate_size
// writes resolved_mlp_hidden()); 0, which in the field means "derive it", is refused.
ConfigKey resolved_size_key(std::string key, std::size_t Config::*field, std::size_t absent,
                            std::size_t (Config::*resolved)() const);
// A string that must be one of `accepted` ("hidden_act 'relu' is not supported (<why>)");
// written as the first of them.
ConfigKey choice_key(std::string key, std::vector<std::string> accepted, std::string absent,
                     std::string why);
// A flag tapegrad supports at one value only ("<key>=true is not supported (<why>)").
ConfigKey constant_flag_key(std::string key, bool value, std::string why);
// No key: what every model of the type is, set on import.
ConfigKey always(std::function<void(Config&)> set);


// Keys any model_type may carry that change nothing tapegrad computes: token ids, the dtype
// and version written, generation defaults, output switches.
bool is_harmless_common_key(const std::string& key);

// ---- requirements ------------------------------------------------------------------------

// "<field>=<value>: <type> <says>" unless `holds`.
Requirement need(std::string field, std::function<bool(const Config&)> holds, std::string says);
// The same, naming the field `field(config)` chooses (attention_scale or query_scale, ...).
Requirement need(std::function<std::string(const Config&)> field,
                 std::function<bool(const Config&)> holds, std::string says);
// ... and the types that accept the model's value, "(mixtral has)".
Requirement need_with_hint(std::string field, std::function<bool(const Config&)> holds,
                           std::string says);
// Always holds: marks a part the type may have ("of the supported model_types only <type>
// has it").
Requirement may_have(std::function<std::string(const Config&)> field);

// The parts only some types have, first in every family's requirements in this order.
struct Parts {
  bool embed_norm = false, embed_scale = false, post_norms = false;
  bool soft_caps = false, per_layer_windows = false, multipliers = false;  // allowed, not required
};
std::vector<Requirement> parts(const Parts& has);

// The factor on q.k: 1/sqrt(head_dim), the scale of every type but gpt2's unscaled option and
// Gemma 2's own.
bool default_scale(const Config& c);
// "attention_scale" when set, else "query_scale": the field that moved the scale.
std::string scale_field(const Config& c);

// The rows of several lists, in order.
template <class Row>
std::vector<Row> concat(std::initializer_list<std::vector<Row>> lists) {
  std::vector<Row> out;
  for (const std::vector<Row>& list : lists) out.insert(out.end(), list.begin(), list.end());
  return out;
}

}  // namespace tapegrad::hf
