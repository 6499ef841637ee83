#include "ops/attention_spec.hpp"

#include <cmath>
#include <iterator>
#include <string>

namespace tapegrad {

namespace {

// The heads and widths: q (B, Tq, heads*head_dim), k (B, Tk, kv_heads*head_dim),
// v (B, Tk, kv_heads*v_head_dim). shapes() ends every message.
template <class Shapes>
void resolve_heads(const char* op, const Shape& q, const Shape& k, const Shape& v,
                   const AttentionSpec& spec, const Shapes& shapes, AttentionDims& d) {
  if (spec.heads == 0) fail(op, "heads must be at least 1, got 0 ({})", shapes());
  d.heads = spec.heads;
  d.kv_heads = resolve_kv_heads(spec.heads, spec.kv_heads);
  if (d.kv_heads > d.heads)
    fail(op, "kv_heads={} exceeds heads={}: each kv head serves a group of query heads ({})",
         d.kv_heads, d.heads, shapes());
  if (d.heads % d.kv_heads != 0)
    fail(op, "heads={} is not divisible by kv_heads={} ({})", d.heads, d.kv_heads, shapes());
  if (spec.head_dim == 0 && q[2] % d.heads != 0)
    fail(op, "D={} is not divisible by heads={} ({})", q[2], d.heads, shapes());
  d.head_dim = spec.head_dim ? spec.head_dim : q[2] / d.heads;
  if (q[2] != d.heads * d.head_dim)
    fail(op, "q's width {} is not heads*head_dim = {}*{} ({})", q[2], d.heads, d.head_dim,
         shapes());
  if (k[2] != d.kv_heads * d.head_dim)
    fail(op, "k's width {} is not kv_heads*head_dim = {}*{} ({})", k[2], d.kv_heads, d.head_dim,
         shapes());
  if (v[2] % d.kv_heads != 0)
    fail(op, "v's width {} is not divisible by kv_heads={} ({})", v[2], d.kv_heads, shapes());
  d.v_head_dim = v[2] / d.kv_heads;
}

// The scale: given, it must be a positive finite number (a NaN or infinite scale would
// turn every weight into NaN, a non-positive one inverts or erases attention); by default
// 1/sqrt(head_dim), undefined for head_dim 0.
template <class Shapes>
double resolve_scale(const char* op, const AttentionSpec& spec, std::size_t head_dim,
                     const Shapes& shapes) {
  if (spec.scale) {
    const double s = *spec.scale;
    if (!std::isfinite(s) || s <= 0)
      fail(op, "scale must be finite and > 0, got {} ({})", s, shapes());
    return s;
  }
  if (head_dim == 0)
    fail(op, "the default scale 1/sqrt(head_dim) is undefined for head_dim=0 ({})", shapes());
  return default_attention_scale(head_dim);
}

}  // namespace

double default_attention_scale(std::size_t head_dim) { return 1.0 / std::sqrt(double(head_dim)); }

AttentionDims check_attention_spec(const char* op, const Shape& q, const Shape& k, const Shape& v,
                                   const AttentionSpec& spec) {
  // formatted only when a check fails: a small model calls this every step
  const auto shapes = [&] {
    return fmt::format("q is {}, k is {}, v is {}", shape_str(q), shape_str(k), shape_str(v));
  };
  if (q.size() != 3 || k.size() != 3 || v.size() != 3)
    fail(op, "q, k and v must be (B, T, heads*dim) ({})", shapes());
  AttentionDims d;
  d.B = q[0];
  d.Tq = q[1];
  d.Tk = k[1];
  if (k[0] != d.B || v[0] != d.B)
    fail(op, "batch sizes differ: q has B={}, k {}, v {} ({})", d.B, k[0], v[0], shapes());
  if (v[1] != d.Tk) fail(op, "k has Tk={} keys but v has {} values ({})", d.Tk, v[1], shapes());
  resolve_heads(op, q, k, v, spec, shapes, d);
  d.scale = resolve_scale(op, spec, d.head_dim, shapes);
  if (spec.window && !spec.causal)
    fail(op, "window={} needs causal attention: a window counts back from the query ({})",
         spec.window, shapes());
  if (spec.causal && d.Tq > d.Tk)
    fail(op, "causal attention needs Tq <= Tk (queries are the last Tq of the Tk positions), got "
             "Tq={}, Tk={} ({})", d.Tq, d.Tk, shapes());
  if (spec.bias == PositionBias::alibi && !spec.causal)
    fail(op, "ALiBi needs causal attention: its bias counts back from the query ({})", shapes());
  if (!valid_softcap(spec.softcap))
    fail(op, "softcap must be 0 (off) or in [{}, {}], got {} ({})", kMinSoftcap, kMaxSoftcap,
         spec.softcap, shapes());
  d.rule = attention_rule(spec, d.Tq, d.Tk, d.heads);
  return d;
}

namespace {
const char* const kBiasNames[] = {"none", "alibi"};  // in PositionBias's order
}  // namespace

std::string to_string(PositionBias bias) { return kBiasNames[std::size_t(bias)]; }

std::string position_bias_names() {
  std::string names;
  for (const char* n : kBiasNames) names += (names.empty() ? "'" : ", '") + std::string(n) + "'";
  return names;
}

PositionBias position_bias_from_name(std::string_view op, const std::string& name) {
  for (std::size_t i = 0; i < std::size(kBiasNames); ++i)
    if (name == kBiasNames[i]) return PositionBias(i);
  fail(op, "bias must be one of {}, got '{}'", position_bias_names(), name);
}

namespace {
// A field's value as Python writes it.
std::string spec_value(std::size_t n) { return std::to_string(n); }
std::string spec_value(double x) { return fmt::format("{}", x); }
std::string spec_value(bool b) { return b ? "True" : "False"; }
std::string spec_value(const std::optional<double>& x) { return x ? spec_value(*x) : "None"; }
std::string spec_value(PositionBias b) { return "'" + to_string(b) + "'"; }
}  // namespace

std::string to_string(const AttentionSpec& spec) {
  std::string fields;
#define TAPEGRAD_PRINT_SPEC_FIELD(ctx, type, name, default_value, doc) \
  fields += (fields.empty() ? "" : ", ") + std::string(#name "=") + spec_value(spec.name);
  TAPEGRAD_ATTENTION_SPEC_FIELDS(TAPEGRAD_PRINT_SPEC_FIELD, )
#undef TAPEGRAD_PRINT_SPEC_FIELD
  return "AttentionSpec(" + fields + ")";
}

AttentionSpec causal_spec(std::size_t heads, std::size_t kv_heads, std::size_t window) {
  AttentionSpec spec;
  spec.heads = heads;
  spec.kv_heads = kv_heads;
  spec.causal = true;
  spec.window = window;
  return spec;
}

kernels::AttentionRule attention_rule(const AttentionSpec& spec, std::size_t Tq, std::size_t Tk,
                                      std::size_t heads) {
  kernels::AttentionRule rule;
  rule.Tk = Tk;
  rule.q_offset = Tq <= Tk ? Tk - Tq : 0;
  rule.H = heads;
  rule.causal = spec.causal;
  rule.window = spec.window;
  rule.alibi = spec.bias == PositionBias::alibi;
  rule.softcap = spec.softcap;
  return rule;
}

kernels::HeadLayout head_layout(const AttentionDims& d) {
  kernels::HeadLayout L;
  static_cast<kernels::AttentionRule&>(L) = d.rule;
  L.B = d.B;
  L.Tq = d.Tq;
  L.KV = d.kv_heads;
  L.dh = d.head_dim;
  L.dv = d.v_head_dim;
  return L;
}

}  // namespace tapegrad
