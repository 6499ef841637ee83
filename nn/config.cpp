#include "nn/config.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "autograd/errors.hpp"
#include "nn/io/hf/family.hpp"
#include "nn/io/hf/registry.hpp"

namespace tapegrad {

namespace {

// ---- how each field type is described, printed, parsed and stored ----------------------

template <class E>
struct Choices;  // names() in the order of the enum's values
template <>
struct Choices<NormKind> {
  static std::vector<std::string> names() { return {"layer", "rms", "gemma"}; }
};
template <>
struct Choices<MlpKind> {
  static std::vector<std::string> names() { return mlp_kind_names(); }
};
template <>
struct Choices<PositionKind> {
  static std::vector<std::string> names() { return {"learned", "rope", "none", "alibi"}; }
};
template <>
struct Choices<RopeStyle> {
  static std::vector<std::string> names() { return {"half", "interleaved"}; }
};
template <>
struct Choices<RopeScaling> {
  static std::vector<std::string> names() { return {"none", "linear", "ntk", "llama3", "yarn"}; }
};
template <>
struct Choices<AttentionInit> {
  static std::vector<std::string> names() { return {"gpt2", "variance_preserving"}; }
};

template <class V>
constexpr bool is_choice = std::is_enum_v<V>;

template <class V>
FieldInfo::Kind kind_of() {
  if constexpr (std::is_same_v<V, bool>) return FieldInfo::Kind::flag;
  else if constexpr (std::is_same_v<V, Seed>) return FieldInfo::Kind::seed;
  else if constexpr (std::is_same_v<V, std::size_t>) return FieldInfo::Kind::size;
  else if constexpr (std::is_same_v<V, double>) return FieldInfo::Kind::real;
  else if constexpr (std::is_same_v<V, std::optional<double>>) return FieldInfo::Kind::optional_real;
  else return FieldInfo::Kind::choice;
}

template <class V>
std::vector<std::string> choices_of() {
  if constexpr (is_choice<V>) return Choices<V>::names();
  else return {};
}

std::string real_text(double v) { return fmt::format("{}", v); }

template <class V>
std::string text_of(const V& v) {
  if constexpr (std::is_same_v<V, bool>) return v ? "true" : "false";
  else if constexpr (std::is_same_v<V, double>) return real_text(v);
  else if constexpr (std::is_same_v<V, std::optional<double>>) return v ? real_text(*v) : "default";
  else if constexpr (is_choice<V>) return Choices<V>::names().at(static_cast<std::size_t>(v));
  else if constexpr (std::is_same_v<V, Seed>) return std::to_string(v.value);
  else return std::to_string(v);
}

[[noreturn]] void bad_value(const FieldInfo& f, const std::string& text, const std::string& wanted) {
  fail("config", "{}={} is not {}", f.name, text, wanted);
}

std::string range_text(const FieldInfo& f) {
  if (f.max >= kUnbounded) return fmt::format("a finite number >= {}", f.min);
  return fmt::format("a number in [{}, {}]", f.min, f.max);
}

// A value within the field's declared range (sizes and reals; others have none).
template <class V>
void check_range(const FieldInfo& f, const V& v) {
  if constexpr (std::is_same_v<V, std::size_t> || std::is_same_v<V, double>) {
    const double x = static_cast<double>(v);
    if (!(x >= f.min && x <= f.max) || !std::isfinite(x)) bad_value(f, text_of(v), range_text(f));
  } else if constexpr (std::is_same_v<V, std::optional<double>>) {
    if (v && (!std::isfinite(*v) || *v < f.min || *v > f.max))
      bad_value(f, text_of(v), "positive and finite (or default)");
  }
}

template <class V>
V parse_text(const FieldInfo& f, const std::string& text) {
  if constexpr (std::is_same_v<V, bool>) {
    if (text == "true" || text == "1" || text == "on") return true;
    if (text == "false" || text == "0" || text == "off") return false;
    bad_value(f, text, "true or false");
  } else if constexpr (is_choice<V>) {
    const std::vector<std::string> names = Choices<V>::names();
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == text) return static_cast<V>(i);
    bad_value(f, text, "one of " + fmt::format("{}", fmt::join(names, ", ")));
  } else if constexpr (std::is_same_v<V, std::optional<double>>) {
    if (text == "default") return std::nullopt;
    return parse_text<double>(f, text);
  } else {
    const bool integer = !std::is_same_v<V, double>;
    std::size_t used = 0;
    try {
      if (integer && text.find_first_of("-+") == std::string::npos) {
        const unsigned long long u = std::stoull(text, &used);
        if (used == text.size()) return static_cast<V>(u);
      } else if (!integer) {
        const double d = std::stod(text, &used);
        if (used == text.size()) return static_cast<V>(d);
      }
    } catch (const std::out_of_range&) {
      bad_value(f, text, integer ? "an integer below 2^64" : "a number within a double's range");
    } catch (const std::exception&) {
    }
    bad_value(f, text, integer ? "a non-negative integer" : "a number");
  }
}

template <class V>
std::int64_t int64_of(const V& v) {
  if constexpr (std::is_same_v<V, Seed>) {
    std::int64_t bits;
    std::memcpy(&bits, &v.value, sizeof bits);
    return bits;  // the uint64 seed's bits, unchanged, read as int64
  } else if constexpr (std::is_same_v<V, double> || std::is_same_v<V, std::optional<double>>) {
    return 0;  // stored as double
  } else {
    return static_cast<std::int64_t>(v);
  }
}

template <class V>
V from_int64(const FieldInfo& f, std::int64_t i) {
  if constexpr (std::is_same_v<V, Seed>) {
    std::uint64_t u;
    std::memcpy(&u, &i, sizeof u);
    return Seed(u);
  } else if constexpr (std::is_same_v<V, bool>) {
    if (i != 0 && i != 1) bad_value(f, std::to_string(i), "0 or 1");
    return i == 1;
  } else if constexpr (is_choice<V>) {
    const std::size_t n = Choices<V>::names().size();
    if (i < 0 || static_cast<std::size_t>(i) >= n)
      bad_value(f, std::to_string(i), fmt::format("a choice index in [0, {})", n));
    return static_cast<V>(i);
  } else if constexpr (std::is_same_v<V, std::size_t>) {
    if (i < 0) bad_value(f, std::to_string(i), range_text(f));
    return static_cast<V>(i);
  } else {
    bad_value(f, std::to_string(i), "an integer field");
  }
}

// ---- the walks over the one list ---------------------------------------------------------

#define TAPEGRAD_FIELD_INFO(role, type, name, default_value, lo, hi, since, old, doc) \
  FieldInfo{#name, doc, FieldRole::role, since, kind_of<type>(), double(lo), double(hi), \
            choices_of<type>()},

const FieldInfo& info(const std::string& field) {
  for (const FieldInfo& f : config_fields())
    if (field == f.name) return f;
  fail("config", "there is no field named '{}'", field);
}

// Calls visit(info, member) for the field named `field`, with the member by reference.
template <class C, class F>
void visit_field(C& c, const std::string& field, F&& visit) {
#define TAPEGRAD_VISIT_ONE(role, type, name, default_value, lo, hi, since, old, doc) \
  if (field == #name) return visit(info(#name), c.name);
  TAPEGRAD_TRANSFORMER_FIELDS(TAPEGRAD_VISIT_ONE)
#undef TAPEGRAD_VISIT_ONE
  fail("config", "there is no field named '{}'", field);
}

std::size_t round_up(std::size_t n, std::size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

}  // namespace

const std::vector<FieldInfo>& config_fields() {
  static const std::vector<FieldInfo> fields = {TAPEGRAD_TRANSFORMER_FIELDS(TAPEGRAD_FIELD_INFO)};
  return fields;
}
#undef TAPEGRAD_FIELD_INFO

TransformerConfig config_before_fields() {
  TransformerConfig c;
#define TAPEGRAD_OLD_VALUE(role, type, name, default_value, lo, hi, since, old, doc) c.name = old;
  TAPEGRAD_TRANSFORMER_FIELDS(TAPEGRAD_OLD_VALUE)
#undef TAPEGRAD_OLD_VALUE
  return c;
}

std::string field_to_string(const TransformerConfig& c, const std::string& field) {
  std::string out;
  visit_field(c, field, [&](const FieldInfo&, const auto& v) { out = text_of(v); });
  return out;
}

void set_field_from_string(TransformerConfig& c, const std::string& field, const std::string& text) {
  visit_field(c, field, [&](const FieldInfo& f, auto& v) {
    using V = std::decay_t<decltype(v)>;
    V parsed = parse_text<V>(f, text);
    check_range(f, parsed);
    v = parsed;
  });
}

bool field_is_real(const std::string& field) {
  const FieldInfo::Kind k = info(field).kind;
  return k == FieldInfo::Kind::real || k == FieldInfo::Kind::optional_real;
}

std::int64_t field_to_int64(const TransformerConfig& c, const std::string& field) {
  std::int64_t out = 0;
  visit_field(c, field, [&](const FieldInfo&, const auto& v) { out = int64_of(v); });
  return out;
}

double field_to_double(const TransformerConfig& c, const std::string& field) {
  double out = 0;
  visit_field(c, field, [&](const FieldInfo&, const auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, double>) out = v;
    else if constexpr (std::is_same_v<V, std::optional<double>>)
      out = v ? *v : std::numeric_limits<double>::quiet_NaN();
  });
  return out;
}

void set_field_from_int64(TransformerConfig& c, const std::string& field, std::int64_t i) {
  visit_field(c, field, [&](const FieldInfo& f, auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, double> || std::is_same_v<V, std::optional<double>>) {
      bad_value(f, std::to_string(i), "stored as an integer (it is a real)");
    } else {
      V parsed = from_int64<V>(f, i);
      check_range(f, parsed);
      v = parsed;
    }
  });
}

