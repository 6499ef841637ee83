#include "nn/io/hf_weights.hpp"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "autograd/errors.hpp"
#include "nn/io/checkpoint_error.hpp"
#include "nn/transformer.hpp"

namespace tapegrad {

// Named, not anonymous: the library compiles in unity batches.
namespace hf_weights_parts {

// Part k of a file tensor bound: the model's parameter (rows, cols), or nothing: zeros in
// the file.
template <class T>
struct Part {
  Tensor<T> param;  // undefined: zeros
  std::size_t cols;
};

// For each file column: its part and the part's own column. `heads` > 0 permutes each
// head's dh columns from tapegrad's interleaved pairs to HF's halves: file column
// h*dh + j holds tapegrad column h*dh + src(j), src(j) = 2j below dh/2, 2(j - dh/2) + 1
// above.
template <class T>
std::vector<std::pair<std::size_t, std::size_t>> column_map(const std::vector<Part<T>>& parts,
                                                            const HfMatrixLayout& m) {
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

// The described tensor's load and save over its bound parts.
template <class T>
HfTensor<T> matrix_tensor(const HfTensorSpec& spec, std::vector<Part<T>> parts) {
  const HfMatrixLayout& m = spec.layout;
  const std::string& name = spec.name;
  const std::size_t C = spec.columns();
  auto column_part = std::make_shared<const std::vector<std::pair<std::size_t, std::size_t>>>(
      column_map(parts, m));
  HfTensor<T> t;
  t.name = name;
  t.shape = spec.shape;
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

// The model's parameter of the part's name, shaped as the plan described it (a model whose
// parameters differ from its plan would be read or written in the wrong places).
template <class T>
Part<T> bind_part(const Transformer<T>& model, const HfPart& part, const HfTensorSpec& spec,
                  std::set<std::string>& used) {
  if (part.parameter.empty()) return {Tensor<T>(), part.cols};
  if (!model.has_parameter(part.parameter))
    fail_with<CheckpointError>("hf_tensors", "the model has no parameter '{}'", part.parameter);
  if (!used.insert(part.parameter).second)
    fail_with<CheckpointError>("hf_tensors", "parameter '{}' is mapped twice", part.parameter);
  Tensor<T> p = model.parameter(part.parameter);
  const Shape& s = p.shape();
  const std::size_t rows = s.size() == 1 ? 1 : s[0];
  if (s.empty() || s.size() > 2 || s.back() != part.cols || rows != spec.layout.rows)
    fail_with<CheckpointError>("hf_tensors", "parameter '{}' {} does not make {} columns of "
                               "{} rows of tensor '{}'", part.parameter, p.shape_string(),
                               part.cols, spec.layout.rows, spec.name);
  return {p, part.cols};
}

}  // namespace hf_weights_parts

template <class T>
std::size_t HfTensor<T>::elements() const {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

template <class T>
std::vector<HfTensor<T>> hf_bind_tensors(const Transformer<T>& model,
                                         const std::vector<HfTensorSpec>& specs,
                                         const std::string& model_type) {
  namespace parts = hf_weights_parts;
  std::set<std::string> used;
  std::vector<HfTensor<T>> out;
  out.reserve(specs.size());
  for (const HfTensorSpec& spec : specs) {
    std::vector<parts::Part<T>> bound;
    for (const HfPart& part : spec.parts) bound.push_back(parts::bind_part(model, part, spec, used));
    out.push_back(parts::matrix_tensor(spec, std::move(bound)));
  }
  // every parameter went into some file tensor, or the file would lose it
  for (const NamedParameter<T>& p : model.named_parameters())
    if (!used.count(p.name))
      fail_with<CheckpointError>("hf_tensors", "parameter '{}' has no place in a {} file", p.name,
                                 model_type);
  return out;
}

template <class T>
std::vector<HfTensor<T>> hf_tensors(const Transformer<T>& model, const HfLayout& layout) {
  return hf_bind_tensors(model, hf_tensor_specs(model.config(), layout), layout.model_type);
}

#define TAPEGRAD_INSTANTIATE(T)                                                            \
  template struct HfTensor<T>;                                                             \
  template std::vector<HfTensor<T>> hf_tensors(const Transformer<T>&, const HfLayout&);    \
  template std::vector<HfTensor<T>> hf_bind_tensors(                                       \
      const Transformer<T>&, const std::vector<HfTensorSpec>&, const std::string&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
