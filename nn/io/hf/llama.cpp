// Llama (LlamaForCausalLM): RoPE, RMSNorm, SwiGLU, grouped K/V heads; one switch for the
// attention's biases and one for the feed-forward's. It is the type of every model no other
// type claims.
#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// Named, not anonymous: the family files compile together in one unity batch.
namespace llama_parts {

const DecoderDefaults kDefaults = {32000, 4096, 11008, 2048, std::nullopt, 1e-6, 10000.0,
                                   std::nullopt, 32, 32, std::nullopt, false};

}  // namespace llama_parts

const Family& llama_family() {
  static const Family family = [] {
    using namespace llama_parts;
    Family f;
    f.model_type = "llama";
    f.causal_lm_class = "LlamaForCausalLM";
    f.preset = rope_preset;
    f.is_preset = true;
    f.finish_preset = group_kv_heads;
    f.keys = concat<ConfigKey>({decoder_size_keys(kDefaults), {silu_key()},
                                decoder_position_keys(kDefaults),
                                llama_bias_and_scaling_keys()});
    f.harmless_keys = {"attention_dropout", "pretraining_tp"};
    f.requirements = concat<Requirement>(
        {parts({}),
         llama_parts_requirements(),
         rope_requirements(), expert_requirements(false),
         {need_with_hint("window", [](const Config& c) { return c.window == 0; },
                         "has no sliding window")}});
    f.biases = llama_biases;
    f.tensors = decoder_tensor_names();
    return f;
  }();
  return family;
}

}  // namespace tapegrad::hf

namespace tapegrad {

TransformerConfig llama_preset() { return hf::llama_family().preset(); }

}  // namespace tapegrad