void set_field_from_double(TransformerConfig& c, const std::string& field, double d) {
  visit_field(c, field, [&](const FieldInfo& f, auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, double>) {
      check_range(f, d);
      v = d;
    } else if constexpr (std::is_same_v<V, std::optional<double>>) {
      V parsed = std::isnan(d) ? V{} : V{d};
      check_range(f, parsed);
      v = parsed;
    } else {
      bad_value(f, real_text(d), "stored as a real (it is an integer)");
    }
  });
}

// ---- derived sizes --------------------------------------------------------------------

std::size_t TransformerConfig::resolved_head_dim() const {
  if (head_dim != 0) return head_dim;
  return heads == 0 ? 0 : d_model / heads;
}

std::size_t TransformerConfig::resolved_mlp_hidden() const {
  if (mlp_hidden != 0) return mlp_hidden;
  const std::size_t dense = mlp_ratio * d_model;
  // a gated kind has three matrices where GELU has two: 2/3 of the width keeps the count level
  if (mlp_gated(mlp)) return round_up(2 * dense / 3, mlp_multiple == 0 ? 1 : mlp_multiple);
  return dense;
}

double TransformerConfig::resolved_attention_scale() const {
  if (attention_scale) return *attention_scale;  // the one place the two fields' order is said
  return query_scale > 0 ? query_scale : default_attention_scale(resolved_head_dim());
}

