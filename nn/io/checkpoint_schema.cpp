#include "nn/io/checkpoint_schema.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "nn/io/checkpoint.hpp"
#include "nn/io/training_state.hpp"

namespace tapegrad {

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::vector<std::string> q;
  for (const std::string& n : names) q.push_back(quoted(n));
  return "[" + fmt::format("{}", fmt::join(q, ", ")) + "]";
}

// The field's value in c as a JSON value of its kind (a choice by its name, a default
// attention_scale as null, the seed as the unsigned number it is).
std::string json_value(const FieldInfo& f, const TransformerConfig& c) {
  switch (f.kind) {
    case FieldInfo::Kind::real:
      return fmt::format("{}", field_to_double(c, f.name));
    case FieldInfo::Kind::optional_real: {
      const double v = field_to_double(c, f.name);
      return std::isnan(v) ? "null" : fmt::format("{}", v);
    }
    case FieldInfo::Kind::flag:
      return field_to_int64(c, f.name) ? "true" : "false";
    case FieldInfo::Kind::choice:
      return quoted(f.choices.at(static_cast<std::size_t>(field_to_int64(c, f.name))));
    case FieldInfo::Kind::seed: {
      const std::int64_t bits = field_to_int64(c, f.name);
      std::uint64_t u;
      std::memcpy(&u, &bits, sizeof u);
      return std::to_string(u);
    }
    case FieldInfo::Kind::size:
      break;
  }
  return std::to_string(field_to_int64(c, f.name));
}

const char* kind_name(FieldInfo::Kind k) {
  switch (k) {
    case FieldInfo::Kind::size: return "size";
    case FieldInfo::Kind::real: return "real";
    case FieldInfo::Kind::flag: return "flag";
    case FieldInfo::Kind::choice: return "choice";
    case FieldInfo::Kind::optional_real: return "optional_real";
    case FieldInfo::Kind::seed: return "seed";
  }
  return "";
}

const char* role_name(FieldRole r) {
  switch (r) {
    case FieldRole::architecture: return "architecture";
    case FieldRole::objective: return "objective";
    case FieldRole::initialisation: return "initialisation";
    case FieldRole::execution: return "execution";
  }
  return "";
}

// The training state's entries a reader outside C++ must interpret (the rest are parameters'
// moments, a generator's words and the caller's settings).
std::string training_json() {
  return fmt::format(
      "{{\"prefix\": {}, \"format\": {}, \"entries\": [\n"
      "    {{\"name\": \"precision\", \"kind\": \"choice\", \"since\": {}, \"old\": {}, "
      "\"choices\": {}, \"doc\": \"the float32 matrix products' precision the run trained with\"}}\n  ]}}",
      quoted(kTrainingPrefix), kTrainingFormat, kPrecisionSince,
      quoted(matmul_precision_name(MatmulPrecision::f32)), quoted_list(matmul_precision_names()));
}

}  // namespace

std::string checkpoint_schema_json() {
  const TransformerConfig defaults, older = config_before_fields();
  std::string fields;
  for (const FieldInfo& f : config_fields())
    fields += fmt::format(
        "{}    {{\"name\": {}, \"kind\": \"{}\", \"role\": \"{}\", \"since\": {}, \"default\": {}, "
        "\"old\": {}, \"choices\": {}, \"doc\": {}}}",
        fields.empty() ? "" : ",\n", quoted(f.name), kind_name(f.kind),
        role_name(f.role), f.since,
        json_value(f, defaults), json_value(f, older), quoted_list(f.choices), quoted(f.doc));
  const std::vector<std::string> extras(kConfigExtras.begin(), kConfigExtras.end());
  return fmt::format(
      "{{\n  \"generated_by\": \"build/tools/checkpoint_schema > tools/checkpoint_schema.json\",\n"
      "  \"format\": {},\n  \"prefix\": {},\n  \"extras\": {},\n  \"fields\": [\n{}\n  ],\n"
      "  \"training\": {}\n}}\n",
      kCheckpointFormat, quoted(kConfigPrefix), quoted_list(extras), fields, training_json());
}

}  // namespace tapegrad
