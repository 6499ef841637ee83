#pragma once
// Hugging Face config.json <-> TransformerConfig, for the model_types of the registry
// (nn/io/hf/registry.cpp, one descriptor per family), as transformers 4.49 reads each field
// (a field config.json leaves out takes that model_type's class default, as in transformers).
//
// Import maps every field that changes the numbers onto the configuration, or refuses it
// naming the field; the fields that do not (bos_token_id, torch_dtype, dropout rates, ...)
// and model_type itself are kept as JSON text, so that an export of the same model writes
// them back. A field tapegrad does not know is refused: it might change the numbers.
// Export picks the model_type the architecture is (the kept one when it can still express
// the model) and refuses, naming the field, a model no supported model_type expresses.
// Errors are CheckpointError (nn/io/checkpoint.hpp).
#include <optional>
#include <string>

#include "nn/config.hpp"

namespace tapegrad {

// A config.json as tapegrad reads it.
struct HfModelConfig {
  TransformerConfig config;
  std::string model_type;  // one of hf::model_types()
  std::string kept_json;   // a JSON object of the fields that do not change the numbers
};

// CheckpointError "hf config <source>: ..." naming the field for anything not mapped, not
// valid, or describing a model tapegrad cannot build.
HfModelConfig hf_config_from_json(const std::string& json_text, const std::string& source);
// The config.json text for `config` with the kept fields merged in (kept_json may be empty).
// CheckpointError "hf_config_to_json: ..." naming the field when no supported model_type
// expresses the model.
std::string hf_config_to_json(const TransformerConfig& config, const std::string& kept_json = "");

// The model_type hf_config_to_json writes for `config`: kept_json's model_type when that
// type expresses the model, else the one the architecture is. The same refusals.
std::string hf_model_type(const TransformerConfig& config, const std::string& kept_json = "");

// Why `model_type` cannot express `config` ("qk_norm=true: ..."), or nullopt when it can.
std::optional<std::string> hf_cannot_express(const TransformerConfig& config,
                                             const std::string& model_type);

}  // namespace tapegrad
