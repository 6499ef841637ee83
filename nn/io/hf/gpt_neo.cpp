// GPT-Neo (GPTNeoForCausalLM), and the TinyStories models built on it: learned positions,
// LayerNorm, a GELU MLP with biases, q, k and v without biases and out_proj with one, scores
// NOT scaled by 1/sqrt(head_dim), and per-layer attention kinds: "global" (every earlier key)
// or "local" (the last window_size keys, the query's own among them), as attention_layers
// lists them or attention_types [[kinds, repeats], ...] expands to.
#include <algorithm>

#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// Named, not anonymous: the family files compile together in one unity batch.
namespace gpt_neo_parts {

constexpr std::size_t kWindowSize = 256;  // GPTNeoConfig's window_size

// One "global" or "local" per layer: attention_types [[kinds, n], ...] expanded, which
// transformers requires to have num_layers entries; attention_layers when the file has it,
// because PretrainedConfig sets the saved list over the expanded one.
std::vector<std::string> attention_kinds(ConfigReader& r, std::size_t layers) {
  const json fallback = json::parse(R"([[["global", "local"], 12]])");
  const json* types = r.get("attention_types");
  const json& t = types ? *types : fallback;
  std::vector<std::string> expanded;
  const auto kind_of = [&](const json& k, const char* key) {
    if (!k.is_string() || (k != "global" && k != "local"))
      r.refuse("{} holds {}: each layer's attention is \"global\" or \"local\"", key, k.dump());
    return k.get<std::string>();
  };
  if (!t.is_array()) r.refuse("attention_types must be a list of [kinds, repeats], got {}", t.dump());
  for (const json& item : t) {
    if (!item.is_array() || item.size() != 2 || !item[0].is_array() || !item[1].is_number_unsigned())
      r.refuse("attention_types holds {}: each entry is [[\"global\" or \"local\", ...], repeats]",
               item.dump());
    const std::size_t repeats = item[1].get<std::size_t>();
    if (repeats > layers || item[0].size() > layers || expanded.size() > layers)
      r.refuse("attention_types expands to more than num_layers={} layers", layers);
    for (std::size_t i = 0; i < repeats; ++i)
      for (const json& k : item[0]) expanded.push_back(kind_of(k, "attention_types"));
  }
  if (expanded.size() != layers)
    r.refuse("attention_types expands to {} layers but num_layers is {} (transformers requires "
             "them equal)", expanded.size(), layers);
  const json* saved = r.get("attention_layers");
  if (!saved) return expanded;
  if (!saved->is_array() || saved->size() != layers)
    r.refuse("attention_layers must list one kind for each of the {} layers, got {}", layers,
             saved->dump());
  std::vector<std::string> listed;
  for (const json& k : *saved) listed.push_back(kind_of(k, "attention_layers"));
  return listed;
}

// The kinds as tapegrad's window fields: every layer one kind (window_pattern 0), or one
// global layer in every n, first (0, n, 2n, ...: GPT-Neo's own) or last (n-1, 2n-1, ...).
void read_kinds(ConfigReader& r, Config& c, const std::vector<std::string>& kinds,
                std::size_t window_size) {
  std::vector<std::size_t> global;
  for (std::size_t l = 0; l < kinds.size(); ++l)
    if (kinds[l] == "global") global.push_back(l);
  c.window = global.size() == kinds.size() ? 0 : window_size;
  c.window_pattern = 0;
  c.window_global_first = false;
  if (global.empty() || global.size() == kinds.size()) return;
  const bool first = global[0] == 0;
  const std::size_t n = first ? (global.size() > 1 ? global[1] : kinds.size()) : global[0] + 1;
  for (std::size_t l = 0; l < kinds.size(); ++l) {
    const bool is_global = (first ? l : l + 1) % n == 0;
    if (is_global != (kinds[l] == "global") || n < 2)
      r.refuse("attention layers {} are not one global layer in every n, first or last, which "
               "is what tapegrad's window_pattern holds", json(kinds).dump());
  }
  c.window_pattern = n;
  c.window_global_first = first;
}

std::vector<std::string> kinds_of(const Config& c) {
  std::vector<std::string> kinds;
  for (std::size_t l = 0; l < c.layers; ++l)
    kinds.push_back(c.layer_plan(l).attention.window == 0 ? "global" : "local");
  return kinds;
}

// The kinds as attention_types: one period repeated, and the layers left over after it.
json attention_types(const Config& c) {
  const std::vector<std::string> kinds = kinds_of(c);
  const std::size_t period = c.window_pattern > 0 && c.window > 0 ? c.window_pattern : 1;
  const std::size_t repeats = kinds.size() / period, rest = kinds.size() % period;
  json types = json::array();
  types.push_back(json::array({std::vector<std::string>(kinds.begin(), kinds.begin() + period), repeats}));
  if (rest > 0)
    types.push_back(json::array({std::vector<std::string>(kinds.end() - rest, kinds.end()), 1}));
  return types;
}

std::vector<ConfigKey> keys() {
  const ConfigKey inner = {"intermediate_size",
                           [](ConfigReader& r, Config& c) {
                             const auto inner = r.nullable_size("intermediate_size", std::nullopt);
                             if (inner && *inner == 0)
                               r.refuse("intermediate_size must be positive (or null: 4 x hidden_size)");
                             c.mlp_hidden = inner ? *inner : 4 * c.d_model;
                           },
                           [](const Config& c, const json&) {
                             const std::size_t F = c.resolved_mlp_hidden();
                             return F == 4 * c.d_model ? json(nullptr) : json(F);
                           }};
  const ConfigKey window_size = {"window_size",
                                 [](ConfigReader& r, Config& c) {
                                   const std::size_t w = r.size("window_size", kWindowSize);
                                   if (w == 0)
                                     r.refuse("window_size must be positive: a local layer of "
                                              "window 0 would hide every key, the query's own too");
                                   c.window = w;
                                 },
                                 [](const Config& c, const json&) {
                                   return json(c.window > 0 ? c.window : kWindowSize);
                                 }};
  const ConfigKey types = {"attention_types",
                           [](ConfigReader& r, Config& c) {
                             read_kinds(r, c, attention_kinds(r, c.layers), c.window);
                           },
                           [](const Config& c, const json&) { return attention_types(c); }};
  // read with attention_types, written as transformers' save_pretrained writes it
  const ConfigKey layers = {"attention_layers", [](ConfigReader&, Config&) {},
                            [](const Config& c, const json&) { return json(kinds_of(c)); }};
  return {size_key("vocab_size", &Config::vocab, 50257),
          size_key("max_position_embeddings", &Config::context, 2048),
          size_key("hidden_size", &Config::d_model, 2048),
          size_key("num_layers", &Config::layers, 24),
          size_key("num_heads", &Config::heads, 16),
          inner,
          window_size,
          types,
          layers,
          choice_key("activation_function", {"gelu_new", "gelu_pytorch_tanh"}, "gelu_new",
                     "tapegrad's GELU is the tanh form: gelu_new or gelu_pytorch_tanh"),
          real_key("layer_norm_epsilon", &Config::norm_eps, 1e-5),
          always([](Config& c) {
            c.attn_qkv_bias = false;
            c.attn_out_bias = c.mlp_bias = true;
            c.attention_scale = 1.0;  // GPTNeoSelfAttention goes from q k^T to the softmax
          }),
          flag_key("tie_word_embeddings", &Config::tie_embeddings, true)};
}

std::vector<Requirement> requirements() {
  Parts has;
  has.per_layer_windows = true;
  return concat<Requirement>(
      {parts(has),
       gpt2_layout_requirements(),
       {need("attn_qkv_bias", [](const Config& c) { return !c.attn_qkv_bias; },
             "has no biases on q, k and v"),
        need(scale_field, [](const Config& c) { return c.resolved_attention_scale() == 1.0; },
             "does not scale its scores (attention_scale 1)")}});
}

// GPT-2's names but for attention: q, k, v and out apart, under attn.attention, as
// nn.Linear (out, in).
TensorNames tensors() {
  TensorNames n = gpt2_family().tensors;
  n.qkv.clear();
  n.q = "attn.attention.q_proj";
  n.k = "attn.attention.k_proj";
  n.v = "attn.attention.v_proj";
  n.o = "attn.attention.out_proj";
  n.conv1d = false;
  // the causal mask's buffers, which files written before 4.x kept
  n.dropped_suffixes = {".attn.attention.bias", ".attn.attention.masked_bias"};
  return n;
}

}  // namespace gpt_neo_parts

