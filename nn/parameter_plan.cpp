#include "nn/parameter_plan.hpp"

#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "autograd/errors.hpp"

namespace tapegrad {

// Named, not anonymous: the library compiles in unity batches, where two files' anonymous
// helpers of one name would collide.
namespace parameter_plan_parts {

using Params = std::vector<PlannedParameter>;

void add_one(Params& out, std::string name, Shape shape, ParameterRole role, bool expert = false) {
  out.push_back({std::move(name), std::move(shape), role, expert});
}

// Norm<T> (nn/layers.cpp): the gain, and LayerNorm's bias.
void plan_norm(Params& out, const std::string& at, const TransformerConfig& c) {
  add_one(out, at + ".weight", {c.d_model}, ParameterRole::norm);
  if (c.norm == NormKind::layer_norm) add_one(out, at + ".bias", {c.d_model}, ParameterRole::norm);
}

// Linear<T>: weight (in, out), then the bias (out).
void plan_linear(Params& out, const std::string& at, std::size_t in, std::size_t width, bool bias,
            ParameterRole role, bool expert = false) {
  add_one(out, at + ".weight", {in, width}, role, expert);
  if (bias) add_one(out, at + ".bias", {width}, role, expert);
}

// MultiHeadAttention<T> (nn/attention.cpp): Wq bq Wk bk Wv bv Wo bo, the per-head q and k
// norms (RMSNorm over head_dim, a gain only), the per-head temperature (heads, 1).
void plan_attention(Params& out, const TransformerConfig& c) {
  const std::size_t D = c.d_model, dh = c.resolved_head_dim();
  const std::size_t q = c.heads * dh, kv = c.resolved_kv_heads() * dh;
  const bool b = c.attn_qkv_bias;
  add_one(out, "attn.Wq", {D, q}, ParameterRole::attention_q);
  if (b) add_one(out, "attn.bq", {q}, ParameterRole::attention_q);
  add_one(out, "attn.Wk", {D, kv}, ParameterRole::attention_kv);
  if (b) add_one(out, "attn.bk", {kv}, ParameterRole::attention_kv);
  add_one(out, "attn.Wv", {D, kv}, ParameterRole::attention_kv);
  if (b) add_one(out, "attn.bv", {kv}, ParameterRole::attention_kv);
  add_one(out, "attn.Wo", {q, D}, ParameterRole::attention_out);
  if (c.attn_out_bias) add_one(out, "attn.bo", {D}, ParameterRole::attention_out);
  if (c.qk_norm) {
    add_one(out, "attn.q_norm.weight", {dh}, ParameterRole::qk_norm);
    add_one(out, "attn.k_norm.weight", {dh}, ParameterRole::qk_norm);
  }
  if (c.learned_temperature)
    add_one(out, "attn.temperature", {c.heads, 1}, ParameterRole::temperature);
}

// FeedForward<T> (nn/feed_forward.cpp): fc and proj, or a gated kind's gate, up and down.
void plan_feed_forward(Params& out, const std::string& at, const TransformerConfig& c,
                       bool expert) {
  const std::size_t D = c.d_model, F = c.resolved_mlp_hidden();
  const bool b = c.mlp_bias;
  const ParameterRole role = ParameterRole::feed_forward;
  if (!mlp_gated(c.mlp)) {
    plan_linear(out, at + "fc", D, F, b, role, expert);
    plan_linear(out, at + "proj", F, D, b, role, expert);
    return;
  }
  plan_linear(out, at + "gate", D, F, b, role, expert);
  plan_linear(out, at + "up", D, F, b, role, expert);
  plan_linear(out, at + "down", F, D, b, role, expert);
}

// The parameter of that name in `list`, or nullptr.
const PlannedParameter* find_in(const Params& list, std::string_view name) {
  for (const PlannedParameter& p : list)
    if (p.name == name) return &p;
  return nullptr;
}

// Reads "<n>." off the front of `name`: n written as fmt writes it (no sign, no leading
// zero), below `limit`; nullopt otherwise (the name is then no parameter's).
std::optional<std::size_t> take_index(std::string_view& name, std::uint64_t limit) {
  std::size_t digits = 0;
  while (digits < name.size() && digits < 20 && name[digits] >= '0' && name[digits] <= '9') ++digits;
  if (digits == 0 || digits >= name.size() || name[digits] != '.' || (digits > 1 && name[0] == '0'))
    return std::nullopt;
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const std::uint64_t d = std::uint64_t(name[i] - '0');
    if (n > (UINT64_MAX - d) / 10) return std::nullopt;  // n * 10 + d would wrap
    n = n * 10 + d;
  }
  if (n >= limit) return std::nullopt;
  name.remove_prefix(digits + 1);
  return std::size_t(n);
}

}  // namespace parameter_plan_parts

