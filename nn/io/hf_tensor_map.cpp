#include "nn/io/hf_tensor_map.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "autograd/errors.hpp"
#include "nn/io/checkpoint_error.hpp"
#include "nn/io/hf/family.hpp"
#include "nn/io/hf/registry.hpp"
#include "nn/parameter_plan.hpp"

namespace tapegrad {

// Named, not anonymous: the library compiles in unity batches.
namespace hf_tensor_map_parts {

// A planned parameter a file tensor takes: its full name and shape; no name when the model
// has none (a bias the file holds as zeros).
struct Found {
  std::string name;
  Shape shape;
  bool defined() const { return !name.empty(); }
};

// The plan's parameters by name, each marked when a file tensor takes it.
class Planned {
 public:
  explicit Planned(const ParameterPlan& plan) : plan_(plan) {}
  Found maybe(const std::string& name) {
    const PlannedParameter* p = plan_.find(name);
    if (!p) return {};
    if (!used_.insert(name).second)
      fail_with<CheckpointError>("hf_tensors", "parameter '{}' is mapped twice", name);
    return {name, p->shape};
  }
  Found need(const std::string& name) {
    Found p = maybe(name);
    if (!p.defined()) fail_with<CheckpointError>("hf_tensors", "the model has no parameter '{}'", name);
    return p;
  }
  bool used(const std::string& name) const { return used_.count(name) > 0; }

