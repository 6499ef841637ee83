#pragma once
// The one specification of attention that every path (the composed reference, the fused
// kernels, flash and the one-query decode) implements, and the one function that
// checks it. A path never re-checks its arguments: it asks check_attention_spec for the
// resolved AttentionDims and computes from head_layout(dims), whose rule
// (ops/kernels/attention_rule.hpp) says which keys each query sees and what is done to
// their scores.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "autograd/errors.hpp"  // Shape, ShapeError
#include "ops/kernels/attention.hpp"  // HeadLayout

namespace tapegrad {

// The additive positional bias of a score.
enum class PositionBias {
  none,
  alibi  // -slope(h) * (i - j), slopes as Hugging Face's build_alibi_tensor; needs causal
};

// "none", "alibi": the bias's name in Python and in messages, and back (ShapeError naming
// `op` and the names there are for another).
std::string to_string(PositionBias bias);
PositionBias position_bias_from_name(std::string_view op, const std::string& name);
// Every bias's name, quoted and comma-separated: "'none', 'alibi'".
std::string position_bias_names();

// Every field of AttentionSpec, declared once: X(ctx, type, name, default, doc), `ctx` passed
// through unchanged (a caller's context: the Python bindings pass the defaults they show).
// The struct, its printer (to_string), the Python class and every Python attention
// function's keyword arguments walk this list; check_attention_spec holds the checks that
// tie fields to each other and to the shapes. `heads` comes first: Python takes it, or a
// whole AttentionSpec, positionally; the options after it are keywords.
#define TAPEGRAD_ATTENTION_SPEC_FIELDS(X, ctx)                                                 \
  X(ctx, std::size_t, heads, 1, "query heads")                                                \
  TAPEGRAD_ATTENTION_OPTIONS(X, ctx)
#define TAPEGRAD_ATTENTION_OPTIONS(X, ctx)                                                     \
  X(ctx, std::size_t, kv_heads, 0,                                                            \
    "key/value heads, each shared by heads/kv_heads query heads (0: = heads, MHA; 1: MQA)")   \
  X(ctx, std::size_t, head_dim, 0, "width of one head (0: q's width / heads)")                \
  X(ctx, std::optional<double>, scale, std::nullopt,                                          \
    "factor on q.k (None: 1/sqrt(head_dim); 1.0: unscaled); finite and > 0")                  \
  X(ctx, bool, causal, false, "query i sees keys j <= i only (positions bottom-right aligned)") \
  X(ctx, std::size_t, window, 0,                                                              \
    "0: no window; w: query i sees key j exactly when 0 <= i - j < w (itself included); "     \
    "needs causal")                                                                           \
  X(ctx, PositionBias, bias, PositionBias::none,                                              \
    "positional bias added to the scores: 'none' or 'alibi' (-slope(h) * (i - j)); needs "    \
    "causal")                                                                                 \
  X(ctx, double, softcap, 0.0,                                                                \
    "c > 0: scaled scores s -> c * tanh(s / c), before the bias and the mask; 0: off; else "  \
    "in [1e-30, 1e30]")

struct AttentionSpec {
#define TAPEGRAD_DECLARE_SPEC_FIELD(ctx, type, name, default_value, doc) type name = default_value;
  TAPEGRAD_ATTENTION_SPEC_FIELDS(TAPEGRAD_DECLARE_SPEC_FIELD, )
#undef TAPEGRAD_DECLARE_SPEC_FIELD
};

// The defaults of a spec's zero fields, written here and nowhere else: kv_heads 0 is heads
// (every query head has its own key/value head), and an unset scale is 1/sqrt(head_dim),
// which keeps q.k of unit-variance vectors at unit variance whatever the head's width.
inline std::size_t resolve_kv_heads(std::size_t heads, std::size_t kv_heads) {
  return kv_heads ? kv_heads : heads;
}
double default_attention_scale(std::size_t head_dim);

// "AttentionSpec(heads=4, kv_heads=2, head_dim=0, scale=None, causal=True, window=0,
// bias='alibi', softcap=20)": every field, written as Python writes it.
std::string to_string(const AttentionSpec& spec);

// A soft-cap c (attention's or the final logits') is 0, off, or in [kMinSoftcap, kMaxSoftcap]:
// there float32 holds both c and 1 / c as normal numbers, so c * tanh(s / c) never meets
// inf * 0, a cap that rounds to 0 or a subnormal reciprocal (each a NaN or a wrong number).
inline constexpr double kMinSoftcap = 1e-30, kMaxSoftcap = 1e30;
inline bool valid_softcap(double c) { return c == 0 || (c >= kMinSoftcap && c <= kMaxSoftcap); }

// A causal spec over `heads` query heads sharing `kv_heads` key/value heads (0: as many as
// heads), each query seeing the last `window` positions, itself included (0: every earlier
// one). The other modifiers keep their defaults.
AttentionSpec causal_spec(std::size_t heads, std::size_t kv_heads = 0, std::size_t window = 0);

// What the check resolves. Queries are the LAST Tq positions of the Tk keys (bottom-right
// alignment): query row r has absolute position q_offset + r, q_offset = Tk - Tq; key j has
// position j. Causal needs Tq <= Tk.
struct AttentionDims {
  std::size_t B = 0, Tq = 0, Tk = 0, heads = 0, kv_heads = 0, head_dim = 0, v_head_dim = 0;
  double scale = 0;
  kernels::AttentionRule rule;  // the spec's modifiers at these positions: attention_rule()
  std::size_t group() const { return heads / kv_heads; }  // query heads per kv head
};

// The spec's modifiers (causal, window, bias, soft-cap) as the rule every path applies, for
// Tq queries that are the last of Tk positions over `heads` query heads. The one place a
// modifier passes from the spec to the kernels: a new modifier is a field of AttentionSpec,
// a line here and its effect in kernels::AttentionRule.
kernels::AttentionRule attention_rule(const AttentionSpec& spec, std::size_t Tq, std::size_t Tk,
                                      std::size_t heads);

// What every path computes from: the shapes and the rule (which keys a query sees, what is
// done to their scores), derived from the resolved dims here and nowhere else.
kernels::HeadLayout head_layout(const AttentionDims& d);

// q (B, Tq, heads*head_dim), k (B, Tk, kv_heads*head_dim), v (B, Tk, kv_heads*v_head_dim).
// The ONE argument check of every attention path; `op` is the function the user called,
// and every message names it and all three shapes, e.g.
// "attention: heads=6 is not divisible by kv_heads=4 (q is (2,5,48), k is (2,5,32), v is (2,5,32))".
AttentionDims check_attention_spec(const char* op, const Shape& q, const Shape& k, const Shape& v,
                                   const AttentionSpec& spec);

}  // namespace tapegrad
