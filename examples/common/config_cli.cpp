#include "examples/common/config_cli.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "examples/common/cli.hpp"

namespace tapegrad::examples {

namespace {
std::string option_name(const std::string& field) {
  std::string s = field;
  std::replace(s.begin(), s.end(), '_', '-');
  return "--" + s;
}

const char* type_name(FieldInfo::Kind kind) {
  switch (kind) {
    case FieldInfo::Kind::size:
    case FieldInfo::Kind::seed: return "UINT";
    case FieldInfo::Kind::choice: return "NAME";
    default: return "FLOAT";
  }
}

// What --help shows as a field's default: the first preset's value, then the other
// presets' where they differ, e.g. "layer (llama rms)".
std::string preset_default(const FieldInfo& f) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const std::string& name : preset_names()) {
    TransformerConfig c = preset(name);
    std::string text = field_to_string(c, f.name);
    if (f.kind == FieldInfo::Kind::flag) text = text == "true" ? "on" : "off";
    finish_preset(name, c);  // what the preset derives from the sizes (llama's kv_heads)
    const std::string derived = field_to_string(c, f.name);
    if (derived != field_to_string(preset(name), f.name)) text = derived + " at the default sizes";
    values.emplace_back(name, text);
  }
  return per_case_default(values);
}
}  // namespace

ConfigOptions::ConfigOptions(CLI::App& app, const std::set<std::string>& skip,
                             const std::string& group)
    : app_(app) {
  // Flags print as "--qk-norm, --no-qk-norm=off" (examples/common/cli.hpp), at the
  // program's column width.
  use_help_formatter(app, app.get_formatter()->get_column_width());
  std::vector<std::string> presets = preset_names();
  app.add_option("--arch", arch_, "model preset the other model options change: gpt2 "
                 "(learned positions, LayerNorm, GELU, MHA) or llama (RoPE, RMSNorm, SwiGLU, "
                 "GQA, no biases)")
      ->check(CLI::IsMember(presets))->group(group);
  for (const FieldInfo& f : config_fields()) {
    if (skip.count(f.name)) continue;
    const std::string name = option_name(f.name);
    if (f.kind == FieldInfo::Kind::flag) {
      const std::string negated = "--no-" + name.substr(2);
      app.add_flag(name + ",!" + negated, flags_[f.name], f.doc)
          ->default_str(preset_default(f))->group(group);
      continue;
    }
    std::string doc = f.doc;
    if (f.kind == FieldInfo::Kind::choice) {
      std::string names;
      for (const std::string& c : f.choices) names += (names.empty() ? "" : "|") + c;
      doc += " {" + names + "}";
    }
    app.add_option(name, text_[f.name], doc)
        ->type_name(type_name(f.kind))->default_str(preset_default(f))->group(group);
  }
  if (!skip.count("attention_scale"))
    app.add_flag("--no-scale", no_scale_, "attention_scale = 1: do not divide scores by sqrt(head_dim)")
        ->group(group);
}

void ConfigOptions::show_default(const std::string& field, const std::string& text) {
  app_.get_option(option_name(field))->default_str(text);
}

bool ConfigOptions::given(const std::string& field) const {
  if (field == "attention_scale" && app_.count("--no-scale") > 0) return true;
  const std::string name = option_name(field);
  try {
    return app_.count(name) > 0;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

TransformerConfig ConfigOptions::build(const std::map<std::string, std::string>& defaults) const {
  TransformerConfig c = preset(arch_);
  for (const auto& [field, text] : defaults)
    if (!given(field)) set_field_from_string(c, field, text);
  for (const FieldInfo& f : config_fields()) {
    if (!given(f.name)) continue;
    if (f.kind == FieldInfo::Kind::flag) set_field_from_string(c, f.name, flags_.at(f.name) ? "true" : "false");
    else if (text_.count(f.name) && app_.count(option_name(f.name)) > 0) set_field_from_string(c, f.name, text_.at(f.name));
  }
  if (no_scale_) {
    if (app_.count("--attention-scale") > 0)
      fail("config", "--no-scale and --attention-scale exclude each other");
    c.attention_scale = 1.0;
  }
  finish_preset(arch_, c);
  return c;
}

}  // namespace tapegrad::examples