bool has_gpt_neo_marks(const TransformerConfig& c) {
  return c.positions == PositionKind::learned && c.window > 0 &&
         c.resolved_attention_scale() == 1.0;
}

const Family& gpt_neo_family() {
  static const Family family = [] {
    using namespace gpt_neo_parts;
    Family f;
    f.model_type = "gpt_neo";
    f.causal_lm_class = "GPTNeoForCausalLM";
    f.preset = [] {
      TransformerConfig c;  // GPT-2's parts: learned positions, LayerNorm, GELU
      c.attn_qkv_bias = false;
      c.attn_out_bias = c.mlp_bias = true;  // out_proj and the feed-forward's biases
      c.attention_scale = 1.0;
      c.tie_embeddings = true;
      c.window_pattern = 2;
      c.window_global_first = true;
      return c;
    };
    f.is_preset = true;
    // half the context: the local layers see less than the global ones within a sequence
    f.finish_preset = [](TransformerConfig& c, const std::function<bool(const std::string&)>& given) {
      if ((!given || !given("window")) && c.window == 0 && c.context >= 2 && c.layers >= 2)
        c.window = c.context / 2;
      if (c.window == 0 || c.layers < 2) {
        c.window_pattern = 0;
        c.window_global_first = false;
      }
    };
    f.keys = keys();
    f.harmless_keys = {"resid_dropout", "embed_dropout", "attention_dropout",
                       "classifier_dropout", "gradient_checkpointing", "summary_type",
                       "summary_use_proj", "summary_activation", "summary_proj_to_labels",
                       "summary_first_dropout"};
    f.requirements = requirements();
    f.claims = has_gpt_neo_marks;
    f.biases = [](const Config&) { return FileBiases{false, true, true}; };
    f.tensors = tensors();
    return f;
  }();
  return family;
}

}  // namespace tapegrad::hf
