#include "nn/io/hf/decoder.hpp"

#include <cmath>
#include <set>

#include <fmt/format.h>

namespace tapegrad::hf {

std::vector<ConfigKey> decoder_size_keys(const DecoderDefaults& d) {
  ConfigKey heads = size_key("num_attention_heads", &Config::heads, d.heads);
  heads.read = [d](ConfigReader& r, Config& c) {
    c.heads = r.size("num_attention_heads", d.heads);
    if (c.heads == 0) r.refuse("num_attention_heads must be positive");
  };
  const ConfigKey kv_heads = {
      "num_key_value_heads",
      [d](ConfigReader& r, Config& c) {
        const std::optional<std::size_t> kv = r.nullable_size("num_key_value_heads", d.kv_heads);
        if (kv && *kv == 0) r.refuse("num_key_value_heads must be positive");
        c.kv_heads = kv ? *kv : c.heads;
      },
      [](const Config& c, const json&) { return json(c.resolved_kv_heads()); }};
  const ConfigKey head_dim = {
      "head_dim",
      [d](ConfigReader& r, Config& c) {
        const std::optional<std::size_t> dh = r.nullable_size("head_dim", d.head_dim);
        if (dh && *dh == 0) r.refuse("head_dim must be positive");
        c.head_dim = dh ? *dh : c.d_model / c.heads;
      },
      [](const Config& c, const json&) { return json(c.resolved_head_dim()); }};
  return {size_key("vocab_size", &Config::vocab, d.vocab),
          size_key("hidden_size", &Config::d_model, d.hidden),
          resolved_size_key("intermediate_size", &Config::mlp_hidden, d.intermediate,
                            &Config::resolved_mlp_hidden),
          size_key("num_hidden_layers", &Config::layers, d.layers),
          heads, kv_heads, head_dim};
}

std::vector<ConfigKey> decoder_position_keys(const DecoderDefaults& d) {
  const ConfigKey partial = {"partial_rotary_factor",
                             [](ConfigReader& r, Config&) {
                               if (r.real("partial_rotary_factor", 1.0) != 1.0)
                                 r.refuse("partial_rotary_factor={} is not supported (tapegrad "
                                          "rotates every dimension of a head)",
                                          r.all().at("partial_rotary_factor").dump());
                             },
                             nullptr};
  return {size_key("max_position_embeddings", &Config::context, d.max_positions),
          real_key(d.norm_eps_key, &Config::norm_eps, d.norm_eps),
          flag_key("tie_word_embeddings", &Config::tie_embeddings, d.tied),
          real_key("rope_theta", &Config::rope_theta, d.theta), partial};
}

std::optional<std::size_t> read_sliding_window(ConfigReader& r, const DecoderDefaults& d) {
  const std::optional<std::size_t> w = r.nullable_size("sliding_window", d.sliding_window);
  if (w && *w == 0) r.refuse("sliding_window=0 would hide every key, the query's own too");
  return w;
}

ConfigKey sliding_window_key(const DecoderDefaults& d) {
  return {"sliding_window",
          [d](ConfigReader& r, Config& c) {
            const std::optional<std::size_t> w = read_sliding_window(r, d);
            c.window = w ? *w : 0;
          },
          [](const Config& c, const json&) { return c.window > 0 ? json(c.window) : json(nullptr); }};
}

ConfigKey silu_key() {
  return choice_key("hidden_act", {"silu", "swish"}, "silu",
                    "tapegrad's gated feed-forward is SwiGLU: silu");
}

ConfigKey attention_bias_key() {
  return {"attention_bias",
          [](ConfigReader& r, Config& c) {
            c.attn_qkv_bias = c.attn_out_bias = r.flag("attention_bias", false);
          },
          [](const Config& c, const json&) { return json(c.attn_qkv_bias || c.attn_out_bias); }};
}

TransformerConfig rope_preset() {
  TransformerConfig c;
  c.positions = PositionKind::rope;
  c.norm = NormKind::rms_norm;
  c.mlp = MlpKind::swiglu;
  c.mlp_bias = false;
  c.tie_embeddings = false;
  return c;
}

void group_kv_heads(TransformerConfig& c, const std::function<bool(const std::string&)>& given) {
  const bool free = !given || !given("kv_heads");
  if (free && c.kv_heads == 0 && c.heads % 2 == 0) c.kv_heads = c.heads / 2;
}

namespace {

double sub_real(ConfigReader& r, const json& scaling, const char* key, bool required, double absent) {
  const auto it = scaling.find(key);
  if (it == scaling.end() || it->is_null()) {
    if (required) r.refuse("rope_scaling.{} is missing", key);
    return absent;
  }
  if (!it->is_number()) r.refuse("rope_scaling.{} must be a number, got {}", key, it->dump());
  return it->get<double>();
}

void read_yarn(ConfigReader& r, Config& c, const std::function<double(const char*, bool, double)>& real) {
  c.rope_scaling = RopeScaling::yarn;
  c.rope_factor = real("factor", true, 1.0);
  if (c.rope_factor < 1)
    r.refuse("rope_scaling.factor={} is below 1 for yarn (its attention factor "
             "0.1 ln(factor) + 1 would shrink the scores)", c.rope_factor);
  // `beta_fast or 32`, `beta_slow or 1`: a 0 takes the default too
  const double fast = real("beta_fast", false, 32.0), slow = real("beta_slow", false, 1.0);
  c.rope_beta_fast = fast == 0 ? 32.0 : fast;
  c.rope_beta_slow = slow == 0 ? 1.0 : slow;
  // 4.49 takes max_position_embeddings as the original context of the correction range
  c.rope_original_context = c.context;
  const double original = real("original_max_position_embeddings", false, double(c.context));
  if (original != double(c.context))
    r.refuse("rope_scaling.original_max_position_embeddings={} differs from "
             "max_position_embeddings={}: transformers 4.49's yarn ignores it and later "
             "releases use it", original, c.context);
  const double expected = 0.1 * std::log(c.rope_factor) + 1.0;
  const double attention = real("attention_factor", false, expected);
  if (attention != expected)
    r.refuse("rope_scaling.attention_factor={} is not 0.1 ln(factor) + 1 = {}, the one "
             "tapegrad applies", attention, expected);
}

// Returns true for "dynamic": transformers 4.49 computes dynamic NTK from max(sequence,
// max_position_embeddings), so within the context the frequencies are the unscaled ones.
bool read_rope_scaling(ConfigReader& r, Config& c) {
  const json* s = r.get("rope_scaling");
  if (!s) return false;
  if (!s->is_object()) r.refuse("rope_scaling must be an object or null, got {}", s->dump());
  const auto type_of = [&](const char* key) -> std::optional<std::string> {
    const auto it = s->find(key);
    if (it == s->end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) r.refuse("rope_scaling.{} must be a string, got {}", key, it->dump());
    return it->get<std::string>();
  };
  const std::optional<std::string> legacy = type_of("type"), named = type_of("rope_type");
  if (legacy && named && *legacy != *named)
    r.refuse("rope_scaling has type '{}' and rope_type '{}' (transformers' classes disagree "
             "on which wins)", *legacy, *named);
  const std::string type = named ? *named : legacy ? *legacy : "";
  std::set<std::string> known = {"type", "rope_type"};
  const auto real = [&](const char* key, bool required, double absent) {
    known.insert(key);
    return sub_real(r, *s, key, required, absent);
  };
  bool dynamic = false;
  if (type == "default") {
  } else if (type == "linear") {
    c.rope_scaling = RopeScaling::linear;
    c.rope_factor = real("factor", true, 1.0);
  } else if (type == "dynamic") {
    real("factor", true, 1.0);
    dynamic = true;
  } else if (type == "llama3") {
    c.rope_scaling = RopeScaling::llama3;
    c.rope_factor = real("factor", true, 1.0);
    c.rope_low_freq_factor = real("low_freq_factor", true, 1.0);
    c.rope_high_freq_factor = real("high_freq_factor", true, 4.0);
    const double original = real("original_max_position_embeddings", true, 0.0);
    if (original < 1 || original != std::floor(original))
      r.refuse("rope_scaling.original_max_position_embeddings must be a positive integer, got {}",
               original);
    c.rope_original_context = static_cast<std::size_t>(original);
  } else if (type == "yarn") {
    read_yarn(r, c, real);
  } else {
    r.refuse("rope_scaling type '{}' is not supported (linear, dynamic, yarn and llama3 are)", type);
  }
  for (const auto& item : s->items())
    if (!known.count(item.key()))
      r.refuse("rope_scaling.{} is not read by tapegrad for type '{}'", item.key(), type);
  return dynamic;
}

bool is_dynamic_rope(const json& scaling) {
  if (!scaling.is_object()) return false;
  for (const char* key : {"rope_type", "type"})
    if (scaling.contains(key) && scaling[key] == "dynamic") return true;
  return false;
}

json rope_json(const Config& c, const json& kept) {
  switch (c.rope_scaling) {
    case RopeScaling::linear:
      return {{"rope_type", "linear"}, {"factor", c.rope_factor}};
    case RopeScaling::llama3:
      return {{"rope_type", "llama3"}, {"factor", c.rope_factor},
              {"low_freq_factor", c.rope_low_freq_factor},
              {"high_freq_factor", c.rope_high_freq_factor},
              {"original_max_position_embeddings", c.rope_original_context}};
    case RopeScaling::yarn:
      return {{"rope_type", "yarn"}, {"factor", c.rope_factor},
              {"beta_fast", c.rope_beta_fast}, {"beta_slow", c.rope_beta_slow}};
    default:
      break;
  }
  // an imported dynamic scaling: unscaled within the context, as the model computes there
  const auto it = kept.find("rope_scaling");
  if (it != kept.end() && is_dynamic_rope(*it) && c.window == 0) return *it;
  return nullptr;
}

}  // namespace

ConfigKey rope_scaling_key() {
  return {"rope_scaling",
          [](ConfigReader& r, Config& c) {
            if (!read_rope_scaling(r, c)) return;
            // past max_position_embeddings only a window model goes on, rescaled by the
            // sequence's length, which tapegrad does not do
            if (c.window > 0)
              r.refuse("rope_scaling type 'dynamic' with sliding_window={}: past "
                       "max_position_embeddings transformers rescales RoPE by the sequence "
                       "length, which tapegrad does not", c.window);
            r.keep_as_is("rope_scaling");  // an export writes it back
          },
          rope_json};
}

Requirement has_rope() {
  return need("positions", [](const Config& c) { return c.positions == PositionKind::rope; },
              "has RoPE");
}

std::vector<Requirement> rope_requirements() {
  Requirement ntk = need("rope_scaling", [](const Config& c) {
    return c.rope_scaling != RopeScaling::ntk;
  }, "");
  ntk.message = [](const Config& c) {
    return "rope_scaling=" + field_to_string(c, "rope_scaling") +
           ": transformers has no static NTK scaling (its 'dynamic' leaves the frequencies "
           "unscaled within max_position_embeddings)";
  };
  Requirement yarn_context = need("rope_original_context", [](const Config& c) {
    return c.rope_scaling != RopeScaling::yarn || c.rope_original_context == c.context;
  }, "");
  yarn_context.message = [](const Config& c) {
    return fmt::format("rope_original_context={}: transformers 4.49's yarn takes "
                       "max_position_embeddings (the context, {}) as the original context",
                       c.rope_original_context, c.context);
  };
  Requirement yarn_factor = need("rope_factor", [](const Config& c) {
    return c.rope_scaling != RopeScaling::yarn || c.rope_factor >= 1;
  }, "");
  yarn_factor.message = [](const Config& c) {
    return "rope_factor=" + field_to_string(c, "rope_factor") +
           ": transformers' yarn below 1 shrinks the scores, tapegrad's does not";
  };
  return {ntk, yarn_context, yarn_factor};
}

std::vector<ConfigKey> llama_bias_and_scaling_keys() {
  return {attention_bias_key(), flag_key("mlp_bias", &Config::mlp_bias, false), rope_scaling_key()};
}

FileBiases llama_biases(const Config& c) {
  const bool attention = c.attn_qkv_bias || c.attn_out_bias;
  return FileBiases{attention, attention, c.mlp_bias};
}

std::vector<Requirement> llama_parts_requirements() {
  return {has_rope(),
          need("norm", [](const Config& c) { return c.norm == NormKind::rms_norm; }, "has RMSNorm"),
          need("mlp", [](const Config& c) { return c.mlp == MlpKind::swiglu; },
               "'s feed-forward is SwiGLU"),
          need(scale_field, default_scale, "scales by 1/sqrt(head_dim)")};
}

std::vector<Requirement> expert_requirements(bool experts) {
  if (!experts)
    return {need_with_hint("experts", [](const Config& c) { return c.experts == 0; }, "has no experts")};
  return {need("experts", [](const Config& c) { return c.experts > 0; }, "has experts"),
          need("moe_every", [](const Config& c) { return c.moe_every == 1; },
               "has experts in every layer"),
          need("moe_renorm", [](const Config& c) { return c.moe_renorm; },
               "always renormalises the top-k weights")};
}

TensorNames decoder_tensor_names() {
  TensorNames n;
  n.prefix = "model.";
  n.embed = "embed_tokens";
  n.layers = "layers.";
  n.final_norm = "norm";
  n.norm1 = "input_layernorm";
  n.norm2 = "post_attention_layernorm";
  n.q = "self_attn.q_proj";
  n.k = "self_attn.k_proj";
  n.v = "self_attn.v_proj";
  n.o = "self_attn.o_proj";
  n.gate = "mlp.gate_proj";
  n.up = "mlp.up_proj";
  n.down = "mlp.down_proj";
  n.dropped_suffixes = {".rotary_emb.inv_freq"};
  return n;
}

}  // namespace tapegrad::hf
