#include "nn/io/hf_weights.hpp"

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "autograd/errors.hpp"
#include "nn/io/checkpoint_error.hpp"
#include "nn/io/hf/family.hpp"
#include "nn/io/hf/registry.hpp"
#include "nn/transformer.hpp"

namespace tapegrad {

namespace {

// A folder tensor seen as a matrix (rows, C): the columns of its parts side by side (GPT-2's
// [q | k | v]), stored (rows, C), or (C, rows) when `transposed` (nn.Linear), or (C) for a
// vector. Part k is a parameter (rows, cols_k), or nothing: zeros in the file. `heads` > 0
// permutes each head's dh columns from tapegrad's interleaved pairs to HF's halves: file
// column h*dh + j holds tapegrad column h*dh + src(j), src(j) = 2j below dh/2, 2(j - dh/2) + 1
// above.
template <class T>
struct Part {
  Tensor<T> param;  // undefined: zeros
  std::size_t cols;
};

struct MatrixLayout {
  std::size_t rows = 1;
  bool transposed = false, vector = false;
  std::size_t heads = 0, head_dim = 0;  // heads > 0: the interleaved permutation
  // > 0: the parts interleaved per head instead of side by side (BLOOM's query_key_value):
  // head h's head_dim columns of part 0, then of part 1, ..., then head h + 1's
  std::size_t fused_heads = 0;
};

// For each file column: its part and the part's own column.
template <class T>
std::vector<std::pair<std::size_t, std::size_t>> column_map(const std::vector<Part<T>>& parts,
                                                            const MatrixLayout& m) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  if (m.fused_heads > 0) {
    const std::size_t P = parts.size(), dh = m.head_dim;
    for (std::size_t c = 0; c < m.fused_heads * P * dh; ++c)
      out.emplace_back(c / dh % P, c / (P * dh) * dh + c % dh);
    return out;
  }
  for (std::size_t k = 0; k < parts.size(); ++k)
    for (std::size_t c = 0; c < parts[k].cols; ++c) {
      std::size_t src = c;
      if (m.heads > 0) {
        const std::size_t h = c / m.head_dim, j = c % m.head_dim, half = m.head_dim / 2;
        src = h * m.head_dim + (j < half ? 2 * j : 2 * (j - half) + 1);
      }
      out.emplace_back(k, src);
    }
  return out;
}

template <class T>
HfTensor<T> matrix_tensor(const std::string& name, std::vector<Part<T>> parts, MatrixLayout m) {
  std::size_t C = 0;
  for (const Part<T>& p : parts) C += p.cols;
  auto column_part = std::make_shared<const std::vector<std::pair<std::size_t, std::size_t>>>(
      column_map(parts, m));
  if (column_part->size() != C)
    fail_with<CheckpointError>("hf tensor " + name, "{} heads of {} columns do not make {} columns",
                               m.fused_heads, m.head_dim * parts.size(), C);
  HfTensor<T> t;
  t.name = name;
  t.shape = m.vector ? std::vector<std::size_t>{C}
            : m.transposed ? std::vector<std::size_t>{C, m.rows}
                           : std::vector<std::size_t>{m.rows, C};
  const std::size_t rows = m.rows;
  const bool transposed = m.transposed;
  const auto file_index = [=](std::size_t r, std::size_t c) {
    return transposed ? c * rows + r : r * C + c;
  };
  t.save = [=](T* out) {
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < C; ++c) {
        const auto [k, src] = (*column_part)[c];
        const Part<T>& p = parts[k];
        out[file_index(r, c)] = p.param.defined() ? p.param.data()[r * p.cols + src] : T(0);
      }
  };
  const bool single = parts.size() == 1 && parts[0].param.defined() && m.heads == 0;
  if (single && !transposed) {
    Tensor<T> handle = parts[0].param;
    t.direct = handle.value().data();
  }
  if (single && transposed) {  // nn.Linear: a blocked transpose of (C, rows) into (rows, C)
    t.load = [=](const T* in) {
      Tensor<T> handle = parts[0].param;
      T* into = handle.value().data();
      constexpr std::size_t kBlock = 64;
      for (std::size_t r0 = 0; r0 < rows; r0 += kBlock)
        for (std::size_t c0 = 0; c0 < C; c0 += kBlock)
          for (std::size_t c = c0; c < std::min(C, c0 + kBlock); ++c)
            for (std::size_t r = r0; r < std::min(rows, r0 + kBlock); ++r)
              into[r * C + c] = in[c * rows + r];
    };
    return t;
  }
  // GPT-2's fused c_attn: each row is the parts' rows side by side
  if (!transposed && m.heads == 0 && m.fused_heads == 0) {
    t.load = [=](const T* in) {
      for (std::size_t r = 0; r < rows; ++r) {
        const T* from = in + r * C;
        for (const Part<T>& p : parts) {
          Tensor<T> handle = p.param;
          if (handle.defined())
            std::copy(from, from + p.cols, handle.value().data() + r * p.cols);
          else if (std::any_of(from, from + p.cols, [](T v) { return v != T(0); }))
            fail_with<CheckpointError>("hf tensor " + name, "row {} holds a nonzero value where "
                                       "the model has no bias (only zeros are its value)", r);
          from += p.cols;
        }
      }
    };
    return t;
  }
  t.load = [=](const T* in) {
    std::vector<T*> into;
    for (const Part<T>& p : parts) {
      Tensor<T> handle = p.param;
      into.push_back(handle.defined() ? handle.value().data() : nullptr);
    }
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < C; ++c) {
        const auto [k, src] = (*column_part)[c];
        const T v = in[file_index(r, c)];
        if (into[k])
          into[k][r * parts[k].cols + src] = v;
        else if (v != T(0))
          fail_with<CheckpointError>("hf tensor " + name,
                                     "element {} is {}, where the model has no bias (only "
                                     "zeros are its value)", file_index(r, c), double(v));
      }
  };
  return t;
}

