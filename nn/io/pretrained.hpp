#pragma once
// Hugging Face model folders in and out: config.json + model.safetensors (or shards with
// model.safetensors.index.json), for the model_types of nn/io/hf/registry.cpp.
// docs/INTEROP.md lists what maps to what and what is refused.
//
// Import maps every config.json field that changes the numbers onto a TransformerConfig or
// refuses it by name; the fields that do not (bos_token_id, torch_dtype, ...) are kept as
// JSON text so that an export of the same model writes them back. Export picks the
// model_type the architecture is (or the kept one when the model still is that) and
// refuses, naming the field, a model no supported model_type can express.
#include <string>

#include "nn/config.hpp"
#include "nn/io/checkpoint_error.hpp"
#include "nn/io/hf_config.hpp"   // HfModelConfig, hf_config_from_json, hf_config_to_json
#include "nn/transformer.hpp"

namespace tapegrad {

// True when `path` is a directory holding a config.json (what programs take for a folder).
bool is_pretrained_folder(const std::string& path);

template <class T>
struct PretrainedModel {
  Transformer<T> model;
  std::string model_type;
  std::string kept_json;
};

// The folder's model in T (BF16/F16/F32/F64 weights converted). CheckpointError naming the
// file and the tensor for a tensor the architecture does not expect, one it needs that is
// missing, or a wrong shape, and (unless allow_nonfinite) for a NaN or Inf value, naming
// the element too; SafetensorsError for a damaged file.
template <class T>
PretrainedModel<T> load_pretrained(const std::string& dir, bool allow_nonfinite = false);

// config.json, generation_config.json and model.safetensors (F32 for float, F64 for double;
// a tied head written once) into `dir`, created if missing. CheckpointError naming the field
// when the model cannot be expressed (nothing is written then).
template <class T>
void save_pretrained(const Transformer<T>& model, const std::string& dir,
                     const std::string& kept_json = "");

extern template struct PretrainedModel<float>;
extern template struct PretrainedModel<double>;

}  // namespace tapegrad
