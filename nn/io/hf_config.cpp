// config.json -> TransformerConfig (the way back is hf_config_export.cpp). Each model_type's
// fields and class defaults are transformers 4.49's (configuration_<type>.py), and each
// field means what that release's modeling code does with it.
#include "nn/io/hf_config.hpp"

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/errors.hpp"
#include "nn/io/checkpoint.hpp"  // CheckpointError
#include "nn/io/hf_config_keys.hpp"

namespace tapegrad {

namespace {

using json = nlohmann::json;

// The fields of one config.json, each marked as read when a mapping asks for it; what is
// left unread at the end is either kept (harmless) or refused.
class Fields {
 public:
  Fields(const json& j, const std::string& source, std::string type)
      : j_(j), op_("hf config " + source), type_(std::move(type)) {}

  template <class... Args>
  [[noreturn]] void refuse(fmt::format_string<Args...> format, Args&&... args) const {
    fail_with<CheckpointError>(op_, format, std::forward<Args>(args)...);
  }
  const std::string& type() const { return type_; }
  const json& all() const { return j_; }
  bool was_read(const std::string& key) const { return read_.count(key) > 0; }

  // The value, or null when the file leaves it out or writes null.
  const json* get(const std::string& key) {
    read_.insert(key);
    const auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  bool absent(const std::string& key) const { return j_.find(key) == j_.end(); }

  std::size_t size(const std::string& key, std::size_t absent_value) {
    const json* v = get(key);
    if (!v && !absent(key)) refuse("{} is null, expected a non-negative integer", key);
    return v ? size_of(key, *v) : absent_value;
  }
  // A size that may be null (no value): the class default when left out, nullopt for null.
  std::optional<std::size_t> nullable_size(const std::string& key,
                                           std::optional<std::size_t> absent_value) {
    const bool left_out = absent(key);
    const json* v = get(key);
    if (!v) return left_out ? absent_value : std::nullopt;
    return size_of(key, *v);
  }
  double real(const std::string& key, double absent_value) {
    const json* v = get(key);
    if (!v && !absent(key)) refuse("{} is null, expected a number", key);
    if (!v) return absent_value;
    if (!v->is_number()) refuse("{} must be a number, got {}", key, v->dump());
    return v->get<double>();
  }
  bool flag(const std::string& key, bool absent_value) {
    const json* v = get(key);
    if (!v) return absent_value;
    if (!v->is_boolean()) refuse("{} must be true or false, got {}", key, v->dump());
    return v->get<bool>();
  }
  std::string text(const std::string& key, const std::string& absent_value) {
    const json* v = get(key);
    if (!v) return absent_value;
    if (!v->is_string()) refuse("{} must be a string, got {}", key, v->dump());
    return v->get<std::string>();
  }

 private:
  std::size_t size_of(const std::string& key, const json& v) const {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0))
      refuse("{} must be a non-negative integer, got {}", key, v.dump());
    return static_cast<std::size_t>(v.get<std::uint64_t>());
  }