// The model's parameters by name, each marked when a file tensor takes it.
template <class T>
class Params {
 public:
  explicit Params(const Transformer<T>& model) : model_(model) {}
  // The parameter, or an undefined tensor when the model has none of that name.
  Tensor<T> maybe(const std::string& name) {
    if (!model_.has_parameter(name)) return Tensor<T>();
    if (!used_.insert(name).second)
      fail_with<CheckpointError>("hf_tensors", "parameter '{}' is mapped twice", name);
    return model_.parameter(name);
  }
  Tensor<T> need(const std::string& name) {
    Tensor<T> p = maybe(name);
    if (!p.defined()) fail_with<CheckpointError>("hf_tensors", "the model has no parameter '{}'", name);
    return p;
  }
  // Every parameter went into some file tensor, or the file would lose it.
  void check_all_used(const std::string& type) const {
    for (const NamedParameter<T>& p : model_.named_parameters())
      if (!used_.count(p.name))
        fail_with<CheckpointError>("hf_tensors", "parameter '{}' has no place in a {} file",
                                   p.name, type);
  }

 private:
  const Transformer<T>& model_;
  std::set<std::string> used_;
};

template <class T>
std::size_t cols_of(const Tensor<T>& p, std::size_t absent) {
  return p.defined() ? p.shape().back() : absent;
}

template <class T>
void add_same(std::vector<HfTensor<T>>& out, const std::string& name, Tensor<T> p) {
  const Shape s = p.shape();
  MatrixLayout m;
  m.vector = s.size() == 1;
  m.rows = s.size() == 1 ? 1 : s[0];
  out.push_back(matrix_tensor<T>(name, {{p, s.back()}}, m));
}

// A vector the file holds: the parameter, or zeros of `width` when the model lacks it.
template <class T>
void add_bias(std::vector<HfTensor<T>>& out, const std::string& name, Tensor<T> p,
              std::size_t width, std::size_t heads = 0, std::size_t head_dim = 0) {
  MatrixLayout m;
  m.vector = true;
  m.heads = heads;
  m.head_dim = head_dim;
  out.push_back(matrix_tensor<T>(name, {{p, width}}, m));
}

// nn.Linear: the file's (out, in) is the parameter's (in, out) transposed.
template <class T>
void add_linear(std::vector<HfTensor<T>>& out, const std::string& name, Tensor<T> p,
                std::size_t heads = 0, std::size_t head_dim = 0) {
  MatrixLayout m;
  m.rows = p.shape()[0];
  m.transposed = true;
  m.heads = heads;
  m.head_dim = head_dim;
  out.push_back(matrix_tensor<T>(name, {{p, p.shape()[1]}}, m));
}

// A norm's gain and (LayerNorm) bias, in the same layout.
template <class T>
void add_norm(std::vector<HfTensor<T>>& out, Params<T>& ps, const std::string& from,
              const std::string& to) {
  add_same(out, to + ".weight", ps.need(from + ".weight"));
  if (Tensor<T> bias = ps.maybe(from + ".bias"); bias.defined()) add_same(out, to + ".bias", bias);
}