std::string to_string(ParameterRole role) {
  switch (role) {
    case ParameterRole::token_embedding: return "token_embedding";
    case ParameterRole::position_embedding: return "position_embedding";
    case ParameterRole::attention_q: return "attention_q";
    case ParameterRole::attention_kv: return "attention_kv";
    case ParameterRole::attention_out: return "attention_out";
    case ParameterRole::qk_norm: return "qk_norm";
    case ParameterRole::temperature: return "temperature";
    case ParameterRole::feed_forward: return "feed_forward";
    case ParameterRole::router: return "router";
    case ParameterRole::norm: return "norm";
    case ParameterRole::unembedding: return "unembedding";
  }
  fail("ParameterRole", "unknown role {}", static_cast<int>(role));
}

std::uint64_t PlannedParameter::size() const {
  std::uint64_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

long double PlannedParameter::elements() const {
  long double n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

// The order of each list is the order of the modules' registrations: Transformer<T>
// (nn/transformer.cpp) registers tok_emb, pos_emb, embed_norm, the blocks, norm_f and head;
// Block<T> (nn/block.cpp) norm1, attn, norm1_post, norm2, moe or mlp, norm2_post;
// MixtureOfExperts<T> (nn/moe.cpp) the router, then experts.0, 1, ...
ParameterPlan::ParameterPlan(const TransformerConfig& c)
    : config_(c),
      dense_layers_(c.layers - c.moe_layers()),
      moe_layers_(c.moe_layers()),
      experts_(c.experts) {
  namespace parts = parameter_plan_parts;
  parts::add_one(first_, "tok_emb.weight", {c.vocab, c.d_model}, ParameterRole::token_embedding);
  if (c.positions == PositionKind::learned)
    parts::add_one(first_, "pos_emb.weight", {c.context, c.d_model},
                   ParameterRole::position_embedding);
  if (c.embed_norm) parts::plan_norm(first_, "embed_norm", c);

  const bool has_mlp = c.mlp != MlpKind::none;
  for (BlockPlan* block : {&dense_, &moe_}) {
    const bool experts = block == &moe_;
    if (experts && c.experts == 0) continue;  // no layer of this kind
    std::vector<PlannedParameter>& before = block->before;
    parts::plan_norm(before, "norm1", c);
    parts::plan_attention(before, c);
    if (c.post_norms) parts::plan_norm(before, "norm1_post", c);
    if (has_mlp) parts::plan_norm(before, "norm2", c);
    if (has_mlp && experts) {
      parts::plan_linear(before, "moe.router", c.d_model, c.experts, false, ParameterRole::router);
      parts::plan_feed_forward(block->expert, "", c, true);
    } else if (has_mlp) {
      parts::plan_feed_forward(before, "mlp.", c, false);
    }
    if (c.post_norms && has_mlp) parts::plan_norm(block->after, "norm2_post", c);
  }

  parts::plan_norm(last_, "norm_f", c);
  if (!c.tie_embeddings)
    parts::add_one(last_, "head.weight", {c.d_model, c.vocab}, ParameterRole::unembedding);
}

void ParameterPlan::for_each(
    const std::function<void(const std::string&, const PlannedParameter&)>& f) const {
  for (const PlannedParameter& p : first_) f(p.name, p);
  for (std::size_t l = 0; l < config_.layers; ++l) {
    const BlockPlan& block = config_.layer_plan(l).experts > 0 ? moe_ : dense_;
    const std::string at = fmt::format("blocks.{}.", l);
    for (const PlannedParameter& p : block.before) f(at + p.name, p);
    for (std::size_t e = 0; e < experts_ && !block.expert.empty(); ++e) {
      const std::string expert = fmt::format("{}moe.experts.{}.", at, e);
      for (const PlannedParameter& p : block.expert) f(expert + p.name, p);
    }
    for (const PlannedParameter& p : block.after) f(at + p.name, p);
  }
  for (const PlannedParameter& p : last_) f(p.name, p);
}

const PlannedParameter* ParameterPlan::find(const std::string& full) const {
  namespace parts = parameter_plan_parts;
  std::string_view name = full;
  constexpr std::string_view kBlocks = "blocks.", kExperts = "moe.experts.";
  if (name.substr(0, kBlocks.size()) != kBlocks) {
    if (const PlannedParameter* p = parts::find_in(first_, name)) return p;
    return parts::find_in(last_, name);
  }
  name.remove_prefix(kBlocks.size());
  const std::optional<std::size_t> layer = parts::take_index(name, config_.layers);
  if (!layer) return nullptr;
  const BlockPlan& block = config_.layer_plan(*layer).experts > 0 ? moe_ : dense_;
  if (name.substr(0, kExperts.size()) == kExperts && !block.expert.empty()) {
    name.remove_prefix(kExperts.size());
    if (!parts::take_index(name, experts_)) return nullptr;
    return parts::find_in(block.expert, name);
  }
  if (const PlannedParameter* p = parts::find_in(block.before, name)) return p;
  return parts::find_in(block.after, name);
}

void ParameterPlan::for_each_kind(
    const std::function<void(const PlannedParameter&, std::uint64_t)>& f) const {
  for (const PlannedParameter& p : first_) f(p, 1);
  for (const auto& [block, layers] :
       {std::pair{&dense_, dense_layers_}, std::pair{&moe_, moe_layers_}}) {
    if (layers == 0) continue;
    for (const PlannedParameter& p : block->before) f(p, layers);
    for (const PlannedParameter& p : block->expert) f(p, layers * experts_);
    for (const PlannedParameter& p : block->after) f(p, layers);
  }
  for (const PlannedParameter& p : last_) f(p, 1);
}

long double ParameterPlan::scalars() const {
  long double n = 0;
  for_each_kind([&](const PlannedParameter& p, std::uint64_t copies) {
    n += static_cast<long double>(copies) * p.elements();
  });
  return n;
}

long double ParameterPlan::tensors() const {
  long double n = 0;
  for_each_kind([&](const PlannedParameter&, std::uint64_t copies) { n += copies; });
  return n;
}

void add_to_row(ParameterCounts& counts, ParameterRole role, std::uint64_t n) {
  switch (role) {
    case ParameterRole::token_embedding: counts.token_embedding += n; break;
    case ParameterRole::position_embedding: counts.position_embedding += n; break;
    case ParameterRole::attention_q: counts.attention_q += n; break;
    case ParameterRole::attention_kv: counts.attention_kv += n; break;
    case ParameterRole::attention_out: counts.attention_out += n; break;
    case ParameterRole::qk_norm: counts.qk_norm += n; break;
    case ParameterRole::temperature: counts.temperature += n; break;
    case ParameterRole::feed_forward: counts.feed_forward += n; break;
    case ParameterRole::router: counts.router += n; break;
    case ParameterRole::norm: counts.norms += n; break;
    case ParameterRole::unembedding: counts.unembedding += n; break;
  }
}

// The plan summed by role, modulo 2^64 as the per-component formulas it replaces counted. A
// token runs top_k of an MoE layer's experts: the other experts - top_k are inactive.
ParameterCounts count_parameters(const TransformerConfig& c) {
  const ParameterPlan plan(c);
  ParameterCounts p;
  plan.for_each_kind([&](const PlannedParameter& param, std::uint64_t copies) {
    add_to_row(p, param.role, copies * param.size());
    if (param.expert)
      p.inactive_experts += plan.moe_layers() * (c.experts - c.experts_top_k) * param.size();
  });
  return p;
}

}  // namespace tapegrad
