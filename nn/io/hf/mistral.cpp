// Mistral (MistralForCausalLM): Llama without biases, with a sliding window on every layer.
#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// Named, not anonymous: the family files compile together in one unity batch.
namespace mistral_parts {

const DecoderDefaults kDefaults = {32000, 4096, 14336, 4096 * 32, 8, 1e-6, 10000.0, 4096,
                                   32, 32, std::nullopt, false};

// "attn_qkv_bias=true: <type> has no biases", naming the first bias the model has.
Requirement no_biases() {
  return need(
      [](const Config& c) {
        return std::string(c.attn_qkv_bias ? "attn_qkv_bias" : c.attn_out_bias ? "attn_out_bias" : "mlp_bias");
      },
      [](const Config& c) { return !c.attn_qkv_bias && !c.attn_out_bias && !c.mlp_bias; },
      "has no biases");
}

}  // namespace mistral_parts

// Mistral's and Mixtral's requirements: Llama's without biases, any window.
std::vector<Requirement> mistral_requirements(bool experts) {
  return concat<Requirement>(
      {parts({}),
       llama_parts_requirements(),
       rope_requirements(), expert_requirements(experts), {mistral_parts::no_biases()}});
}

const Family& mistral_family() {
  static const Family family = [] {
    using namespace mistral_parts;
    Family f;
    f.model_type = "mistral";
    f.causal_lm_class = "MistralForCausalLM";
    f.preset = rope_preset;
    f.keys = concat<ConfigKey>({decoder_size_keys(kDefaults), {silu_key()},
                                decoder_position_keys(kDefaults),
                                {sliding_window_key(kDefaults), rope_scaling_key()}});
    f.harmless_keys = {"attention_dropout"};
    f.requirements = mistral_requirements(false);
    f.claims = [](const Config& c) { return c.positions == PositionKind::rope && c.window > 0; };
    f.biases = [](const Config&) { return FileBiases{}; };
    f.tensors = decoder_tensor_names();
    return f;
  }();
  return family;
}

}  // namespace tapegrad::hf
