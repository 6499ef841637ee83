// Gemma 2 (Gemma2ForCausalLM): RMSNorm with gain 1 + w, sandwich norms (its
// post_attention_layernorm is the norm on the attention's output), embeddings times
// sqrt(hidden_size), GeGLU with the tanh GELU, the query scale query_pre_attn_scalar^-0.5,
// soft-capped scores and logits (null: none), and the window on layers 0, 2, 4, ... only.
#include <cmath>
#include <tuple>

#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// Named, not anonymous: the family files compile together in one unity batch.
namespace gemma2_parts {

const DecoderDefaults kDefaults = {256000, 2304, 9216, 8192, 4, 1e-6, 10000.0, 4096,
                                   26, 8, 256, true};

// query_pre_attn_scalar for the scale s = scalar^-0.5: an integer when one gives s exactly
// (as the published models' 256 or 144), else 1/s^2.
json query_pre_attn_scalar(double scale) {
  const double scalar = 1.0 / (scale * scale), whole = std::round(scalar);
  if (std::pow(whole, -0.5) == scale) return static_cast<std::uint64_t>(whole);
  return scalar;
}

ConfigKey soft_cap_key(const char* key, double absent, double Config::*cap) {
  return {key,
          [=](ConfigReader& r, Config& c) {
            const bool left_out = r.absent(key);
            const json* v = r.get(key);
            if (v && !v->is_number()) r.refuse("{} must be a number or null, got {}", key, v->dump());
            c.*cap = v ? v->get<double>() : left_out ? absent : 0.0;
            if (c.*cap < 0 || (v && c.*cap == 0)) r.refuse("{}={} must be positive (null: none)", key, c.*cap);
          },
          [=](const Config& c, const json&) { return c.*cap > 0 ? json(c.*cap) : json(nullptr); }};
}

std::vector<ConfigKey> gemma2_keys() {
  const ConfigKey scalar = {"query_pre_attn_scalar",
                            [](ConfigReader& r, Config& c) {
                              const double s = r.real("query_pre_attn_scalar", 256);
                              if (!(s > 0)) r.refuse("query_pre_attn_scalar={} must be positive", s);
                              c.query_scale = std::pow(s, -0.5);  // as Python's `scalar ** -0.5`
                            },
                            [](const Config& c, const json&) {
                              return query_pre_attn_scalar(c.resolved_attention_scale());
                            }};
  return {always([](Config& c) {
            c.norm = NormKind::gemma;
            c.post_norms = c.embed_scale = true;
            c.mlp = MlpKind::geglu;
            c.mlp_bias = false;
          }),
          choice_key("hidden_activation", {"gelu_pytorch_tanh", "gelu_new"}, "gelu_pytorch_tanh",
                     "tapegrad's GeGLU is the tanh GELU: gelu_pytorch_tanh"),
          scalar, soft_cap_key("attn_logit_softcapping", 50.0, &Config::attn_softcap),
          soft_cap_key("final_logit_softcapping", 30.0, &Config::final_softcap)};
}

// A model without a window is written with one as long as its context, which hides no key;
// the window applies to layers 0, 2, 4, ... (`not layer_idx % 2`); one layer is all windowed.
ConfigKey window_key() {
  return {"sliding_window",
          [](ConfigReader& r, Config& c) {
            const std::optional<std::size_t> w = read_sliding_window(r, kDefaults);
            if (!w)
              r.refuse("sliding_window is null: transformers 4.49's Gemma 2 needs a number (its "
                       "windowed layers compare it with the sequence length)");
            c.window = *w;
            c.window_pattern = c.layers > 1 ? 2 : 0;
          },
          [](const Config& c, const json&) { return json(c.window > 0 ? c.window : c.context); }};
}

// Gemma 2 windows layers 0, 2, 4, ... and no other.
bool gemma2_windows(const Config& c) {
  if (c.window == 0) return true;
  for (std::size_t l = 0; l < c.layers; ++l)
    if (c.layer_plan(l).attention.window != (l % 2 == 0 ? c.window : 0)) return false;
  return true;
}

std::vector<Requirement> requirements() {
  Parts has;
  has.embed_scale = has.post_norms = has.soft_caps = has.per_layer_windows = true;
  return concat<Requirement>(
      {parts(has),
       {has_rope(),
        need("norm", [](const Config& c) { return c.norm == NormKind::gemma; },
             "has RMSNorm with gain 1 + w (gemma)"),
        need("mlp", [](const Config& c) { return c.mlp == MlpKind::geglu; }, "'s feed-forward is GeGLU"),
        need("window_pattern", gemma2_windows, "windows layers 0, 2, 4, ... and no other")},
       rope_requirements(), expert_requirements(false),
       {need("mlp_bias", [](const Config& c) { return !c.mlp_bias; }, "'s feed-forward has no biases")}});
}

}  // namespace gemma2_parts

const Family& gemma2_family() {
  static const Family family = [] {
    using namespace gemma2_parts;
    Family f;
    f.model_type = "gemma2";
    f.causal_lm_class = "Gemma2ForCausalLM";
    f.preset = [] {
      TransformerConfig c = rope_preset();
      c.norm = NormKind::gemma;
      c.norm_eps = 1e-6;
      c.post_norms = true;
      c.embed_scale = true;
      c.mlp = MlpKind::geglu;
      c.tie_embeddings = true;
      c.attn_softcap = 50;
      c.final_softcap = 30;
      c.window_pattern = 2;
      return c;
    };
    f.is_preset = true;
    // half the context: the windowed layers see less than the global ones within a sequence
    f.finish_preset = [](TransformerConfig& c, const std::function<bool(const std::string&)>& given) {
      group_kv_heads(c, given);
      if ((!given || !given("window")) && c.window == 0 && c.context >= 2 && c.layers >= 2)
        c.window = c.context / 2;
    };
    f.keys = concat<ConfigKey>({decoder_size_keys(kDefaults), gemma2_keys(),
                                decoder_position_keys(kDefaults),
                                {attention_bias_key(), window_key(), rope_scaling_key()}});
    // hidden_act is the old name 4.49's Gemma 2 leaves unread (it reads hidden_activation);
    // sliding_window_size the same for sliding_window
    f.harmless_keys = {"attention_dropout", "hidden_act", "cache_implementation",
                       "sliding_window_size"};
    f.requirements = requirements();
    f.claims = [](const Config& c) {
      return c.positions == PositionKind::rope &&
             (c.post_norms || c.attn_softcap > 0 || c.final_softcap > 0 || !c.uniform_window());
    };
    f.biases = llama_biases;
    f.tensors = decoder_tensor_names();
    f.tensors.norm1_post = "post_attention_layernorm";
    f.tensors.norm2 = "pre_feedforward_layernorm";
    f.tensors.norm2_post = "post_feedforward_layernorm";
    return f;
  }();
  return family;
}

}  // namespace tapegrad::hf

namespace tapegrad {

TransformerConfig gemma2_preset() { return hf::gemma2_family().preset(); }

}  // namespace tapegrad
