#pragma once
// The model's command-line options, derived from the one list of fields in nn/config.hpp:
// `--arch gpt2|llama` picks a preset, and every field is an option of its own on top of it,
// named after the field (d_model -> --d-model; flags as --qk-norm / --no-qk-norm), with
// `--no-scale` for attention_scale = 1. Every program that builds a model uses these, so
// the options are the same everywhere.
#include <map>
#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "nn/config.hpp"

namespace tapegrad::apps {

class ConfigOptions {
 public:
  // Adds the options to `app` in `group`, leaving out the fields in `skip` (a program
  // whose task fixes vocab, or that has its own --seed).
  ConfigOptions(CLI::App& app, const std::set<std::string>& skip, const std::string& group = "Model");

  const std::string& arch() const { return arch_; }
  // --help shows each field's default under every preset; a program whose own defaults
  // differ (per task) says so with this.
  void show_default(const std::string& field, const std::string& text);
  bool given(const std::string& field) const;
  // The --arch preset, then `defaults` (a program's own, for fields the user did not give),
  // then every field the user gave, then what the preset derives from the sizes (llama's
  // kv_heads). Throws ShapeError "config: ..." naming the field for a bad value; the
  // result is not validated (the caller sets vocab/context first, then validates).
  TransformerConfig build(const std::map<std::string, std::string>& defaults = {}) const;
  // For a model that is loaded rather than built: UsageError naming the option and both
  // values for the first option given (--arch included) that disagrees with `fixed`;
  // options that agree are accepted, and so are the objective's (given_objective) and the
  // execution's (given_of_role(execution): a checkpoint stores none).
  // `whose`: "the checkpoint's".
  void check_agrees_with(const TransformerConfig& fixed, const std::string& whose) const;
  // The objective's fields the user gave (role objective: a loaded model may train with
  // other values), each as field_to_string spells it; ShapeError for a value that does not
  // parse.
  std::map<std::string, std::string> given_objective(const TransformerConfig& base) const;
  // The same for the fields of any role.
  std::map<std::string, std::string> given_of_role(FieldRole role, const TransformerConfig& base) const;

 private:
  CLI::App& app_;
  std::string arch_ = "gpt2";
  std::map<std::string, std::string> text_;  // field -> the text given
  std::map<std::string, bool> flags_;        // flag field -> its value when given
  bool no_scale_ = false;
  // The value the user gave for `field` (given(field) must hold), as field_to_string spells it.
  std::string given_text(const std::string& field, const TransformerConfig& base) const;
};

}  // namespace tapegrad::apps