RopeSpec TransformerConfig::rope() const {
  RopeSpec s;
  s.theta = rope_theta;
  s.style = rope_style;
  s.scaling = rope_scaling;
  s.factor = rope_factor;
  s.low_freq_factor = rope_low_freq_factor;
  s.high_freq_factor = rope_high_freq_factor;
  s.original_context = rope_original_context;
  s.beta_fast = rope_beta_fast;
  s.beta_slow = rope_beta_slow;
  return s;
}

std::size_t TransformerConfig::layer_window(std::size_t layer) const {
  const std::size_t counted = window_global_first ? layer : layer + 1;
  const bool global = window_pattern > 0 && counted % window_pattern == 0;
  return global ? 0 : window;
}

LayerPlan TransformerConfig::layer_plan(std::size_t layer) const {
  LayerPlan plan;
  AttentionSpec& s = plan.attention;
  s = causal_spec(heads, resolved_kv_heads(), layer_window(layer));
  s.head_dim = resolved_head_dim();
  s.scale = resolved_attention_scale();
  s.bias = positions == PositionKind::alibi ? PositionBias::alibi : PositionBias::none;
  s.softcap = attn_softcap;
  plan.experts = is_moe_layer(layer) ? experts : 0;
  plan.mlp_hidden = resolved_mlp_hidden();
  return plan;
}

// ---- validation and equality ------------------------------------------------------------

