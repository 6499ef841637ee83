#pragma once
// The tensors of a Hugging Face folder described from a configuration alone, without a
// model: each file tensor's name and shape and the tapegrad parameters it is made of, read
// off the parameter plan (nn/parameter_plan.hpp). The loader checks a folder's names,
// shapes and count against this description before it builds anything; hf_weights.hpp
// binds it to a built model's storage (the load and save functions). The layouts are
// docs/INTEROP.md's, listed in hf_weights.hpp.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/config.hpp"

namespace tapegrad {

namespace hf {
struct Family;
}

// Which tensors a folder of one model_type holds for a configuration.
struct HfLayout {
  std::string model_type;
  const hf::Family* family = nullptr;  // its names (nn/io/hf/family.hpp)
  bool qkv_bias = false, out_bias = false, mlp_bias = false;  // biases the file holds
  std::string prefix;  // "transformer." (GPT-2, BLOOM) or "model.": hub files may have none
};
// The layout a file of `model_type` has for a model of `config`; CheckpointError for a
// model_type not in the registry.
HfLayout hf_layout(const TransformerConfig& config, const std::string& model_type);

// The token embedding's name in a file of `layout` ("transformer.wte.weight", ...): whether
// a folder's names carry the prefix.
std::string hf_embedding_name(const HfLayout& layout);

// Names a folder of `model_type` may hold that carry no weight of the model, dropped on
// import: GPT-2's causal-mask buffers (attn.bias, attn.masked_bias) and the RoPE
// frequencies older Llama files saved (rotary_emb.inv_freq).
bool hf_dropped_buffer(const std::string& model_type, const std::string& name);

// One part of a file tensor: `cols` of its columns come from the parameter `parameter`
// (its full name, "blocks.0.attn.Wq"), or are zeros when the name is empty (a bias the
// file holds and the model lacks).
struct HfPart {
  std::string parameter;
  std::size_t cols = 0;
};

// A file tensor seen as a matrix (rows, C): the columns of its parts side by side (GPT-2's
// [q | k | v]), stored (rows, C), or (C, rows) when `transposed` (nn.Linear), or (C) for a
// vector. `heads` > 0 permutes each head's head_dim columns from tapegrad's interleaved
// RoPE pairs to HF's halves; `fused_heads` > 0 interleaves the parts per head instead of
// side by side (BLOOM's query_key_value: head h's head_dim columns of part 0, of part 1,
// ..., then head h + 1's).
struct HfMatrixLayout {
  std::size_t rows = 1;
  bool transposed = false, vector = false;
  std::size_t heads = 0, head_dim = 0;
  std::size_t fused_heads = 0;
};

// One tensor of the folder, described: its name and shape as the file holds it, and how
// its values are made of the model's parameters.
struct HfTensorSpec {
  std::string name;
  std::vector<std::size_t> shape;
  std::vector<HfPart> parts;
  HfMatrixLayout layout;
  std::size_t columns() const;  // C, the parts' columns together
  std::size_t elements() const;
};

// How many tensors a folder holds: in all, and in its smallest layer (what a folder one
// layer short lacks at least).
struct HfTensorCount {
  std::uint64_t total = 0, smallest_layer = 0;
};

// Every tensor of a folder of `layout` for a model of `config`, in the order a model's
// parameters are named; each of the model's planned parameters in exactly one of them
// (CheckpointError "parameter '...' has no place in a <type> file" otherwise).
std::vector<HfTensorSpec> hf_tensor_specs(const TransformerConfig& config, const HfLayout& layout);

// The same tensors counted without listing every layer: what is outside the layers, and one
// layer of each kind (dense, experts) times how many the model has, so a config.json of
// millions of layers costs one layer of each kind.
HfTensorCount hf_tensor_count(const TransformerConfig& config, const HfLayout& layout);

}  // namespace tapegrad
