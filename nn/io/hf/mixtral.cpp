// Mixtral (MixtralForCausalLM): Mistral with a mixture of experts in every layer
// (block_sparse_moe: the router `gate`, experts.e.w1/w3/w2 the expert's gate/up/down), the
// top k always renormalised.
#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// Named, not anonymous: the family files compile together in one unity batch.
namespace mixtral_parts {

const DecoderDefaults kDefaults = {32000, 4096, 14336, 4096 * 32, 8, 1e-5, 1e6, std::nullopt,
                                   32, 32, std::nullopt, false};

std::vector<ConfigKey> expert_keys() {
  ConfigKey experts = size_key("num_local_experts", &Config::experts, 8);
  experts.read = [](ConfigReader& r, Config& c) {
    c.experts = r.size("num_local_experts", 8);
    if (c.experts == 0) r.refuse("num_local_experts must be positive (a mixtral has experts)");
  };
  return {experts, size_key("num_experts_per_tok", &Config::experts_top_k, 2),
          // MixtralSparseMoeBlock always renormalises the top k
          always([](Config& c) {
            c.moe_renorm = true;
            c.moe_every = 1;
          }),
          real_key("router_aux_loss_coef", &Config::moe_aux_coef, 0.001),
          always([](Config& c) { c.moe_z_coef = 0.0; })};  // transformers has no router z-loss
}

}  // namespace mixtral_parts

const Family& mixtral_family() {
  static const Family family = [] {
    using namespace mixtral_parts;
    Family f;
    f.model_type = "mixtral";
    f.causal_lm_class = "MixtralForCausalLM";
    f.preset = [] {
      TransformerConfig c = rope_preset();
      c.experts = 8;
      c.experts_top_k = 2;
      c.moe_renorm = true;
      return c;
    };
    f.is_preset = true;
    f.finish_preset = group_kv_heads;
    f.keys = concat<ConfigKey>({decoder_size_keys(kDefaults), {silu_key()},
                                decoder_position_keys(kDefaults),
                                {sliding_window_key(kDefaults), rope_scaling_key()}, expert_keys()});
    f.harmless_keys = {"attention_dropout", "output_router_logits", "router_jitter_noise"};
    f.requirements = mistral_requirements(true);
    f.claims = [](const Config& c) { return c.positions == PositionKind::rope && c.experts > 0; };
    f.biases = [](const Config&) { return FileBiases{}; };
    f.tensors = decoder_tensor_names();
    f.tensors.router = "block_sparse_moe.gate";
    f.tensors.experts = "block_sparse_moe.experts.";
    f.tensors.expert_gate = "w1";
    f.tensors.expert_up = "w3";
    f.tensors.expert_down = "w2";
    return f;
  }();
  return family;
}

}  // namespace tapegrad::hf

namespace tapegrad {

TransformerConfig mixtral_preset() { return hf::mixtral_family().preset(); }

}  // namespace tapegrad
