// Gemma (GemmaForCausalLM): RMSNorm with gain 1 + w, embeddings times sqrt(hidden_size),
// GeGLU with the tanh GELU, its own head_dim (256 by default, heads * head_dim need not be
// hidden_size), one K/V head in the 2B model (MQA), a tied head.
#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// Named, not anonymous: the family files compile together in one unity batch.
namespace gemma_parts {

const DecoderDefaults kDefaults = {256000, 3072, 24576, 8192, 16, 1e-6, 10000.0, std::nullopt,
                                   28, 16, 256, true};

std::vector<ConfigKey> gemma_keys() {
  return {always([](Config& c) {
            c.norm = NormKind::gemma;
            c.embed_scale = true;
            c.mlp = MlpKind::geglu;
            c.mlp_bias = false;
          }),
          // 4.49's GemmaMLP applies ACT2FN[hidden_act]: "gelu" there is the exact GELU
          choice_key("hidden_act", {"gelu_pytorch_tanh", "gelu_new"}, "gelu_pytorch_tanh",
                     "transformers 4.49's Gemma applies hidden_act; tapegrad's GeGLU is the tanh "
                     "GELU: gelu_pytorch_tanh")};
}

}  // namespace gemma_parts

const Family& gemma_family() {
  static const Family family = [] {
    using namespace gemma_parts;
    Family f;
    f.model_type = "gemma";
    f.causal_lm_class = "GemmaForCausalLM";
    f.preset = [] {
      TransformerConfig c = rope_preset();
      c.norm = NormKind::gemma;
      c.norm_eps = 1e-6;
      c.embed_scale = true;
      c.mlp = MlpKind::geglu;
      c.tie_embeddings = true;
      return c;
    };
    f.is_preset = true;
    f.finish_preset = group_kv_heads;
    f.keys = concat<ConfigKey>({decoder_size_keys(kDefaults), gemma_keys(),
                                decoder_position_keys(kDefaults),
                                {attention_bias_key(), rope_scaling_key()}});
    // hidden_activation is read by the configuration class but not by 4.49's modeling code
    f.harmless_keys = {"attention_dropout", "hidden_activation"};
    Parts has;
    has.embed_scale = true;
    f.requirements = concat<Requirement>(
        {parts(has),
         {has_rope(),
          need("norm", [](const Config& c) { return c.norm == NormKind::gemma; },
               "has RMSNorm with gain 1 + w (gemma)"),
          need("mlp", [](const Config& c) { return c.mlp == MlpKind::geglu; }, "'s feed-forward is GeGLU"),
          need(scale_field, default_scale, "scales by 1/sqrt(head_dim)")},
         rope_requirements(), expert_requirements(false),
         {need("mlp_bias", [](const Config& c) { return !c.mlp_bias; }, "'s feed-forward has no biases"),
          need_with_hint("window", [](const Config& c) { return c.window == 0; },
                         "has no sliding window")}});
    f.claims = [](const Config& c) {
      return c.positions == PositionKind::rope &&
             (c.norm == NormKind::gemma || c.embed_scale || c.mlp == MlpKind::geglu);
    };
    f.biases = [](const Config& c) {
      const bool attention = c.attn_qkv_bias || c.attn_out_bias;
      return FileBiases{attention, attention, false};
    };
    f.tensors = decoder_tensor_names();
    return f;
  }();
  return family;
}

}  // namespace tapegrad::hf
