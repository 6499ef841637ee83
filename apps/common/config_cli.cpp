#include "apps/common/config_cli.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "apps/common/cli.hpp"
#include "apps/common/run_options.hpp"

namespace tapegrad::apps {

namespace {
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

// A field the presets set differently (norm, mlp, positions, ...): what --arch chooses.
bool preset_field(const std::string& field) {
  const std::string first = field_to_string(preset(preset_names().front()), field);
  for (const std::string& name : preset_names())
    if (field_to_string(preset(name), field) != first) return true;
  return false;
}

// The preset whose fields `c` has; empty when none.
std::string matching_preset(const TransformerConfig& c) {
  for (const std::string& name : preset_names()) {
    bool same = true;
    for (const FieldInfo& f : config_fields())
      if (preset_field(f.name) && field_to_string(c, f.name) != field_to_string(preset(name), f.name))
        same = false;
    if (same) return name;
  }
  return "";
}

}  // namespace

ConfigOptions::ConfigOptions(CLI::App& app, const std::set<std::string>& skip,
                             const std::string& group)
    : app_(app) {
  // Flags print as "--qk-norm, --no-qk-norm=off" (apps/common/cli.hpp), at the
  // program's column width.
  use_help_formatter(app, app.get_formatter()->get_column_width());
  std::vector<std::string> presets = preset_names();
  app.add_option("--arch", arch_, "model preset the other model options change (docs/TRAINING.md "
                 "describes each)")
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
  finish_preset(arch_, c, [&](const std::string& f) { return given(f); });
  // a field that changes nothing here (--rope-theta without RoPE) is refused, not ignored
  if (const auto why = inapplicable_given_field(c, [&](const std::string& f) { return given(f); },
                                                option_name))
    fail("config", "{}", *why);
  return c;
}

std::string ConfigOptions::given_text(const std::string& field, const TransformerConfig& base) const {
  TransformerConfig c = base;
  if (field == "attention_scale" && no_scale_) c.attention_scale = 1.0;
  else if (flags_.count(field)) set_field_from_string(c, field, flags_.at(field) ? "true" : "false");
  else set_field_from_string(c, field, text_.at(field));
  return field_to_string(c, field);
}

void ConfigOptions::check_agrees_with(const TransformerConfig& fixed, const std::string& whose) const {
  // --arch stands for its preset's fields, those the user did not give one by one
  for (const FieldInfo& f : config_fields()) {
    if (app_.count("--arch") == 0 || !preset_field(f.name) || given(f.name) ||
        f.role == FieldRole::objective || f.role == FieldRole::execution)
      continue;
    const std::string kept = field_to_string(fixed, f.name);
    if (field_to_string(preset(arch_), f.name) == kept) continue;
    const std::string found = matching_preset(fixed);
    throw disagreement("--arch", arch_,
                       whose + " " + (found.empty() ? std::string(f.name) + " " + kept : found));
  }
  for (const FieldInfo& f : config_fields()) {
    // a field this program left out (the trainer's own --seed) is not a model option here
    const bool option =
        text_.count(f.name) || flags_.count(f.name) || f.name == std::string("attention_scale");
    if (!option || !given(f.name) || f.role == FieldRole::objective ||
        f.role == FieldRole::execution)
      continue;
    std::string value;
    try {
      value = given_text(f.name, fixed);
    } catch (const std::exception& e) {
      throw UsageError(one_line(e.what()));
    }
    const std::string kept = field_to_string(fixed, f.name);
    if (value != kept) throw disagreement(option_name(f.name), value, whose + " " + f.name + " " + kept);
  }
}

std::map<std::string, std::string> ConfigOptions::given_objective(const TransformerConfig& base) const {
  return given_of_role(FieldRole::objective, base);
}

std::map<std::string, std::string> ConfigOptions::given_of_role(FieldRole role,
                                                                const TransformerConfig& base) const {
  std::map<std::string, std::string> out;
  for (const FieldInfo& f : config_fields())
    if (f.role == role && given(f.name)) out[f.name] = given_text(f.name, base);
  return out;
}

}  // namespace tapegrad::apps
