// StarCoder2 (Starcoder2ForCausalLM): RoPE and grouped K/V heads as Llama, but LayerNorm
// with a bias, a GELU (tanh) feed-forward c_fc / c_proj, biases on every projection
// (use_bias) and an optional sliding window on every layer.
#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// Named, not anonymous: the family files compile together in one unity batch.
namespace starcoder2_parts {

DecoderDefaults defaults() {
  DecoderDefaults d = {49152, 3072, 12288, 4096, 2, 1e-5, 10000.0, std::nullopt,
                       30, 24, std::nullopt, true};
  d.norm_eps_key = "norm_epsilon";
  return d;
}

// use_bias: q, k, v, o, c_fc and c_proj all have one or none (a model with only some is
// written with zeros for the others).
ConfigKey use_bias_key() {
  return {"use_bias",
          [](ConfigReader& r, Config& c) {
            c.attn_qkv_bias = c.attn_out_bias = c.mlp_bias = r.flag("use_bias", true);
          },
          [](const Config& c, const json&) {
            return json(c.attn_qkv_bias || c.attn_out_bias || c.mlp_bias);
          }};
}

std::vector<ConfigKey> keys() {
  const DecoderDefaults d = defaults();
  return concat<ConfigKey>(
      {decoder_size_keys(d),
       {always([](Config& c) {
          c.norm = NormKind::layer_norm;
          c.mlp = MlpKind::gelu;
        }),
        choice_key("hidden_act", {"gelu_pytorch_tanh", "gelu_new"}, "gelu_pytorch_tanh",
                   "tapegrad's GELU is the tanh form: gelu_pytorch_tanh or gelu_new")},
       decoder_position_keys(d), {use_bias_key(), sliding_window_key(d), rope_scaling_key()}});
}

}  // namespace starcoder2_parts

const Family& starcoder2_family() {
  static const Family family = [] {
    using namespace starcoder2_parts;
    Family f;
    f.model_type = "starcoder2";
    f.causal_lm_class = "Starcoder2ForCausalLM";
    f.preset = [] {
      TransformerConfig c = rope_preset();
      c.norm = NormKind::layer_norm;
      c.mlp = MlpKind::gelu;
      c.mlp_bias = c.attn_qkv_bias = c.attn_out_bias = true;
      c.tie_embeddings = true;
      return c;
    };
    f.is_preset = true;
    f.finish_preset = group_kv_heads;
    f.keys = keys();
    // bigcode's released configurations also carry norm_type, mlp_type and
    // layer_norm_epsilon, which 4.49 does not read (its norms are LayerNorm with norm_epsilon)
    f.harmless_keys = {"attention_dropout", "residual_dropout", "embedding_dropout", "norm_type",
                       "mlp_type", "layer_norm_epsilon"};
    f.requirements = concat<Requirement>(
        {parts({}),
         {has_rope(),
          need("norm", [](const Config& c) { return c.norm == NormKind::layer_norm; }, "has LayerNorm"),
          need("mlp", [](const Config& c) { return c.mlp == MlpKind::gelu; }, "'s feed-forward is GELU"),
          need(scale_field, default_scale, "scales by 1/sqrt(head_dim)")},
         rope_requirements(), expert_requirements(false)});
    f.claims = [](const Config& c) {
      return c.positions == PositionKind::rope && c.norm == NormKind::layer_norm;
    };
    f.biases = [](const Config& c) {
      const bool any = c.attn_qkv_bias || c.attn_out_bias || c.mlp_bias;
      return FileBiases{any, any, any};
    };
    f.tensors = decoder_tensor_names();
    f.tensors.fc = "mlp.c_fc";
    f.tensors.proj = "mlp.c_proj";
    return f;
  }();
  return family;
}

}  // namespace tapegrad::hf
