#pragma once
// One Hugging Face model family (a config.json `model_type`), described as data: its class,
// its base preset, the config.json keys as rows read on import and written on export, the
// keys that change nothing, the parts a model must have to be written as this type, and the
// names and layouts of its tensors. Import (hf_config.cpp), export (hf_config_export.cpp)
// and the tensor map (hf_tensor_map.cpp, bound to a model by hf_weights.cpp) are generic
// code that walks these descriptors; each family is one file in this folder, listed once in
// registry.cpp.
//
// Each family's facts are transformers 4.49's (configuration_<type>.py, modeling_<type>.py).
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/config.hpp"
#include "nn/io/hf/config_reader.hpp"

namespace tapegrad::hf {

using json = nlohmann::json;

// One config.json key, both ways. `read` sets the configuration from the file (the key's
// class default when the file leaves it out) or refuses the value; `write` gives the value
// an export writes (no function: the key is read only, as partial_rotary_factor, which
// exists only to be refused). A row without a key sets what the type always has.
struct ConfigKey {
  std::string key;
  std::function<void(ConfigReader&, TransformerConfig&)> read;
  std::function<json(const TransformerConfig&, const json& kept)> write;
};

// One thing a model must be to be written as the type, checked in the family's order:
// "<field>=<value>: <type> <says>" when `holds` is false for the model.
struct Requirement {
  std::function<std::string(const TransformerConfig&)> field;  // the field the refusal names
  std::function<bool(const TransformerConfig&)> holds;
  std::string says;  // "has LayerNorm", "'s feed-forward is GELU"
  // A part some types have: a model that has it, refused by a type without it, is told which
  // types have it; a model of the type that lacks it is told which of its parts made it the
  // type. `part` is the part's name ("word_embeddings_layernorm"), empty for other rows.
  std::string part;
  bool type_has_part = false;
  bool hint = false;  // the refusal names the types that accept the model's value
  // Overrides the message (a refusal that needs more than the field's value).
  std::function<std::string(const TransformerConfig&)> message;
};

// The tensors' names of one family, after the prefix; a layer's are under
// prefix + layers + "<l>.". An empty name: the family has no such tensor.
struct TensorNames {
  std::string prefix;  // "transformer." or "model.": hub files may have none
  std::string embed, positions, embed_norm, layers, final_norm;
  std::string norm1, norm1_post, norm2, norm2_post;  // tapegrad's block norms
  // Attention: one fused q|k|v tensor (`qkv`, with `fused_per_head` for BLOOM's rows per head
  // [q k v] instead of GPT-2's columns [q | k | v]), or q, k and v apart.
  std::string qkv, q, k, v, o;
  bool fused_per_head = false;
  // Feed-forward: GELU's two (fc, proj) or the gated three (gate, up, down).
  std::string fc, proj, gate, up, down;
  // Mixture of experts: the router and each expert's gate, up and down under experts + "<e>.".
  std::string router, experts, expert_gate, expert_up, expert_down;
  bool conv1d = false;  // GPT-2's Conv1D holds (in, out) as tapegrad does; nn.Linear (out, in)
  // Names that end so carry no weight of the model and are dropped on import (GPT-2's mask
  // buffers, the RoPE frequencies older files saved).
  std::vector<std::string> dropped_suffixes;
};

// Which biases a file of the type holds for a model (a bias the model lacks is written as
// zeros; one the file lacks the model must not have).
struct FileBiases {
  bool qkv = false, out = false, mlp = false;
};

struct Family {
  std::string model_type;       // config.json's model_type
  std::string causal_lm_class;  // what `architectures` names
  // The family's base model: the native preset (--arch, Config.preset) when `is_preset`, and
  // what an import starts from before the keys are read.
  std::function<TransformerConfig()> preset;
  bool is_preset = false;
  // What a native preset derives from the sizes the user gave (`given` says which fields
  // were given): grouped K/V heads, a window. May be empty.
  std::function<void(TransformerConfig&, const std::function<bool(const std::string&)>& given)>
      finish_preset;
  std::vector<ConfigKey> keys;
  std::set<std::string> harmless_keys;  // keys that change nothing at inference, kept
  std::vector<Requirement> requirements;
  // The model is naturally this type (the registry's order decides between types that claim
  // the same model); no function: the type of every model no other type claims.
  std::function<bool(const TransformerConfig&)> claims;
  std::function<FileBiases(const TransformerConfig&)> biases;
  TensorNames tensors;
};

}  // namespace tapegrad::hf