void TransformerConfig::validate() const {
#define TAPEGRAD_CHECK_RANGE(role, type, name, default_value, lo, hi, since, old, doc) \
  check_range(info(#name), name);
  TAPEGRAD_TRANSFORMER_FIELDS(TAPEGRAD_CHECK_RANGE)
#undef TAPEGRAD_CHECK_RANGE
  const std::size_t kv = resolved_kv_heads();
  if (kv > heads) fail("config", "kv_heads={} exceeds heads={}", kv, heads);
  if (heads % kv != 0) fail("config", "heads={} is not divisible by kv_heads={}", heads, kv);
  if (head_dim == 0 && d_model % heads != 0)
    fail("config", "d_model={} is not divisible by heads={} (or set head_dim)", d_model, heads);
  if (positions == PositionKind::rope) {
    if (resolved_head_dim() % 2 != 0)
      fail("config", "positions=rope needs an even head_dim, got head_dim={}", resolved_head_dim());
    check_rope_spec("config", resolved_head_dim(), rope());
  }
  if (mlp != MlpKind::none && resolved_mlp_hidden() == 0)
    fail("config", "the feed-forward hidden width is 0");
  if (mlp == MlpKind::none && experts > 0)
    fail("config", "experts={} needs a feed-forward to make experts of, but mlp=none", experts);
  // top_k is only meaningful with experts; a dense model keeps the default whatever it is
  if (experts > 0 && experts_top_k > experts)
    fail("config", "experts_top_k={} must be in [1, experts={}]: a token cannot use more "
         "experts than the layer has", experts_top_k, experts);
  if (window > 0 && window_pattern > layers)
    fail("config", "window_pattern={} exceeds layers={}: every layer would be windowed (use 0)",
         window_pattern, layers);
  if (window > 0 && window_pattern == 1)
    fail("config", "window_pattern=1 makes every layer global: set window=0 instead of window={}",
         window);
  for (const auto& [name, cap] : {std::pair{"attn_softcap", attn_softcap},
                                  std::pair{"final_softcap", final_softcap}})
    if (!valid_softcap(cap))
      fail("config", "{}={} must be 0 (off) or in [{}, {}]", name, cap, kMinSoftcap, kMaxSoftcap);
  // a mixture of experts' auxiliary losses leave the block beside its output, and its
  // capacity holds in the training forward only: running the block again in the backward
  // would lose the first and break the second
  if (experts > 0 && checkpoint_activations)
    fail("config", "checkpoint_activations does not work with experts={} (the auxiliary losses "
         "leave the block beside its output); use a dense model or leave it off", experts);
  if (experts > 0 && moe_every > layers)
    fail("config", "moe_every={} exceeds layers={}: no layer would have experts (experts={})",
         moe_every, layers, experts);
}

bool TransformerConfig::is_moe_layer(std::size_t layer) const {
  return experts > 0 && (layer + 1) % moe_every == 0;
}

std::size_t TransformerConfig::moe_layers() const {
  return experts > 0 ? layers / moe_every : 0;
}

bool TransformerConfig::operator==(const TransformerConfig& o) const {
#define TAPEGRAD_EQUAL(role, type, name, default_value, lo, hi, since, old, doc) &&name == o.name
  return true TAPEGRAD_TRANSFORMER_FIELDS(TAPEGRAD_EQUAL);
#undef TAPEGRAD_EQUAL
}

// ---- presets -----------------------------------------------------------------------------

// Each preset is its Hugging Face family's base model (nn/io/hf/<type>.cpp).
std::vector<std::string> preset_names() { return hf::preset_families(); }

namespace {

const hf::Family& preset_family(const std::string& name) {
  const hf::Family* family = hf::find_family(name);
  if (!family || !family->is_preset)
    fail("config", "unknown preset '{}' (known: {})", name, fmt::join(preset_names(), ", "));
  return *family;
}

}  // namespace

TransformerConfig preset(const std::string& name) { return preset_family(name).preset(); }

void finish_preset(const std::string& name, TransformerConfig& c,
                   const std::function<bool(const std::string&)>& given) {
  const hf::Family& family = preset_family(name);
  if (family.finish_preset) family.finish_preset(c, given);
}

// ---- what a program prints -----------------------------------------------------------------

std::string config_summary(const TransformerConfig& c) {
  std::string out;
  for (const FieldInfo& f : config_fields()) {
    if (f.role == FieldRole::initialisation) continue;
    if (!out.empty()) out += ' ';
    out += f.name;
    out += '=';
    out += field_to_string(c, f.name);
  }
  return out;
}

std::uint64_t ParameterCounts::total() const {
  return token_embedding + position_embedding + attention_q + attention_kv + attention_out +
         qk_norm + temperature + feed_forward + router + norms + unembedding;
}

// count_parameters sums the parameter plan: nn/parameter_plan.cpp.

std::uint64_t kv_cache_bytes_per_token(const TransformerConfig& c, std::size_t bytes_per_value) {
  return std::uint64_t(2) * c.layers * c.resolved_kv_heads() * c.resolved_head_dim() *
         bytes_per_value;
}

KVDtype kv_dtype_from_name(const std::string& name) {
  if (name == "f32") return KVDtype::model;
  if (name == "bf16") return KVDtype::bf16;
  fail("KVCache", "the cache's dtype is f32 (the model's type) or bf16, got '{}'", name);
}

std::string to_string(MlpKind k) { return Choices<MlpKind>::names().at(std::size_t(k)); }
std::string to_string(PositionKind k) { return Choices<PositionKind>::names().at(std::size_t(k)); }
std::string to_string(NormKind k) { return Choices<NormKind>::names().at(std::size_t(k)); }

}  // namespace tapegrad
