// Granite (GraniteForCausalLM): Llama's layout and names with four muP-style multipliers:
// embeddings times embedding_multiplier, the scores times attention_multiplier in place of
// 1/sqrt(head_dim) (1 when the file leaves it out: unscaled), each sub-layer's output times
// residual_multiplier before the residual add, and the logits divided by logits_scaling.
#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// Named, not anonymous: the family files compile together in one unity batch.
namespace granite_parts {

const DecoderDefaults kDefaults = {32000, 4096, 11008, 2048, std::nullopt, 1e-6, 10000.0,
                                   std::nullopt, 32, 32, std::nullopt, false};

// A positive multiplier read into `field`, written back as it is.
ConfigKey multiplier_key(std::string key, double Config::*field) {
  return {key,
          [=](ConfigReader& r, Config& c) {
            const double m = r.real(key, 1.0);
            if (!(m > 0)) r.refuse("{}={} must be positive", key, m);
            c.*field = m;
          },
          [=](const Config& c, const json&) { return json(c.*field); }};
}

ConfigKey attention_multiplier_key() {
  return {"attention_multiplier",
          [](ConfigReader& r, Config& c) {
            const double m = r.real("attention_multiplier", 1.0);
            if (!(m > 0)) r.refuse("attention_multiplier={} must be positive", m);
            c.attention_scale = m;  // GraniteAttention: self.scaling = attention_multiplier
          },
          [](const Config& c, const json&) { return json(c.resolved_attention_scale()); }};
}

std::vector<ConfigKey> granite_keys() {
  return {multiplier_key("embedding_multiplier", &Config::embed_multiplier),
          multiplier_key("residual_multiplier", &Config::residual_multiplier),
          multiplier_key("logits_scaling", &Config::logit_divisor),
          attention_multiplier_key()};
}

}  // namespace granite_parts

const Family& granite_family() {
  static const Family family = [] {
    using namespace granite_parts;
    Family f;
    f.model_type = "granite";
    f.causal_lm_class = "GraniteForCausalLM";
    f.preset = rope_preset;
    f.keys = concat<ConfigKey>({decoder_size_keys(kDefaults), {silu_key()},
                                decoder_position_keys(kDefaults), granite_keys(),
                                llama_bias_and_scaling_keys()});
    f.harmless_keys = {"attention_dropout"};
    Parts has;
    has.multipliers = true;
    f.requirements = concat<Requirement>(
        {parts(has),
         {has_rope(),
          need("norm", [](const Config& c) { return c.norm == NormKind::rms_norm; }, "has RMSNorm"),
          need("mlp", [](const Config& c) { return c.mlp == MlpKind::swiglu; },
               "'s feed-forward is SwiGLU")},
         rope_requirements(), expert_requirements(false),
         {need_with_hint("window", [](const Config& c) { return c.window == 0; },
                         "has no sliding window")}});
    // a Llama-shaped model with a multiplier, or with a scale other than 1/sqrt(head_dim)
    f.claims = [](const Config& c) {
      return c.positions == PositionKind::rope && c.norm == NormKind::rms_norm &&
             (c.embed_multiplier != 1.0 || c.residual_multiplier != 1.0 ||
              c.logit_divisor != 1.0 || !default_scale(c));
    };
    f.biases = llama_biases;
    f.tensors = decoder_tensor_names();
    return f;
  }();
  return family;
}

}  // namespace tapegrad::hf