  const json& j_;
  std::string op_, type_;
  std::set<std::string> read_;
};

// ---- GPT-2 -------------------------------------------------------------------------------

TransformerConfig gpt2_config(Fields& f) {
  TransformerConfig c = gpt2_preset();
  c.vocab = f.size("vocab_size", 50257);
  c.context = f.size("n_positions", 1024);
  c.d_model = f.size("n_embd", 768);
  c.layers = f.size("n_layer", 12);
  c.heads = f.size("n_head", 12);
  const std::optional<std::size_t> inner = f.nullable_size("n_inner", std::nullopt);
  c.mlp_hidden = inner ? *inner : 4 * c.d_model;
  // gelu_new and gelu_pytorch_tanh are both tapegrad's GELU, the tanh form
  const std::string act = f.text("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    f.refuse("activation_function '{}' is not supported (tapegrad's GELU is the tanh form: "
             "gelu_new or gelu_pytorch_tanh)", act);
  c.norm_eps = f.real("layer_norm_epsilon", 1e-5);
  // Conv1D always has a bias: c_attn (q, k, v), c_proj, c_fc and the MLP's c_proj
  c.attn_qkv_bias = c.attn_out_bias = c.mlp_bias = true;
  c.tie_embeddings = f.flag("tie_word_embeddings", true);
  if (!f.flag("scale_attn_weights", true)) c.attention_scale = 1.0;
  if (f.flag("scale_attn_by_inverse_layer_idx", false))
    f.refuse("scale_attn_by_inverse_layer_idx=true is not supported (tapegrad scales every "
             "layer's scores alike)");
  return c;
}

// ---- BLOOM -------------------------------------------------------------------------------

// BLOOM's config.json has no context: the model is built for `seq_length` positions (the
// Megatron name, which tapegrad's export writes and 4.49 leaves unread) or this many, BLOOM's
// training length. ALiBi has no table to size: it bounds only the sequences tapegrad runs.
constexpr std::size_t kBloomContext = 2048;

// A BloomConfig size: `key`, or its attribute_map alias, which PretrainedConfig sets after it.
std::size_t aliased_size(Fields& f, const char* key, const char* alias, std::size_t absent) {
  const std::size_t v = f.size(key, absent);
  return f.absent(alias) ? v : f.size(alias, v);
}

TransformerConfig bloom_config(Fields& f) {
  TransformerConfig c = bloom_preset();
  c.vocab = f.size("vocab_size", 250880);
  c.d_model = f.size("hidden_size", 64);
  if (!f.absent("n_embed")) c.d_model = f.size("n_embed", c.d_model);  // the old name wins
  c.layers = aliased_size(f, "n_layer", "num_hidden_layers", 2);
  c.heads = aliased_size(f, "n_head", "num_attention_heads", 8);
  c.context = f.size("seq_length", kBloomContext);
  c.mlp_hidden = 4 * c.d_model;  // dense_h_to_4h
  c.norm_eps = f.real("layer_norm_epsilon", 1e-5);
  c.tie_embeddings = f.flag("tie_word_embeddings", true);
  if (f.flag("apply_residual_connection_post_layernorm", false))
    f.refuse("apply_residual_connection_post_layernorm=true is not supported (tapegrad's "
             "residual stream is the block's input, not its normalised copy)");
  return c;
}

// ---- the Llama family ----------------------------------------------------------------------

// transformers 4.49's class defaults of the fields config.json may leave out.
struct FamilyDefaults {
  std::size_t vocab, hidden, intermediate, max_positions;
  std::optional<std::size_t> kv_heads;  // nullopt: = num_attention_heads
  double rms_eps, theta;
  std::optional<std::size_t> sliding_window;
  std::size_t layers, heads;
  std::optional<std::size_t> head_dim;  // nullopt: hidden_size / num_attention_heads
  bool tied;
};

FamilyDefaults defaults_of(const std::string& type) {
  const std::optional<std::size_t> none;
  if (type == "llama") return {32000, 4096, 11008, 2048, none, 1e-6, 10000.0, none, 32, 32, none, false};
  if (type == "mistral") return {32000, 4096, 14336, 4096 * 32, 8, 1e-6, 10000.0, 4096, 32, 32, none, false};
  if (type == "mixtral") return {32000, 4096, 14336, 4096 * 32, 8, 1e-5, 1e6, none, 32, 32, none, false};
  if (type == "gemma2") return {256000, 2304, 9216, 8192, 4, 1e-6, 10000.0, 4096, 26, 8, 256, true};
  return {151936, 4096, 22016, 32768, 32, 1e-6, 10000.0, 4096, 32, 32, none, false};  // qwen2
}

double sub_real(Fields& f, const json& scaling, const char* key, bool required, double absent) {
  const auto it = scaling.find(key);
  if (it == scaling.end() || it->is_null()) {
    if (required) f.refuse("rope_scaling.{} is missing", key);
    return absent;
  }
  if (!it->is_number()) f.refuse("rope_scaling.{} must be a number, got {}", key, it->dump());
  return it->get<double>();
}

// rope_scaling -> the RoPE fields; the keys each type reads, the others refused by name.
// Returns true for "dynamic", which tapegrad maps to no scaling (see below).
bool read_rope_scaling(Fields& f, TransformerConfig& c) {
  const json* s = f.get("rope_scaling");
  if (!s) return false;
  if (!s->is_object()) f.refuse("rope_scaling must be an object or null, got {}", s->dump());
  const auto type_of = [&](const char* key) -> std::optional<std::string> {
    const auto it = s->find(key);
    if (it == s->end() || it->is_null()) return std::nullopt;
    if (!it->is_string()) f.refuse("rope_scaling.{} must be a string, got {}", key, it->dump());
    return it->get<std::string>();
  };
  const std::optional<std::string> legacy = type_of("type"), named = type_of("rope_type");
  if (legacy && named && *legacy != *named)
    f.refuse("rope_scaling has type '{}' and rope_type '{}' (transformers' classes disagree "
             "on which wins)", *legacy, *named);
  const std::string type = named ? *named : legacy ? *legacy : "";
  std::set<std::string> known = {"type", "rope_type"};
  const auto real = [&](const char* key, bool required, double absent) {
    known.insert(key);
    return sub_real(f, *s, key, required, absent);
  };
  bool dynamic = false;
  if (type == "default") {
  } else if (type == "linear") {
    c.rope_scaling = RopeScaling::linear;
    c.rope_factor = real("factor", true, 1.0);
  } else if (type == "dynamic") {
    // transformers 4.49 computes dynamic NTK from max(sequence, max_position_embeddings):
    // within the context the frequencies are the unscaled ones, and past it only a window
    // model goes on, so that case is refused below
    real("factor", true, 1.0);
    dynamic = true;
  } else if (type == "llama3") {
    c.rope_scaling = RopeScaling::llama3;
    c.rope_factor = real("factor", true, 1.0);
    c.rope_low_freq_factor = real("low_freq_factor", true, 1.0);
    c.rope_high_freq_factor = real("high_freq_factor", true, 4.0);
    const double original = real("original_max_position_embeddings", true, 0.0);
    if (original < 1 || original != std::floor(original))
      f.refuse("rope_scaling.original_max_position_embeddings must be a positive integer, got {}",
               original);
    c.rope_original_context = static_cast<std::size_t>(original);
  } else if (type == "yarn") {
    c.rope_scaling = RopeScaling::yarn;
    c.rope_factor = real("factor", true, 1.0);
    if (c.rope_factor < 1)
      f.refuse("rope_scaling.factor={} is below 1 for yarn (its attention factor "
               "0.1 ln(factor) + 1 would shrink the scores)", c.rope_factor);
    // `beta_fast or 32`, `beta_slow or 1`: a 0 takes the default too
    const double fast = real("beta_fast", false, 32.0), slow = real("beta_slow", false, 1.0);
    c.rope_beta_fast = fast == 0 ? 32.0 : fast;
    c.rope_beta_slow = slow == 0 ? 1.0 : slow;
    // 4.49 takes max_position_embeddings as the original context of the correction range
    c.rope_original_context = c.context;
    const double original = real("original_max_position_embeddings", false, double(c.context));
    if (original != double(c.context))
      f.refuse("rope_scaling.original_max_position_embeddings={} differs from "
               "max_position_embeddings={}: transformers 4.49's yarn ignores it and later "
               "releases use it", original, c.context);
    const double expected = 0.1 * std::log(c.rope_factor) + 1.0;
    const double attention = real("attention_factor", false, expected);
    if (attention != expected)
      f.refuse("rope_scaling.attention_factor={} is not 0.1 ln(factor) + 1 = {}, the one "
               "tapegrad applies", attention, expected);
  } else {
    f.refuse("rope_scaling type '{}' is not supported (linear, dynamic, yarn and llama3 are)",
             type);
  }
  for (const auto& item : s->items())
    if (!known.count(item.key()))
      f.refuse("rope_scaling.{} is not read by tapegrad for type '{}'", item.key(), type);
  return dynamic;
}

// The sliding window of every layer, as 4.49's eager and sdpa attention apply it: a query
// sees the W keys up to itself (the mask hides key j <= i - W), which is tapegrad's window W.
// Gemma 2 applies it to layers 0, 2, 4, ... only (read_gemma2).
std::size_t read_window(Fields& f, const FamilyDefaults& d, std::size_t context) {
  const std::string& type = f.type();
  if (type == "llama") return 0;
  const std::optional<std::size_t> w = f.nullable_size("sliding_window", d.sliding_window);
  if (w && *w == 0) f.refuse("sliding_window=0 would hide every key, the query's own too");
  if (!w && type == "gemma2")
    f.refuse("sliding_window is null: transformers 4.49's Gemma 2 needs a number (its "
             "windowed layers compare it with the sequence length)");
  if (type != "qwen2") return w ? *w : 0;
  // Qwen2: the mask of 4.49's eager and sdpa paths applies sliding_window to every layer
  // whatever use_sliding_window says, and flash-attention only to layers from
  // max_window_layers on when use_sliding_window: the two agree only on every layer or none
  const bool use = f.flag("use_sliding_window", false);
  const std::size_t from_layer = f.size("max_window_layers", 28);
  if (!w) return 0;
  if (use && from_layer == 0) return *w;
  if (*w >= context) return 0;  // no key is that far back within the context
  if (use)
    f.refuse("use_sliding_window=true with max_window_layers={}: a window on some layers "
             "only is not supported", from_layer);
  f.refuse("sliding_window={} with use_sliding_window=false: transformers' eager and sdpa "
           "attention apply it to every layer, flash-attention to none", *w);
}

// Gemma 2's own fields on llama's (transformers 4.49's modeling_gemma2.py): RMSNorm with
// gain 1 + w, sandwich norms, embeddings times sqrt(hidden_size), GeGLU, the query scale
// query_pre_attn_scalar^-0.5 and the two soft-caps (null: none).
void read_gemma2(Fields& f, TransformerConfig& c) {
  c.norm = NormKind::gemma;
  c.post_norms = c.embed_scale = true;
  c.mlp = MlpKind::geglu;
  c.mlp_bias = false;
  const std::string act = f.text("hidden_activation", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh" && act != "gelu_new")
    f.refuse("hidden_activation '{}' is not supported (tapegrad's GeGLU is the tanh GELU: "
             "gelu_pytorch_tanh)", act);
  const double scalar = f.real("query_pre_attn_scalar", 256);
  if (!(scalar > 0)) f.refuse("query_pre_attn_scalar={} must be positive", scalar);
  c.query_scale = std::pow(scalar, -0.5);  // as Python's `scalar ** -0.5`
  for (const auto& [key, absent, cap] :
       {std::tuple{"attn_logit_softcapping", 50.0, &c.attn_softcap},
        std::tuple{"final_logit_softcapping", 30.0, &c.final_softcap}}) {
    const bool left_out = f.absent(key);
    const json* v = f.get(key);
    if (v && !v->is_number()) f.refuse("{} must be a number or null, got {}", key, v->dump());
    *cap = v ? v->get<double>() : left_out ? absent : 0.0;
    if (*cap < 0 || (v && *cap == 0)) f.refuse("{}={} must be positive (null: none)", key, *cap);
  }
}

TransformerConfig llama_family_config(Fields& f, bool& dynamic_rope) {
  const std::string& type = f.type();
  const FamilyDefaults d = defaults_of(type);
  TransformerConfig c = llama_preset();
  c.vocab = f.size("vocab_size", d.vocab);
  c.d_model = f.size("hidden_size", d.hidden);
  c.mlp_hidden = f.size("intermediate_size", d.intermediate);
  c.layers = f.size("num_hidden_layers", d.layers);
  c.heads = f.size("num_attention_heads", d.heads);
  if (c.heads == 0) f.refuse("num_attention_heads must be positive");
  const std::optional<std::size_t> kv = f.nullable_size("num_key_value_heads", d.kv_heads);
  c.kv_heads = kv ? *kv : c.heads;
  const std::optional<std::size_t> head_dim = f.nullable_size("head_dim", d.head_dim);
  if (head_dim && *head_dim == 0) f.refuse("head_dim must be positive");
  c.head_dim = head_dim ? *head_dim : c.d_model / c.heads;
  if (type == "gemma2") {
    read_gemma2(f, c);
  } else {
    const std::string act = f.text("hidden_act", "silu");
    if (act != "silu" && act != "swish")
      f.refuse("hidden_act '{}' is not supported (tapegrad's gated feed-forward is SwiGLU: "
               "silu)", act);
  }
  c.context = f.size("max_position_embeddings", d.max_positions);
  c.norm_eps = f.real("rms_norm_eps", d.rms_eps);
  c.tie_embeddings = f.flag("tie_word_embeddings", d.tied);
  c.rope_theta = f.real("rope_theta", d.theta);
  if (f.real("partial_rotary_factor", 1.0) != 1.0)
    f.refuse("partial_rotary_factor={} is not supported (tapegrad rotates every dimension of "
             "a head)", f.all().at("partial_rotary_factor").dump());
  if (type == "llama" || type == "gemma2")
    c.attn_qkv_bias = c.attn_out_bias = f.flag("attention_bias", false);
  if (type == "llama") c.mlp_bias = f.flag("mlp_bias", false);
  if (type == "qwen2") c.attn_qkv_bias = true;  // q, k, v biases; o_proj has none
  c.window = read_window(f, d, c.context);
  // Gemma 2: the window on layers 0, 2, 4, ... (`not layer_idx % 2`); one layer is all windowed
  if (type == "gemma2") c.window_pattern = c.layers > 1 ? 2 : 0;
  dynamic_rope = read_rope_scaling(f, c);
  if (dynamic_rope && c.window > 0)
    f.refuse("rope_scaling type 'dynamic' with sliding_window={}: past max_position_embeddings "
             "transformers rescales RoPE by the sequence length, which tapegrad does not",
             c.window);
  if (type == "mixtral") {
    c.experts = f.size("num_local_experts", 8);
    if (c.experts == 0) f.refuse("num_local_experts must be positive (a mixtral has experts)");
    c.experts_top_k = f.size("num_experts_per_tok", 2);
    c.moe_renorm = true;  // MixtralSparseMoeBlock always renormalises the top k
    c.moe_every = 1;
    c.moe_aux_coef = f.real("router_aux_loss_coef", 0.001);
    c.moe_z_coef = 0.0;  // transformers has no router z-loss
  }
  return c;
}

// ---- what is left --------------------------------------------------------------------------

// Generic PretrainedConfig keys that change the model unless they hold their default.
void refuse_changed_generic_keys(Fields& f) {
  if (const json* p = f.get("pruned_heads"); p && !(p->is_object() && p->empty()))
    f.refuse("pruned_heads={} is not supported (every head of every layer is kept)", p->dump());
  for (const char* key : {"add_cross_attention", "is_encoder_decoder"})
    if (f.flag(key, false)) f.refuse("{}=true is not supported (a decoder-only model)", key);
  if (f.get("quantization_config")) f.refuse("quantization_config is not supported");
  if (f.get("cross_attention_hidden_size"))
    f.refuse("cross_attention_hidden_size is not supported (no cross-attention)");
}

// The fields no mapping read: kept when harmless, refused otherwise.
json kept_fields(const Fields& f, bool dynamic_rope) {
  json kept = json::object();
  kept["model_type"] = f.type();
  for (const auto& item : f.all().items()) {
    const std::string& key = item.key();
    if (f.was_read(key)) continue;
    if (!hf::is_harmless_common_key(key) && !hf::is_harmless_key_of(f.type(), key))
      f.refuse("field '{}' is not one tapegrad knows for model_type {} (it may change the "
               "numbers)", key, f.type());
    kept[key] = item.value();
  }
  // the frequencies within the context are the unscaled ones; an export writes it back
  if (dynamic_rope) kept["rope_scaling"] = f.all().at("rope_scaling");
  return kept;
}

json parse_object(const std::string& text, const std::string& op) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail_with<CheckpointError>(op, "not valid JSON ({})", e.what());
  }
  if (!j.is_object()) fail_with<CheckpointError>(op, "not a JSON object");
  return j;
}

}  // namespace

HfModelConfig hf_config_from_json(const std::string& json_text, const std::string& source) {
  const std::string op = "hf config " + source;
  const json j = parse_object(json_text, op);
  const auto type_it = j.find("model_type");
  if (type_it == j.end() || !type_it->is_string())
    fail_with<CheckpointError>(op, "model_type is missing (or not a string)");
  const std::string type = type_it->get<std::string>();
  if (!hf::is_model_type(type))
    fail_with<CheckpointError>(op, "model_type '{}' is not supported ({} are)", type,
                               fmt::join(hf::model_types(), ", "));
  Fields f(j, source, type);
  f.get("model_type");
  bool dynamic_rope = false;
  HfModelConfig out;
  out.model_type = type;
  out.config = type == "gpt2"    ? gpt2_config(f)
               : type == "bloom" ? bloom_config(f)
                                 : llama_family_config(f, dynamic_rope);
  refuse_changed_generic_keys(f);
  out.kept_json = kept_fields(f, dynamic_rope).dump();
  try {
    out.config.validate();
  } catch (const ShapeError& e) {
    f.refuse("the model it describes cannot be built: {}", e.what());
  }
  return out;
}

}  // namespace tapegrad
