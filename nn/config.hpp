#pragma once
// The transformer's configuration: every field declared once, in TAPEGRAD_TRANSFORMER_FIELDS
// below, with its name, default, valid range and a one-line doc. Validation, equality, the
// checkpoint's `__config__.*` entries, the programs' command-line options and the printed
// summary all walk that list (for_each_field); none of them names a field by hand, so a
// new model option is one line here plus the code that uses it.
//
// The defaults are the `gpt2` preset, which is exactly the 2017/GPT-2 model tapegrad
// trained before the modern parts existed: learned positions, LayerNorm, a GELU MLP with
// biases, one K/V head per query head. The `llama` preset swaps each part for its modern
// replacement.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nn/feed_forward_kind.hpp"  // MlpKind
#include "nn/init.hpp"    // AttentionInit
#include "nn/layers.hpp"  // NormKind
#include "ops/attention_spec.hpp"  // AttentionSpec, PositionBias
#include "ops/rope.hpp"   // RopeSpec, RopeStyle, RopeScaling

namespace tapegrad {

// The seed has a type of its own so that the field list can tell it from a size (both are
// 64-bit unsigned integers here); it converts to and from std::uint64_t implicitly.
struct Seed {
  std::uint64_t value = 0;
  constexpr Seed(std::uint64_t v = 0) : value(v) {}
  constexpr operator std::uint64_t() const { return value; }
};
enum class PositionKind { learned, rope, none, alibi };

// The role of a field: the architecture (what a checkpoint's weights depend on), the
// objective (a weight in the training loss only: the forward pass and the parameters do not
// depend on it, so a resumed run may change it), only how the parameters are first drawn,
// or the execution: how a forward and backward run, never what they compute (the same
// numbers either way, so a resumed run changes it freely and without notice). An execution
// field is not stored in checkpoints (its `since` is 0: no format holds it; a model read
// from a file has the default until the program or the user sets it).
// Loading into an existing model compares the architecture alone.
enum class FieldRole { architecture, objective, initialisation, execution };

inline constexpr double kUnbounded = 1e300;

// X(role, type, name, default, min, max, since, old, doc): min/max bound numbers (inclusive);
// they are ignored for flags and choices. Sizes stop at 2^24, so that a damaged or hostile
// checkpoint cannot describe a model whose size arithmetic overflows.
// `since` is the checkpoint format that first stored the field, and `old` the value a file
// of an earlier format stands for (the model that was built before the field existed). The
// format this build writes is the newest `since`, so a new field is a line here with
// since = that format + 1 and old = the value that keeps older files' models unchanged
// (nn/io/checkpoint.hpp has the rule; docs/ARCHITECTURE.md walks through it).
#define TAPEGRAD_TRANSFORMER_FIELDS(X)                                                          \
  X(architecture, std::size_t, vocab, 0, 1, 1 << 24, 1, 0,                                      \
    "vocabulary size: tokens are ids in [0, vocab)")                                            \
  X(architecture, std::size_t, context, 0, 1, 1 << 24, 1, 0,                                    \
    "longest sequence the model takes")                                                         \
  X(architecture, std::size_t, d_model, 64, 1, 1 << 24, 1, 64,                                  \
    "width of the residual stream")                                                             \
  X(architecture, std::size_t, layers, 2, 1, 1 << 24, 1, 2,                                     \
    "transformer blocks")                                                                       \
  X(architecture, std::size_t, heads, 4, 1, 1 << 24, 1, 4,                                      \
    "query heads")                                                                              \
  X(architecture, std::size_t, kv_heads, 0, 0, 1 << 24, 2, 0,                                   \
    "key/value heads, shared by heads/kv_heads query heads each (0: = heads, MHA; 1: MQA)")     \
  X(architecture, std::size_t, head_dim, 0, 0, 1 << 24, 2, 0,                                   \
    "width of one head (0: d_model/heads); heads*head_dim need not equal d_model")              \
  X(architecture, NormKind, norm, NormKind::layer_norm, 0, 0, 1, NormKind::layer_norm,          \
    "normalisation: layer (LayerNorm), rms (RMSNorm) or gemma (RMSNorm with gain 1 + w, w "   \
    "from 0, so that an exported w is exact)")                                                  \
  X(architecture, bool, embed_norm, false, 0, 0, 7, false,                                      \
    "a norm of the model's kind on the embeddings, before the first block (BLOOM)")             \
  X(architecture, bool, embed_scale, false, 0, 0, 7, false,                                     \
    "token embeddings times sqrt(d_model) before the first block; a tied head uses the "        \
    "unscaled matrix (Gemma)")                                                                  \
  X(architecture, bool, post_norms, false, 0, 0, 7, false,                                      \
    "a norm on the attention's and the feed-forward's outputs before each residual add, "       \
    "besides the pre-norms (Gemma 2's sandwich)")                                               \
  X(architecture, double, embed_multiplier, 1.0, 1e-6, 1e6, 8, 1.0,                             \
    "token embeddings times this before the first block (after embed_scale); a tied head uses " \
    "the plain matrix (Granite's embedding_multiplier)")                                        \
  X(architecture, double, residual_multiplier, 1.0, 1e-6, 1e6, 8, 1.0,                          \
    "each sub-layer's output times this before it is added to the residual stream (Granite)")   \
  X(architecture, double, logit_divisor, 1.0, 1e-6, 1e6, 8, 1.0,                                \
    "the logits divided by this, before final_softcap (Granite's logits_scaling)")              \
  X(architecture, double, norm_eps, 1e-5, 1e-12, 1.0, 2, 1e-5,                                  \
    "epsilon inside every norm")                                                                \
  X(architecture, MlpKind, mlp, MlpKind::gelu, 0, 0, 2, MlpKind::gelu,                          \
    "feed-forward: gelu (up, GELU, down), swiglu (down(silu(gate(x)) * up(x))), geglu "        \
    "(down(gelu(gate(x)) * up(x))) or none (attention-only blocks: no second norm, no "        \
    "feed-forward)")                                                                            \
  X(architecture, std::size_t, mlp_ratio, 4, 1, 64, 1, 4,                                       \
    "the default hidden width: mlp_ratio*d_model (gelu), 2/3 of it (swiglu, geglu)")                   \
  X(architecture, std::size_t, mlp_hidden, 0, 0, 1 << 24, 2, 0,                                 \
    "feed-forward hidden width (0: from mlp_ratio; a gated kind rounds up to mlp_multiple)")          \
  X(architecture, std::size_t, mlp_multiple, 32, 1, 1 << 16, 2, 32,                             \
    "a gated kind's default hidden width is rounded up to a multiple of this")                     \
  X(architecture, bool, mlp_bias, true, 0, 0, 2, true,                                          \
    "the feed-forward Linears have biases")                                                     \
  X(architecture, bool, attn_qkv_bias, false, 0, 0, 6, false,                                   \
    "biases on the q, k and v projections, added right after each product (GPT-2, Qwen2)")      \
  X(architecture, bool, attn_out_bias, false, 0, 0, 6, false,                                   \
    "a bias on the attention's output projection (GPT-2)")                                      \
  X(architecture, PositionKind, positions, PositionKind::learned, 0, 0, 2, PositionKind::learned, \
    "positions: learned (a table added to the embeddings), rope (rotary, on q and k), none or " \
    "alibi (a per-head linear bias -slope*(i-j) on the scores)")                                \
  X(architecture, double, rope_theta, 10000.0, 1e-6, kUnbounded, 2, 10000.0,                    \
    "RoPE base: inv_freq[i] = theta^(-2i/head_dim) (Llama 3: 500000)")                          \
  X(architecture, RopeStyle, rope_style, RopeStyle::half, 0, 0, 2, RopeStyle::half,             \
    "RoPE pairs: half (i, i+head_dim/2; HF/NeoX) or interleaved (2i, 2i+1; Meta/GPT-J)")        \
  X(architecture, RopeScaling, rope_scaling, RopeScaling::none, 0, 0, 2, RopeScaling::none,     \
    "RoPE frequency scaling: none, linear, ntk, llama3 or yarn")                                \
  X(architecture, double, rope_factor, 1.0, 1e-6, 1e6, 2, 1.0,                                  \
    "RoPE scaling factor (linear, ntk, llama3, yarn)")                                          \
  X(architecture, double, rope_low_freq_factor, 1.0, 1e-6, 1e6, 2, 1.0,                         \
    "llama3 scaling: low_freq_factor")                                                          \
  X(architecture, double, rope_high_freq_factor, 4.0, 1e-6, 1e6, 2, 4.0,                        \
    "llama3 scaling: high_freq_factor")                                                         \
  X(architecture, std::size_t, rope_original_context, 0, 0, 1 << 24, 2, 0,                      \
    "llama3/yarn scaling: original_max_position_embeddings")                                    \
  X(architecture, double, rope_beta_fast, 32.0, 1e-6, 1e6, 2, 32.0,                             \
    "yarn scaling: beta_fast")                                                                  \
  X(architecture, double, rope_beta_slow, 1.0, 1e-6, 1e6, 2, 1.0,                               \
    "yarn scaling: beta_slow")                                                                  \
  X(architecture, std::size_t, window, 0, 0, 1 << 24, 2, 0,                                     \
    "sliding window: each query sees this many keys, itself included (0: full causal)")         \
  X(architecture, std::size_t, window_pattern, 0, 0, 1 << 24, 7, 0,                             \
    "the layers the window applies to: 0 every layer; n: every n-th layer (n-1, 2n-1, ...) "    \
    "is global, the others windowed (Gemma 2: 2, windowed layers 0, 2, 4, ...)")                \
  X(architecture, bool, window_global_first, false, 0, 0, 8, false,                             \
    "window_pattern n's global layers are 0, n, 2n, ... instead of n-1, 2n-1, ... (GPT-Neo: "   \
    "global, local, global, ...)")                                                              \
  X(architecture, bool, qk_norm, false, 0, 0, 2, false,                                         \
    "RMSNorm with a learned gain over each head's q and k, before RoPE")                        \
  X(initialisation, double, qk_norm_gain, 1.0, 1e-6, 1e6, 3, 1.0,                               \
    "initial value of every QK-norm gain: the scores start at gain^2 x q.k of unit-RMS heads")  \
  X(architecture, bool, learned_temperature, false, 0, 0, 3, false,                             \
    "a learned scalar per head multiplies q.k on top of attention_scale, from 1/sqrt(head_dim)") \
  X(architecture, double, attn_softcap, 0.0, 0.0, kUnbounded, 4, 0.0,                            \
    "attention logit soft-cap c: scaled scores s -> c*tanh(s/c) before bias and mask (0: off; "  \
    "else 1e-30 to 1e30)")                                                                     \
  X(architecture, double, final_softcap, 0.0, 0.0, kUnbounded, 4, 0.0,                           \
    "final logit soft-cap c: logits l -> c*tanh(l/c) before the loss and sampling (0: off; " \
    "else 1e-30 to 1e30)")                                                                     \
  X(architecture, bool, tie_embeddings, false, 0, 0, 2, false,                                  \
    "the head reuses the token embedding's matrix, transposed")                                 \
  X(architecture, std::optional<double>, attention_scale, std::nullopt, 1e-300, kUnbounded, 1, std::nullopt, \
    "factor on q.k (default: query_scale if set, else 1/sqrt(head_dim); 1 = unscaled)")         \
  X(architecture, double, query_scale, 0.0, 0.0, kUnbounded, 7, 0.0,                            \
    "the factor on q.k as the model defines it, in place of 1/sqrt(head_dim) (Gemma 2: "        \
    "query_pre_attn_scalar^-0.5; 0: unset); attention_scale, when given, overrides it")        \
  X(initialisation, AttentionInit, attention_init, AttentionInit::gpt2, 0, 0, 1, AttentionInit::gpt2, \
    "Wq/Wk/Wv init: gpt2 (normal 0.02) or variance_preserving (normal 1/sqrt(d_model))")        \
  X(initialisation, Seed, seed, 0, 0, 0, 1, 0,                                                  \
    "seed of the parameters' initialisation")                                                   \
  X(architecture, std::size_t, experts, 0, 0, 1 << 16, 5, 0,                                    \
    "mixture of experts: feed-forward experts per MoE layer, each the model's MLP (0: dense)")  \
  X(architecture, std::size_t, experts_top_k, 2, 1, 1 << 16, 5, 2,                              \
    "experts each token is routed to, by router probability (ties: the lower index)")          \
  X(architecture, bool, moe_renorm, true, 0, 0, 5, true,                                        \
    "the k kept router probabilities are divided by their sum (Mixtral); off: raw (Switch)")    \
  X(objective, double, moe_aux_coef, 0.01, 0.0, kUnbounded, 5, 0.01,                            \
    "load-balancing loss weight: coef x mean over MoE layers of E * sum_e f_e * P_e")           \
  X(objective, double, moe_z_coef, 0.001, 0.0, kUnbounded, 5, 0.001,                            \
    "router z-loss weight: coef x mean over MoE layers of mean_t logsumexp(logits_t)^2")        \
  X(architecture, double, moe_capacity, 0.0, 0.0, kUnbounded, 5, 0.0,                           \
    "capacity factor c, in training only: an expert takes at most ceil(c*T*k/E) of a training " \
    "forward's tokens (0: dropless); evaluation and generation are always dropless")          \
  X(architecture, std::size_t, moe_every, 1, 1, 1 << 24, 5, 1,                                  \
    "MoE in every n-th layer (layers n-1, 2n-1, ...), dense feed-forward elsewhere")              \
  X(execution, bool, checkpoint_activations, false, 0, 0, 0, false,                              \
    "keep only each block's input through a training forward and compute the block again in "   \
    "the backward: one block's activations at a time, a third more compute, the same numbers")

// One layer of a model, every zero default filled in (kv_heads, head_dim and the scale are
// never left for a reader to resolve), so that the block, the KV cache, the hooks and the
// exporters cannot disagree about what the layer is.
struct LayerPlan {
  AttentionSpec attention;  // causal; its kv_heads, head_dim, scale, window and modifiers
  std::size_t experts = 0;  // 0: a dense feed-forward; else a mixture of this many experts
  std::size_t mlp_hidden = 0;  // the feed-forward's (each expert's) hidden width
};

struct TransformerConfig {
#define TAPEGRAD_DECLARE_FIELD(role, type, name, default_value, lo, hi, since, old, doc) \
  type name = default_value;
  TAPEGRAD_TRANSFORMER_FIELDS(TAPEGRAD_DECLARE_FIELD)
#undef TAPEGRAD_DECLARE_FIELD

