#pragma once
// What nn/io/hf_config.cpp (import) and hf_config_export.cpp (export) share: the model types,
// their classes, and the config.json keys that leave the numbers unchanged (kept as they
// are), for transformers 4.49.
#include <string>
#include <vector>

namespace tapegrad::hf {

inline const std::vector<std::string>& model_types() {
  static const std::vector<std::string> types = {"gpt2",    "llama", "mistral", "mixtral",
                                                 "qwen2",   "gemma2", "bloom"};
  return types;
}
bool is_model_type(const std::string& type);
// "GPT2LMHeadModel", "LlamaForCausalLM", ...: what `architectures` names.
std::string causal_lm_class(const std::string& type);
// llama, mistral, mixtral, qwen2 and gemma2: model.layers.L.self_attn.{q,k,v,o}_proj, RoPE
bool is_llama_family(const std::string& type);

// Keys any model_type may carry that change nothing tapegrad computes: token ids, the
// dtype and version written, generation defaults, output switches.
bool is_harmless_common_key(const std::string& key);
// Keys of one model_type that change nothing at inference (dropout rates, gpt2's summary
// head of the double-heads model, Mixtral's router noise and logit output, Llama's
// pretraining_tp, Gemma 2's hidden_act and cache_implementation and BLOOM's Megatron
// switches, which 4.49's modeling code does not read).
bool is_harmless_key_of(const std::string& type, const std::string& key);

}  // namespace tapegrad::hf
