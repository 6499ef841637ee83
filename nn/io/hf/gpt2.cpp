// GPT-2 (GPT2LMHeadModel): learned positions, LayerNorm, a GELU MLP, Conv1D weights with a
// fused c_attn = [q | k | v] and every bias.
#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// Named, not anonymous: the family files compile together in one unity batch.
namespace gpt2_parts {

std::vector<ConfigKey> keys() {
  const ConfigKey inner = {"n_inner",
                           [](ConfigReader& r, Config& c) {
                             const auto inner = r.nullable_size("n_inner", std::nullopt);
                             // transformers builds a 0-wide MLP; tapegrad's 0 means "derive it"
                             if (inner && *inner == 0) r.refuse("n_inner must be positive (or null)");
                             c.mlp_hidden = inner ? *inner : 4 * c.d_model;
                           },
                           [](const Config& c, const json&) { return json(c.resolved_mlp_hidden()); }};
  // scale_attn_weights false: the scores unscaled
  const ConfigKey scaled = {"scale_attn_weights",
                            [](ConfigReader& r, Config& c) {
                              if (!r.flag("scale_attn_weights", true)) c.attention_scale = 1.0;
                            },
                            [](const Config& c, const json&) {
                              return json(!(c.attention_scale && *c.attention_scale == 1.0));
                            }};
  return {size_key("vocab_size", &Config::vocab, 50257),
          size_key("n_positions", &Config::context, 1024),
          size_key("n_embd", &Config::d_model, 768),
          size_key("n_layer", &Config::layers, 12),
          size_key("n_head", &Config::heads, 12),
          inner,
          // gelu_new and gelu_pytorch_tanh are both tapegrad's GELU, the tanh form
          choice_key("activation_function", {"gelu_new", "gelu_pytorch_tanh"}, "gelu_new",
                     "tapegrad's GELU is the tanh form: gelu_new or gelu_pytorch_tanh"),
          real_key("layer_norm_epsilon", &Config::norm_eps, 1e-5),
          // Conv1D always has a bias: c_attn (q, k, v), c_proj, c_fc and the MLP's c_proj
          always([](Config& c) { c.attn_qkv_bias = c.attn_out_bias = c.mlp_bias = true; }),
          flag_key("tie_word_embeddings", &Config::tie_embeddings, true),
          scaled,
          constant_flag_key("scale_attn_by_inverse_layer_idx", false,
                            "tapegrad scales every layer's scores alike")};
}

std::vector<Requirement> requirements() {
  return concat<Requirement>(
      {parts({}), gpt2_layout_requirements(),
       {need("window", [](const Config& c) { return c.window == 0; }, "has no sliding window"),
        need(scale_field,
             [](const Config& c) { return c.resolved_attention_scale() == 1.0 || default_scale(c); },
             "scales by 1/sqrt(head_dim) or (scale_attn_weights false) by 1")}});
}

TensorNames tensors() {
  TensorNames n;
  n.prefix = "transformer.";
  n.embed = "wte";
  n.positions = "wpe";
  n.layers = "h.";
  n.final_norm = "ln_f";
  n.norm1 = "ln_1";
  n.norm2 = "ln_2";
  n.qkv = "attn.c_attn";
  n.o = "attn.c_proj";
  n.fc = "mlp.c_fc";
  n.proj = "mlp.c_proj";
  n.conv1d = true;
  n.dropped_suffixes = {".attn.bias", ".attn.masked_bias"};  // the causal mask's buffers
  return n;
}

}  // namespace gpt2_parts

std::vector<Requirement> gpt2_layout_requirements() {
  return {need("positions", [](const Config& c) { return c.positions == PositionKind::learned; },
               "has learned positions"),
          need("norm", [](const Config& c) { return c.norm == NormKind::layer_norm; }, "has LayerNorm"),
          need("mlp", [](const Config& c) { return c.mlp == MlpKind::gelu; }, "'s feed-forward is GELU"),
          need("experts", [](const Config& c) { return c.experts == 0; }, "has no mixture of experts"),
          need("kv_heads", [](const Config& c) { return c.resolved_kv_heads() == c.heads; },
               "has one K/V head per query head"),
          need("head_dim", [](const Config& c) { return c.resolved_head_dim() * c.heads == c.d_model; },
               "'s heads are d_model/heads wide")};
}

const Family& gpt2_family() {
  static const Family family = [] {
    using namespace gpt2_parts;
    Family f;
    f.model_type = "gpt2";
    f.causal_lm_class = "GPT2LMHeadModel";
    // the 2017/GPT-2 model: TransformerConfig's own defaults
    f.preset = [] { return TransformerConfig{}; };
    f.is_preset = true;
    f.keys = keys();
    // reorder_and_upcast_attn computes the same scores in float32 in another order
    f.harmless_keys = {"attn_pdrop", "embd_pdrop", "resid_pdrop", "summary_type",
                       "summary_use_proj", "summary_activation", "summary_proj_to_labels",
                       "summary_first_dropout", "n_ctx", "reorder_and_upcast_attn"};
    f.requirements = requirements();
    f.claims = [](const Config& c) {
      return c.positions == PositionKind::learned && !has_gpt_neo_marks(c);
    };
    f.biases = [](const Config&) { return FileBiases{true, true, true}; };
    f.tensors = tensors();
    return f;
  }();
  return family;
}

}  // namespace tapegrad::hf

namespace tapegrad {

TransformerConfig gpt2_preset() { return hf::gpt2_family().preset(); }

}  // namespace tapegrad