  // What the zero defaults resolve to.
  std::size_t resolved_kv_heads() const { return resolve_kv_heads(heads, kv_heads); }
  std::size_t resolved_head_dim() const;
  std::size_t resolved_mlp_hidden() const;
  // attention_scale, else query_scale when set, else 1/sqrt(head_dim).
  double resolved_attention_scale() const;
  RopeSpec rope() const;
  // Layer l (from 0) has a mixture of experts: experts > 0 and (l + 1) % moe_every == 0.
  bool is_moe_layer(std::size_t layer) const;
  std::size_t moe_layers() const;
  // Layer l's window: `window`, or 0 on the global layers of window_pattern (l + 1 or, with
  // window_global_first, l a multiple of it).
  std::size_t layer_window(std::size_t layer) const;
  // Everything layer l is, resolved: what its block builds, its KV cache holds and an
  // exporter writes.
  LayerPlan layer_plan(std::size_t layer) const;
  // Every layer has the same window (window_pattern 0, or no window at all).
  bool uniform_window() const { return window == 0 || window_pattern == 0; }

  // Throws ShapeError "config: ..." naming the field: a value outside its range, or a
  // combination that cannot be built (kv_heads not dividing heads, rope with an odd
  // head_dim, a rope scaling without the fields it needs, ...).
  void validate() const;
  bool operator==(const TransformerConfig& o) const;
  bool operator!=(const TransformerConfig& o) const { return !(*this == o); }
};

// The newest format a field declares: the checkpoint format this build writes.
#define TAPEGRAD_FIELD_SINCE(role, type, name, default_value, lo, hi, since, old, doc) since,
inline constexpr int kNewestFieldFormat = std::max({TAPEGRAD_TRANSFORMER_FIELDS(TAPEGRAD_FIELD_SINCE)});
#undef TAPEGRAD_FIELD_SINCE

// Every field at its `old` value: the configuration a checkpoint stands for in the fields
// its format predates.
TransformerConfig config_before_fields();

// The 2017 transformer as GPT-2 built it (and as tapegrad's Transformer always was): the
// defaults above.
TransformerConfig gpt2_preset();
// RoPE (half, theta 10000), RMSNorm, SwiGLU without biases, grouped-query attention with
// kv_heads = heads/2 (when heads is even), no biases anywhere, an untied head.
TransformerConfig llama_preset();
// llama with a mixture of experts in every layer: 8 experts, top 2, renormalised (Mixtral).
TransformerConfig mixtral_preset();
// Gemma 2 at toy size: llama's RoPE and grouped-query heads with gemma norms (eps 1e-6) on
// both sides of each sub-layer, embeddings times sqrt(d_model), GeGLU, a tied head, soft-caps
// 50 (attention) and 30 (logits), the window (context/2 by finish_preset) on layers 0, 2, 4.
TransformerConfig gemma2_preset();
// BLOOM: ALiBi and no positions, LayerNorm on the embeddings, GELU MLP and every attention
// projection with biases, a tied head.
TransformerConfig bloom_preset();
// The preset of that name, one of preset_names(): each a Hugging Face family's base model
// (nn/io/hf/<name>.cpp; the functions above are its presets by name); ShapeError naming the
// known ones otherwise.
TransformerConfig preset(const std::string& name);
std::vector<std::string> preset_names();
// Applies the parts of a preset that depend on sizes chosen after it (the grouped presets'
// kv_heads, gemma2's window); a field that given(field) says the user set is left as set.
void finish_preset(const std::string& name, TransformerConfig& c,
                   const std::function<bool(const std::string&)>& given = {});

// A field's description, for programs that walk the list (options, summaries, files).
struct FieldInfo {
  const char* name;
  const char* doc;
  FieldRole role;
  int since;  // the checkpoint format that first stored it
  enum class Kind { size, real, flag, choice, optional_real, seed } kind;
  double min, max;
  std::vector<std::string> choices;  // Kind::choice: the names, in the order of the enum
};
const std::vector<FieldInfo>& config_fields();
// The field's value as text ("rms", "1e-05", "true", "default", "64"), and back (the same
// spellings; ShapeError "config: ..." naming the field and what it accepts).
std::string field_to_string(const TransformerConfig& c, const std::string& field);
void set_field_from_string(TransformerConfig& c, const std::string& field,
                           const std::string& text);
// As an int64 or a double, the checkpoint's encoding: sizes, flags and seed as int64
// (choices as the index of their name), reals as double (attention_scale NaN = default).
bool field_is_real(const std::string& field);
std::int64_t field_to_int64(const TransformerConfig& c, const std::string& field);
double field_to_double(const TransformerConfig& c, const std::string& field);
// ShapeError naming the field when the value is not one the field can hold.
void set_field_from_int64(TransformerConfig& c, const std::string& field, std::int64_t v);
void set_field_from_double(TransformerConfig& c, const std::string& field, double v);

// "vocab=65 context=64 d_model=128 ..." over the architecture's and the objective's fields.
std::string config_summary(const TransformerConfig& c);

// Some fields shape the model only under another field's value: rope_theta under
// positions=rope, experts_top_k under experts > 0, mlp_ratio while mlp_hidden = 0. Given
// where they do not apply, they change nothing. For the first field that given(field) says
// the user set and that does not apply in c: "<name> applies to <condition> only, not
// <what c has>", with name(field) spelling the field as the user wrote it (the field, or a
// program's option); nullopt when every given field applies. Programs refuse such a field,
// Python warns.
std::optional<std::string> inapplicable_given_field(
    const TransformerConfig& c, const std::function<bool(const std::string&)>& given,
    const std::function<std::string(const std::string&)>& name);

// Parameter counts from the configuration alone (no allocation), per component.
struct ParameterCounts {
  std::uint64_t token_embedding = 0, position_embedding = 0;
  std::uint64_t attention_q = 0, attention_kv = 0, attention_out = 0, qk_norm = 0;
  std::uint64_t temperature = 0;
  // feed_forward counts every expert of the MoE layers; router is their W_router (D, E).
  std::uint64_t feed_forward = 0, router = 0, norms = 0, unembedding = 0;
  // The expert weights one token does not use: (experts - top_k) experts per MoE layer.
  std::uint64_t inactive_experts = 0;
  std::uint64_t total() const;
  // What one token uses: compute follows this, memory the total.
  std::uint64_t active() const { return total() - inactive_experts; }
};
ParameterCounts count_parameters(const TransformerConfig& c);
// 2 x layers x kv_heads x head_dim x bytes_per_value: what the KV cache grows by per token.
std::uint64_t kv_cache_bytes_per_token(const TransformerConfig& c, std::size_t bytes_per_value);

// What a cache stores: the model's type (float or double), or bf16 (float32 models only).
enum class KVDtype { model, bf16 };
// "f32" (the model's type) or "bf16", as --kv-dtype and Python spell them; ShapeError
// "KVCache: ..." for another name.
KVDtype kv_dtype_from_name(const std::string& name);
// Bytes per stored number in a T model's cache.
template <class T>
constexpr std::size_t kv_value_bytes(KVDtype dtype) {
  return dtype == KVDtype::bf16 ? 2 : sizeof(T);
}

std::string to_string(MlpKind k);
std::string to_string(PositionKind k);
std::string to_string(NormKind k);

}  // namespace tapegrad
