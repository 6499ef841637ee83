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

// A positive multiplier, 1 when the file leaves it out: `set` puts it in the
// configuration, `get` reads it back for the export.
ConfigKey multiplier_key(std::string key, std::function<void(Config&, double)> set,
                         std::function<double(const Config&)> get) {
  return {key,
          [=](ConfigReader& r, Config& c) {
            const double m = r.real(key, 1.0);
            if (!(m > 0)) r.refuse("{}={} must be positive", key, m);
            set(c, m);
          },
          [=](const Config& c, const json&) { return json(get(c)); }};
}

ConfigKey field_multiplier_key(std::string key, double Config::*field) {
  return multiplier_key(
      std::move(key), [=](Config& c, double m) { c.*field = m; },
      [=](const Config& c) { return c.*field; });
}

std::vector<ConfigKey> granite_keys() {
  return {field_multiplier_key("embedding_multiplier", &Config::embed_multiplier),
          field_multiplier_key("residual_multiplier", &Config::residual_multiplier),
          field_multiplier_key("logits_scaling", &Config::logit_divisor),
          // GraniteAttention: self.scaling = attention_multiplier, in place of 1/sqrt(head_dim)
          multiplier_key(
              "attention_multiplier", [](Config& c, double m) { c.attention_scale = m; },
              [](const Config& c) { return c.resolved_attention_scale(); })};
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