// A projection's weight: Conv1D's (in, out) as it is, nn.Linear's (out, in) transposed.
template <class T>
void add_weight(std::vector<HfTensor<T>>& out, const hf::TensorNames& n, const std::string& name,
                Tensor<T> p) {
  if (n.conv1d) add_same(out, name, p);
  else add_linear(out, name, p);
}

// q, k and v in one tensor with their biases, and the output projection: GPT-2's Conv1D
// c_attn (d, 3d), columns [q | k | v], or BLOOM's nn.Linear query_key_value (3d, d), rows per
// head [q (dh) k (dh) v (dh)].
template <class T>
void fused_attention(std::vector<HfTensor<T>>& out, Params<T>& ps, const TransformerConfig& c,
                     const HfLayout& layout, const std::string& at, const std::string& b) {
  const hf::TensorNames& n = layout.family->tensors;
  const std::size_t D = c.d_model;
  MatrixLayout fused;
  fused.rows = D;
  fused.transposed = !n.conv1d;
  fused.fused_heads = n.fused_per_head ? c.heads : 0;
  fused.head_dim = c.resolved_head_dim();
  out.push_back(matrix_tensor<T>(b + n.qkv + ".weight",
                                 {{ps.need(at + "attn.Wq"), D}, {ps.need(at + "attn.Wk"), D},
                                  {ps.need(at + "attn.Wv"), D}}, fused));
  if (layout.qkv_bias) {
    MatrixLayout vec = fused;
    vec.rows = 1;
    vec.vector = true;
    vec.transposed = false;
    out.push_back(matrix_tensor<T>(b + n.qkv + ".bias",
                                   {{ps.maybe(at + "attn.bq"), D}, {ps.maybe(at + "attn.bk"), D},
                                    {ps.maybe(at + "attn.bv"), D}}, vec));
  }
  add_weight(out, n, b + n.o + ".weight", ps.need(at + "attn.Wo"));
  if (layout.out_bias) add_bias(out, b + n.o + ".bias", ps.maybe(at + "attn.bo"), D);
}

// q, k and v apart with their biases (when the file has them), and the output projection.
template <class T>
void separate_attention(std::vector<HfTensor<T>>& out, Params<T>& ps, const TransformerConfig& c,
                        const HfLayout& layout, const std::string& at, const std::string& b) {
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
template <class T>
void experts(std::vector<HfTensor<T>>& out, Params<T>& ps, const TransformerConfig& c,
             const hf::TensorNames& n, const std::string& at, const std::string& b) {
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
template <class T>
void feed_forward(std::vector<HfTensor<T>>& out, Params<T>& ps, const TransformerConfig& c,
                  const HfLayout& layout, std::size_t l, const std::string& at,
                  const std::string& b) {
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

template <class T>
void add_block(std::vector<HfTensor<T>>& out, Params<T>& ps, const TransformerConfig& c,
               const HfLayout& layout, std::size_t l) {
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

}  // namespace

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

template <class T>
std::size_t HfTensor<T>::elements() const {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

template <class T>
std::vector<HfTensor<T>> hf_tensors(const Transformer<T>& model, const HfLayout& layout) {
  const TransformerConfig& c = model.config();
  Params<T> ps(model);
  std::vector<HfTensor<T>> out;
  const hf::TensorNames& n = layout.family->tensors;
  const std::string& p = layout.prefix;
  for (const auto& [mine, theirs] : {std::pair{"tok_emb", n.embed}, std::pair{"pos_emb", n.positions}})
    if (!theirs.empty()) add_same(out, p + theirs + ".weight", ps.need(std::string(mine) + ".weight"));
  if (!n.embed_norm.empty()) add_norm(out, ps, "embed_norm", p + n.embed_norm);
  for (std::size_t l = 0; l < c.layers; ++l) add_block(out, ps, c, layout, l);
  add_norm(out, ps, "norm_f", p + n.final_norm);
  if (!c.tie_embeddings) add_linear(out, "lm_head.weight", ps.need("head.weight"));
  ps.check_all_used(layout.model_type);
  return out;
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

#define TAPEGRAD_INSTANTIATE(T)                                                            \
  template struct HfTensor<T>;                                                             \
  template std::vector<HfTensor<T>> hf_tensors(const Transformer<T>&, const HfLayout&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
