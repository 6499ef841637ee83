// TransformerConfig -> config.json: the model_type that expresses the model, its fields as
// transformers 4.49 reads them, and the kept fields of an imported model written back.
#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/errors.hpp"
#include "nn/io/checkpoint.hpp"  // CheckpointError
#include "nn/io/hf_config.hpp"
#include "nn/io/hf_config_keys.hpp"

namespace tapegrad {

namespace {

using json = nlohmann::json;
constexpr const char* kOp = "hf_config_to_json";

std::string value_of(const TransformerConfig& c, const char* field) {
  return fmt::format("{}={}", field, field_to_string(c, field));
}

// What every supported model_type lacks.
std::optional<std::string> cannot_express_any(const TransformerConfig& c) {
  if (c.qk_norm) return value_of(c, "qk_norm") + ": no supported model_type has QK-norm";
  if (c.learned_temperature)
    return value_of(c, "learned_temperature") + ": no supported model_type has it";
  if (c.mlp == MlpKind::none)
    return value_of(c, "mlp") + ": every supported model_type has a feed-forward";
  if (c.positions == PositionKind::none)
    return value_of(c, "positions") + ": gpt2 has learned positions, bloom ALiBi, the others RoPE";
  return std::nullopt;
}

// The first part of the model that of the supported model_types only `type` has: what
// made the model that type. Named when the type then lacks another part of the model, so
// that the refusal names the field the user chose, not the type's field they did not.
std::optional<std::string> only_type_has(const TransformerConfig& c, const std::string& type) {
  if (type == "bloom" && c.positions == PositionKind::alibi) return value_of(c, "positions") + " (ALiBi)";
  if (type != "gemma2") return std::nullopt;
  if (c.norm == NormKind::gemma) return value_of(c, "norm") + " (RMSNorm with gain 1 + w)";
  if (c.mlp == MlpKind::geglu) return value_of(c, "mlp") + " (GeGLU)";
  if (c.attn_softcap > 0) return value_of(c, "attn_softcap") + " (soft-capped attention scores)";
  if (c.final_softcap > 0) return value_of(c, "final_softcap") + " (soft-capped logits)";
  if (!c.uniform_window()) return value_of(c, "window_pattern") + " (windows that differ by layer)";
  if (c.post_norms) return value_of(c, "post_norms") + " (post-sub-layer norms)";
  if (c.embed_scale) return value_of(c, "embed_scale") + " (scaled embeddings)";
  return std::nullopt;
}

// The parts only one model_type has: BLOOM's norm on the embeddings, Gemma 2's scaled
// embeddings, sandwich norms and soft-caps. Each is there exactly when the type has it
// (Gemma 2's caps may be null).
std::optional<std::string> cannot_express_parts(const TransformerConfig& c, const std::string& type) {
  const bool bloom = type == "bloom", gemma2 = type == "gemma2";
  const auto says = [&](const char* field, bool has, const char* who, const char* what) {
    if (!has) return value_of(c, field) + ": " + type + " has no " + what + " (" + who + " has)";
    if (const auto chosen = only_type_has(c, type))
      return *chosen + ": of the supported model_types only " + type + " has it, and " + type +
             " also has " + what + ", which this model has not (" + value_of(c, field) + ")";
    return value_of(c, field) + ": " + type + " has " + what;
  };
  if (c.embed_norm != bloom) return says("embed_norm", bloom, "bloom", "word_embeddings_layernorm");
  if (c.embed_scale != gemma2)
    return says("embed_scale", gemma2, "gemma2", "embeddings scaled by sqrt(hidden_size)");
  if (c.post_norms != gemma2)
    return says("post_norms", gemma2, "gemma2",
                 "post-attention and post-feed-forward norms");
  if (!gemma2 && (c.attn_softcap > 0 || c.final_softcap > 0))
    return says(c.attn_softcap > 0 ? "attn_softcap" : "final_softcap", false, "gemma2", "soft-caps");
  if (!gemma2 && !c.uniform_window())
    return value_of(c, "window_pattern") + ": " + type + " has the same window on every layer";
  return std::nullopt;
}

// 1/sqrt(head_dim), the scale of every type but gpt2's unscaled option and Gemma 2's own.
bool default_scale(const TransformerConfig& c) {
  return c.resolved_attention_scale() == 1.0 / std::sqrt(double(c.resolved_head_dim()));
}

std::optional<std::string> cannot_express_gpt2(const TransformerConfig& c) {
  if (c.positions != PositionKind::learned) return value_of(c, "positions") + ": gpt2 has learned positions";
  if (c.norm != NormKind::layer_norm) return value_of(c, "norm") + ": gpt2 has LayerNorm";
  if (c.mlp != MlpKind::gelu) return value_of(c, "mlp") + ": gpt2's feed-forward is GELU";
  if (c.experts > 0) return value_of(c, "experts") + ": gpt2 has no mixture of experts";
  if (c.window > 0) return value_of(c, "window") + ": gpt2 has no sliding window";
  if (c.resolved_kv_heads() != c.heads)
    return value_of(c, "kv_heads") + ": gpt2 has one K/V head per query head";
  if (c.resolved_head_dim() * c.heads != c.d_model)
    return value_of(c, "head_dim") + ": gpt2's heads are d_model/heads wide";
  if (c.resolved_attention_scale() != 1.0 && !default_scale(c))
    return value_of(c, c.attention_scale ? "attention_scale" : "query_scale") +
           ": gpt2 scales by 1/sqrt(head_dim) or (scale_attn_weights false) by 1";
  return std::nullopt;
}

std::optional<std::string> cannot_express_bloom(const TransformerConfig& c) {
  if (c.positions != PositionKind::alibi) return value_of(c, "positions") + ": bloom has ALiBi";
  if (c.norm != NormKind::layer_norm) return value_of(c, "norm") + ": bloom has LayerNorm";
  if (c.mlp != MlpKind::gelu) return value_of(c, "mlp") + ": bloom's feed-forward is GELU";
  if (c.resolved_mlp_hidden() != 4 * c.d_model)
    return value_of(c, "mlp_hidden") + ": bloom's feed-forward is 4 x hidden_size wide";
  if (c.experts > 0) return value_of(c, "experts") + ": bloom has no mixture of experts";
  if (c.window > 0) return value_of(c, "window") + ": bloom has no sliding window";
  if (c.resolved_kv_heads() != c.heads)
    return value_of(c, "kv_heads") + ": bloom has one K/V head per query head";
  if (c.resolved_head_dim() * c.heads != c.d_model)
    return value_of(c, "head_dim") + ": bloom's heads are hidden_size/n_head wide";
  if (!default_scale(c))
    return value_of(c, c.attention_scale ? "attention_scale" : "query_scale") +
           ": bloom scales by 1/sqrt(head_dim)";
  return std::nullopt;
}

// Gemma 2 windows layers 0, 2, 4, ... and no other (a model without a window is written
// with one as long as the context, which hides no key).
bool gemma2_windows(const TransformerConfig& c) {
  for (std::size_t l = 0; l < c.layers; ++l)
    if (c.layer_window(l) != (l % 2 == 0 ? c.window : 0)) return false;
  return true;
}

std::optional<std::string> cannot_express_family(const TransformerConfig& c, const std::string& type) {
  const bool gemma2 = type == "gemma2";
  if (c.positions != PositionKind::rope) return value_of(c, "positions") + ": " + type + " has RoPE";
  if (c.norm != (gemma2 ? NormKind::gemma : NormKind::rms_norm))
    return value_of(c, "norm") + ": " + type + (gemma2 ? " has RMSNorm with gain 1 + w (gemma)"
                                                        : " has RMSNorm");
  if (c.mlp != (gemma2 ? MlpKind::geglu : MlpKind::swiglu))
    return value_of(c, "mlp") + ": " + type + "'s feed-forward is " + (gemma2 ? "GeGLU" : "SwiGLU");
  if (!gemma2 && !default_scale(c))
    return value_of(c, c.attention_scale ? "attention_scale" : "query_scale") + ": " + type +
           " scales by 1/sqrt(head_dim)";
  if (gemma2 && c.window > 0 && !gemma2_windows(c))
    return value_of(c, "window_pattern") + ": gemma2 windows layers 0, 2, 4, ... and no other";
  if (c.rope_scaling == RopeScaling::ntk)
    return value_of(c, "rope_scaling") + ": transformers has no static NTK scaling (its "
           "'dynamic' leaves the frequencies unscaled within max_position_embeddings)";
  if (c.rope_scaling == RopeScaling::yarn && c.rope_original_context != c.context)
    return fmt::format("rope_original_context={}: transformers 4.49's yarn takes "
                       "max_position_embeddings (the context, {}) as the original context",
                       c.rope_original_context, c.context);
  if (c.rope_scaling == RopeScaling::yarn && c.rope_factor < 1)
    return value_of(c, "rope_factor") + ": transformers' yarn below 1 shrinks the scores, tapegrad's does not";
  const bool biases = c.attn_qkv_bias || c.attn_out_bias || c.mlp_bias;
  if (type == "mixtral") {
    if (c.experts == 0) return value_of(c, "experts") + ": mixtral has experts";
    if (c.moe_every != 1) return value_of(c, "moe_every") + ": mixtral has experts in every layer";
    if (!c.moe_renorm)
      return value_of(c, "moe_renorm") + ": mixtral always renormalises the top-k weights";
  } else if (c.experts > 0) {
    return value_of(c, "experts") + ": " + type + " has no experts (mixtral has)";
  }
  if (gemma2 && c.mlp_bias) return value_of(c, "mlp_bias") + ": gemma2's feed-forward has no biases";
  if ((type == "mistral" || type == "mixtral") && biases)
    return value_of(c, c.attn_qkv_bias ? "attn_qkv_bias" : c.attn_out_bias ? "attn_out_bias" : "mlp_bias") +
           ": " + type + " has no biases";
  if (type == "qwen2" && c.attn_out_bias)
    return value_of(c, "attn_out_bias") + ": qwen2 has no bias on o_proj";
  if (type == "qwen2" && c.mlp_bias)
    return value_of(c, "mlp_bias") + ": qwen2's feed-forward has no biases";
  if (type == "llama" && c.window > 0)
    return value_of(c, "window") + ": llama has no sliding window (mistral, mixtral and qwen2 have)";
  return std::nullopt;
}

// The type the architecture is, before any kept type is considered.
std::string natural_type(const TransformerConfig& c) {
  if (c.positions == PositionKind::learned) return "gpt2";
  if (c.positions == PositionKind::alibi) return "bloom";
  if (c.norm == NormKind::gemma || c.post_norms || c.embed_scale || c.mlp == MlpKind::geglu ||
      c.attn_softcap > 0 || c.final_softcap > 0 || !c.uniform_window())
    return "gemma2";
  if (c.experts > 0) return "mixtral";
  if (c.attn_qkv_bias && !c.attn_out_bias && !c.mlp_bias) return "qwen2";
  return c.window > 0 ? "mistral" : "llama";
}

json parse_kept(const std::string& kept_json) {
  if (kept_json.empty()) return json::object();
  json kept;
  try {
    kept = json::parse(kept_json);
  } catch (const json::parse_error& e) {
    fail_with<CheckpointError>(kOp, "kept_json is not valid JSON ({})", e.what());
  }
  if (!kept.is_object()) fail_with<CheckpointError>(kOp, "kept_json is not a JSON object");
  return kept;
}

std::string kept_type(const json& kept) {
  const auto it = kept.find("model_type");
  return it != kept.end() && it->is_string() ? it->get<std::string>() : "";
}

bool is_dynamic_rope(const json& scaling) {
  if (!scaling.is_object()) return false;
  for (const char* key : {"rope_type", "type"})
    if (scaling.contains(key) && scaling[key] == "dynamic") return true;
  return false;
}

// The kept fields that go into a file of `type`: the common ones always, a type's own only
// into a file of that type. Any other field is refused: it was not kept by an import.
json kept_for(const json& kept, const std::string& type) {
  const std::string from = kept_type(kept);
  json out = json::object();
  for (const auto& item : kept.items()) {
    const std::string& key = item.key();
    if (key == "model_type") continue;
    if (key == "rope_scaling" && is_dynamic_rope(item.value())) continue;  // written by rope_json
    if (key == "architectures" && from != type) continue;
    if (hf::is_harmless_common_key(key)) {
      out[key] = item.value();
    } else if (from.empty() || !hf::is_harmless_key_of(from, key)) {
      fail_with<CheckpointError>(kOp, "kept field '{}' is not one that leaves the numbers "
                                 "unchanged for model_type {}", key, from.empty() ? type : from);
    } else if (from == type) {
      out[key] = item.value();
    }
  }
  if (!out.contains("architectures")) out["architectures"] = json::array({hf::causal_lm_class(type)});
  return out;
}

json rope_json(const TransformerConfig& c, const json& kept) {
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

void write_gpt2(const TransformerConfig& c, json& out) {
  out["vocab_size"] = c.vocab;
  out["n_positions"] = c.context;
  out["n_embd"] = c.d_model;
  out["n_layer"] = c.layers;
  out["n_head"] = c.heads;
  out["n_inner"] = c.resolved_mlp_hidden();
  out["activation_function"] = "gelu_new";
  out["layer_norm_epsilon"] = c.norm_eps;
  out["scale_attn_weights"] = !(c.attention_scale && *c.attention_scale == 1.0);
  out["scale_attn_by_inverse_layer_idx"] = false;
  out["tie_word_embeddings"] = c.tie_embeddings;
}

void write_bloom(const TransformerConfig& c, json& out) {
  out["vocab_size"] = c.vocab;
  out["hidden_size"] = c.d_model;
  out["n_layer"] = c.layers;
  out["n_head"] = c.heads;
  out["seq_length"] = c.context;  // not BloomConfig's: tapegrad's context, read back on import
  out["layer_norm_epsilon"] = c.norm_eps;
  out["apply_residual_connection_post_layernorm"] = false;
  out["tie_word_embeddings"] = c.tie_embeddings;
}

// query_pre_attn_scalar for the scale s = scalar^-0.5: an integer when one gives s exactly
// (as the published models' 256 or 144), else 1/s^2.
json query_pre_attn_scalar(double scale) {
  const double scalar = 1.0 / (scale * scale), whole = std::round(scalar);
  if (std::pow(whole, -0.5) == scale) return static_cast<std::uint64_t>(whole);
  return scalar;
}

// Gemma 2's fields beside llama's; a cap of 0 (none) is null, and a model without a window
// gets one as long as its context, which hides no key.
void write_gemma2(const TransformerConfig& c, json& out) {
  out["hidden_activation"] = "gelu_pytorch_tanh";
  out["query_pre_attn_scalar"] = query_pre_attn_scalar(c.resolved_attention_scale());
  out["attn_logit_softcapping"] = c.attn_softcap > 0 ? json(c.attn_softcap) : json(nullptr);
  out["final_logit_softcapping"] = c.final_softcap > 0 ? json(c.final_softcap) : json(nullptr);
  out["sliding_window"] = c.window > 0 ? c.window : c.context;
  out["attention_bias"] = c.attn_qkv_bias || c.attn_out_bias;
}

void write_family(const TransformerConfig& c, const std::string& type, const json& kept, json& out) {
  out["vocab_size"] = c.vocab;
  out["hidden_size"] = c.d_model;
  out["intermediate_size"] = c.resolved_mlp_hidden();
  out["num_hidden_layers"] = c.layers;
  out["num_attention_heads"] = c.heads;
  out["num_key_value_heads"] = c.resolved_kv_heads();
  out["head_dim"] = c.resolved_head_dim();
  if (type != "gemma2") out["hidden_act"] = "silu";  // Gemma 2 reads hidden_activation
  out["max_position_embeddings"] = c.context;
  out["rms_norm_eps"] = c.norm_eps;
  out["rope_theta"] = c.rope_theta;
  out["rope_scaling"] = rope_json(c, kept);
  out["tie_word_embeddings"] = c.tie_embeddings;
  if (type == "llama") {
    // q, k, v and o share one switch: a model with only some of them is written with zeros
    out["attention_bias"] = c.attn_qkv_bias || c.attn_out_bias;
    out["mlp_bias"] = c.mlp_bias;
  }
  // null written out: newer releases take a missing sliding_window as 4096
  if (type != "llama") out["sliding_window"] = c.window > 0 ? json(c.window) : json(nullptr);
  if (type == "qwen2") {
    out["use_sliding_window"] = c.window > 0;
    out["max_window_layers"] = c.window > 0 ? std::size_t(0) : c.layers;
  }
  if (type == "gemma2") write_gemma2(c, out);
  if (type == "mixtral") {
    out["num_local_experts"] = c.experts;
    out["num_experts_per_tok"] = c.experts_top_k;
    out["router_aux_loss_coef"] = c.moe_aux_coef;
  }
}

}  // namespace

std::optional<std::string> hf_cannot_express(const TransformerConfig& config,
                                             const std::string& model_type) {
  if (!hf::is_model_type(model_type))
    return "model_type '" + model_type + "' is not one tapegrad writes (" +
           fmt::format("{}", fmt::join(hf::model_types(), ", ")) + ")";
  if (auto why = cannot_express_any(config)) return why;
  if (auto why = cannot_express_parts(config, model_type)) return why;
  if (model_type == "gpt2") return cannot_express_gpt2(config);
  if (model_type == "bloom") return cannot_express_bloom(config);
  return cannot_express_family(config, model_type);
}

std::string hf_model_type(const TransformerConfig& config, const std::string& kept_json) {
  try {
    config.validate();
  } catch (const ShapeError& e) {
    fail_with<CheckpointError>(kOp, "the configuration is not valid: {}", e.what());
  }
  const std::string kept = kept_type(parse_kept(kept_json));
  if (!kept.empty() && hf::is_model_type(kept) && !hf_cannot_express(config, kept)) return kept;
  if (auto why = cannot_express_any(config)) fail_with<CheckpointError>(kOp, "{}", *why);
  const std::string type = natural_type(config);
  if (auto why = hf_cannot_express(config, type)) fail_with<CheckpointError>(kOp, "{}", *why);
  return type;
}

std::string hf_config_to_json(const TransformerConfig& config, const std::string& kept_json) {
  const std::string type = hf_model_type(config, kept_json);
  const json kept = parse_kept(kept_json);
  json out = kept_for(kept, type);
  out["model_type"] = type;
  if (type == "gpt2")
    write_gpt2(config, out);
  else if (type == "bloom")
    write_bloom(config, out);
  else
    write_family(config, type, kept, out);
  return out.dump(2) + "\n";
}

}  // namespace tapegrad