 private:
  const ParameterPlan& plan_;
  std::set<std::string> used_;
};

using Specs = std::vector<HfTensorSpec>;

void add_spec(Specs& out, const std::string& name, std::vector<HfPart> parts, HfMatrixLayout m) {
  HfTensorSpec t;
  t.name = name;
  t.parts = std::move(parts);
  t.layout = m;
  const std::size_t C = t.columns();
  if (m.fused_heads > 0 && m.fused_heads * m.head_dim * t.parts.size() != C)
    fail_with<CheckpointError>("hf tensor " + name, "{} heads of {} columns do not make {} columns",
                               m.fused_heads, m.head_dim * t.parts.size(), C);
  t.shape = m.vector ? std::vector<std::size_t>{C}
            : m.transposed ? std::vector<std::size_t>{C, m.rows}
                           : std::vector<std::size_t>{m.rows, C};
  out.push_back(std::move(t));
}

// A parameter in the file's layout as it is (an embedding, a norm, Conv1D).
void add_same(Specs& out, const std::string& name, const Found& p) {
  HfMatrixLayout m;
  m.vector = p.shape.size() == 1;
  m.rows = p.shape.size() == 1 ? 1 : p.shape[0];
  add_spec(out, name, {{p.name, p.shape.back()}}, m);
}

// A vector the file holds: the parameter, or zeros of `width` when the model lacks it.
void add_bias(Specs& out, const std::string& name, const Found& p, std::size_t width,
              std::size_t heads = 0, std::size_t head_dim = 0) {
  HfMatrixLayout m;
  m.vector = true;
  m.heads = heads;
  m.head_dim = head_dim;
  add_spec(out, name, {{p.name, width}}, m);
}

// nn.Linear: the file's (out, in) is the parameter's (in, out) transposed.
void add_linear(Specs& out, const std::string& name, const Found& p, std::size_t heads = 0,
                std::size_t head_dim = 0) {
  HfMatrixLayout m;
  m.rows = p.shape[0];
  m.transposed = true;
  m.heads = heads;
  m.head_dim = head_dim;
  add_spec(out, name, {{p.name, p.shape[1]}}, m);
}

// A norm's gain and (LayerNorm) bias, in the same layout.
void add_norm(Specs& out, Planned& ps, const std::string& from, const std::string& to) {
  add_same(out, to + ".weight", ps.need(from + ".weight"));
  if (const Found bias = ps.maybe(from + ".bias"); bias.defined()) add_same(out, to + ".bias", bias);
}

// A projection's weight: Conv1D's (in, out) as it is, nn.Linear's (out, in) transposed.
void add_weight(Specs& out, const hf::TensorNames& n, const std::string& name, const Found& p) {
  if (n.conv1d) add_same(out, name, p);
  else add_linear(out, name, p);
}

// q, k and v in one tensor with their biases, and the output projection: GPT-2's Conv1D
// c_attn (d, 3d), columns [q | k | v], or BLOOM's nn.Linear query_key_value (3d, d), rows per
// head [q (dh) k (dh) v (dh)].
void fused_attention(Specs& out, Planned& ps, const TransformerConfig& c, const HfLayout& layout,
                     const std::string& at, const std::string& b) {
  const hf::TensorNames& n = layout.family->tensors;
  const std::size_t D = c.d_model;
  HfMatrixLayout fused;
  fused.rows = D;
  fused.transposed = !n.conv1d;
  fused.fused_heads = n.fused_per_head ? c.heads : 0;
  fused.head_dim = c.resolved_head_dim();
  add_spec(out, b + n.qkv + ".weight",
           {{ps.need(at + "attn.Wq").name, D}, {ps.need(at + "attn.Wk").name, D},
            {ps.need(at + "attn.Wv").name, D}}, fused);
  if (layout.qkv_bias) {
    HfMatrixLayout vec = fused;
    vec.rows = 1;
    vec.vector = true;
    vec.transposed = false;
    add_spec(out, b + n.qkv + ".bias",
             {{ps.maybe(at + "attn.bq").name, D}, {ps.maybe(at + "attn.bk").name, D},
              {ps.maybe(at + "attn.bv").name, D}}, vec);
  }
  add_weight(out, n, b + n.o + ".weight", ps.need(at + "attn.Wo"));
  if (layout.out_bias) add_bias(out, b + n.o + ".bias", ps.maybe(at + "attn.bo"), D);
}

// q, k and v apart with their biases (when the file has them), and the output projection.
void separate_attention(Specs& out, Planned& ps, const TransformerConfig& c, const HfLayout& layout,
                        const std::string& at, const std::string& b) {
  const hf::TensorNames& n = layout.family->tensors;
  const std::size_t H = c.heads, KV = c.resolved_kv_heads(), dh = c.resolved_head_dim();
  const bool interleaved = c.rope_style == RopeStyle::interleaved;
  const std::size_t qh = interleaved ? H : 0, kh = interleaved ? KV : 0;
  add_linear(out, b + n.q + ".weight", ps.need(at + "attn.Wq"), qh, dh);
  add_linear(out, b + n.k + ".weight", ps.need(at + "attn.Wk"), kh, dh);
  add_linear(out, b + n.v + ".weight", ps.need(at + "attn.Wv"));
  add_linear(out, b + n.o + ".weight", ps.need(at + "attn.Wo"));
  if (layout.qkv_bias) {
    add_bias(out, b + n.q + ".bias", ps.maybe(at + "attn.bq"), H * dh, qh, dh);
    add_bias(out, b + n.k + ".bias", ps.maybe(at + "attn.bk"), KV * dh, kh, dh);
    add_bias(out, b + n.v + ".bias", ps.maybe(at + "attn.bv"), KV * dh);
  }
  if (layout.out_bias) add_bias(out, b + n.o + ".bias", ps.maybe(at + "attn.bo"), c.d_model);
}

// The experts of an MoE layer: the router and each expert's gate, up and down.
void experts(Specs& out, Planned& ps, const TransformerConfig& c, const hf::TensorNames& n,
             const std::string& at, const std::string& b) {
  if (n.router.empty())
    fail_with<CheckpointError>("hf_tensors", "layer '{}' has experts, which this model_type's "
                               "files do not hold", at);
  add_linear(out, b + n.router + ".weight", ps.need(at + "moe.router.weight"));
  for (std::size_t e = 0; e < c.experts; ++e) {
    const std::string from = fmt::format("{}moe.experts.{}.", at, e);
    const std::string to = fmt::format("{}{}{}.", b, n.experts, e);
    add_linear(out, to + n.expert_gate + ".weight", ps.need(from + "gate.weight"));
    add_linear(out, to + n.expert_up + ".weight", ps.need(from + "up.weight"));
    add_linear(out, to + n.expert_down + ".weight", ps.need(from + "down.weight"));
  }
}

// The feed-forward: GELU's fc and proj, or the gated gate, up and down, each with its bias
// when the file has them; or the experts.
void feed_forward(Specs& out, Planned& ps, const TransformerConfig& c, const HfLayout& layout,
                  std::size_t l, const std::string& at, const std::string& b) {
  const hf::TensorNames& n = layout.family->tensors;
  if (c.is_moe_layer(l)) return experts(out, ps, c, n, at, b);
  const std::size_t D = c.d_model, F = c.resolved_mlp_hidden();
  std::vector<std::tuple<const char*, std::string, std::size_t>> parts;
  if (c.mlp == MlpKind::gelu) parts = {{"fc", n.fc, F}, {"proj", n.proj, D}};
  else parts = {{"gate", n.gate, F}, {"up", n.up, F}, {"down", n.down, D}};
  for (const auto& [mine, theirs, width] : parts) {
    const std::string from = at + "mlp." + mine, to = b + theirs;
    add_weight(out, n, to + ".weight", ps.need(from + ".weight"));
    if (layout.mlp_bias) add_bias(out, to + ".bias", ps.maybe(from + ".bias"), width);
  }
}

// The tensors of layer l.
void add_block(Specs& out, Planned& ps, const TransformerConfig& c, const HfLayout& layout,
               std::size_t l) {
  const hf::TensorNames& n = layout.family->tensors;
  const std::string at = fmt::format("blocks.{}.", l);
  const std::string b = fmt::format("{}{}{}.", layout.prefix, n.layers, l);
  for (const auto& [mine, theirs] : {std::pair{"norm1", n.norm1}, std::pair{"norm1_post", n.norm1_post},
                                     std::pair{"norm2", n.norm2}, std::pair{"norm2_post", n.norm2_post}})
    if (!theirs.empty()) add_norm(out, ps, at + mine, b + theirs);
  if (!n.qkv.empty()) fused_attention(out, ps, c, layout, at, b);
  else separate_attention(out, ps, c, layout, at, b);
  feed_forward(out, ps, c, layout, l, at, b);
}

// The tensors before the layers: the embeddings and BLOOM's norm on them.
void add_first(Specs& out, Planned& ps, const HfLayout& layout) {
  const hf::TensorNames& n = layout.family->tensors;
  const std::string& p = layout.prefix;
  for (const auto& [mine, theirs] : {std::pair{"tok_emb", n.embed}, std::pair{"pos_emb", n.positions}})
    if (!theirs.empty()) add_same(out, p + theirs + ".weight", ps.need(std::string(mine) + ".weight"));
  if (!n.embed_norm.empty()) add_norm(out, ps, "embed_norm", p + n.embed_norm);
}

// The tensors after them: the final norm and an untied head.
void add_last(Specs& out, Planned& ps, const TransformerConfig& c, const HfLayout& layout) {
  add_norm(out, ps, "norm_f", layout.prefix + layout.family->tensors.final_norm);
  if (!c.tie_embeddings) add_linear(out, "lm_head.weight", ps.need("head.weight"));
}

}  // namespace hf_tensor_map_parts

HfLayout hf_layout(const TransformerConfig& c, const std::string& model_type) {
  const hf::Family* family = hf::find_family(model_type);
  if (!family)
    fail_with<CheckpointError>("hf_layout", "model_type '{}' is not supported ({} are)", model_type,
                               fmt::join(hf::model_types(), ", "));
  HfLayout l;
  l.model_type = model_type;
  l.family = family;
  l.prefix = family->tensors.prefix;
  const hf::FileBiases biases = family->biases(c);
  l.qkv_bias = biases.qkv;
  l.out_bias = biases.out;
  l.mlp_bias = biases.mlp;
  return l;
}

std::string hf_embedding_name(const HfLayout& layout) {
  return layout.prefix + layout.family->tensors.embed + ".weight";
}

bool hf_dropped_buffer(const std::string& model_type, const std::string& name) {
  const hf::Family* family = hf::find_family(model_type);
  if (!family) return false;
  for (const std::string& tail : family->tensors.dropped_suffixes)
    if (name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0)
      return true;
  return false;
}

std::size_t HfTensorSpec::columns() const {
  std::size_t C = 0;
  for (const HfPart& p : parts) C += p.cols;
  return C;
}

std::size_t HfTensorSpec::elements() const {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

std::vector<HfTensorSpec> hf_tensor_specs(const TransformerConfig& c, const HfLayout& layout) {
  namespace parts = hf_tensor_map_parts;
  const ParameterPlan plan(c);
  parts::Planned ps(plan);
  std::vector<HfTensorSpec> out;
  parts::add_first(out, ps, layout);
  for (std::size_t l = 0; l < c.layers; ++l) parts::add_block(out, ps, c, layout, l);
  parts::add_last(out, ps, c, layout);
  // every parameter went into some file tensor, or the file would lose it
  plan.for_each([&](const std::string& name, const PlannedParameter&) {
    if (!ps.used(name))
      fail_with<CheckpointError>("hf_tensors", "parameter '{}' has no place in a {} file", name,
                                 layout.model_type);
  });
  return out;
}

HfTensorCount hf_tensor_count(const TransformerConfig& c, const HfLayout& layout) {
  namespace parts = hf_tensor_map_parts;
  const ParameterPlan plan(c);
  parts::Planned ps(plan);
  std::vector<HfTensorSpec> some;
  parts::add_first(some, ps, layout);
  parts::add_last(some, ps, c, layout);
  HfTensorCount count;
  count.total = some.size();
  count.smallest_layer = UINT64_MAX;
  // one layer of each kind the model has: layer 0 is dense unless every layer has experts,
  // and layer moe_every - 1 is the first with experts (TransformerConfig::is_moe_layer)
  for (const auto& [experts, layers] :
       {std::pair{false, plan.dense_layers()}, std::pair{true, plan.moe_layers()}}) {
    if (layers == 0) continue;
    const std::size_t l = experts ? c.moe_every - 1 : 0;
    if (c.is_moe_layer(l) != experts)
      fail_with<CheckpointError>("hf_tensor_count", "layer {} is not of the kind it stands for", l);
    some.clear();
    parts::add_block(some, ps, c, layout, l);
    count.total += some.size() * layers;
    count.smallest_layer = std::min<std::uint64_t>(count.smallest_layer, some.size());
  }
  if (count.smallest_layer == UINT64_MAX) count.smallest_layer = 0;
  return count;
}

}  // namespace tapegrad
