// Every op of ops/ under its C++ name, with the C++ (and PyTorch) keyword arguments.
// A Python number where the C++ API takes a scalar is a constant, never on the tape.
#include <pybind11/stl.h>

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "arith.hpp"
#include "attention_path.hpp"
#include "attention_spec_args.hpp"
#include "bindings.hpp"
#include "numpy_convert.hpp"
#include "ops/attention.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/elementwise.hpp"
#include "ops/embedding.hpp"
#include "ops/linear_cross_entropy.hpp"
#include "ops/matmul.hpp"
#include "ops/norm.hpp"
#include "ops/reduce.hpp"
#include "ops/rope.hpp"
#include "ops/shape_ops.hpp"
#include "ops/softmax.hpp"

namespace tapegrad::python {
namespace {

#define TAPEGRAD_CALL(expr) [&](const auto& x) { return expr; }

template <class Op>
void def_arith(py::module_& m, const char* op) {
  m.def(op, [op](const py::object& a, const py::object& b) {
    return tensor_or_constant_op<Op>(op, a, b);
  }, py::arg("a"), py::arg("b"), "a (op) b: a tensor and a tensor, a NumPy array or a number");
}

void bind_elementwise(py::module_& m) {
  def_arith<std::plus<>>(m, "add");
  def_arith<std::minus<>>(m, "sub");
  def_arith<std::multiplies<>>(m, "mul");
  def_arith<std::divides<>>(m, "div");
  def_arith<PowOp>(m, "pow");
#define TAPEGRAD_UNARY(name)                                                             \
  m.def(#name, [](const PyTensor& a) { return unary(a, TAPEGRAD_CALL(tapegrad::name(x))); }, \
        py::arg("a"));
  TAPEGRAD_UNARY(neg)
  TAPEGRAD_UNARY(exp)
  TAPEGRAD_UNARY(log)
  TAPEGRAD_UNARY(sqrt)
  TAPEGRAD_UNARY(tanh)
  TAPEGRAD_UNARY(relu)
  TAPEGRAD_UNARY(sigmoid)
  TAPEGRAD_UNARY(silu)
  TAPEGRAD_UNARY(gelu)
#undef TAPEGRAD_UNARY
  m.def("softcap", [](const PyTensor& a, double c) {
    return unary(a, TAPEGRAD_CALL(tapegrad::softcap(x, c)));
  }, py::arg("a"), py::arg("c"), "c * tanh(a / c): every value kept inside (-c, c)");
}

std::vector<long> axes_of(const py::object& axis) {
  if (py::isinstance<py::int_>(axis)) return {axis.cast<long>()};
  return axis.cast<std::vector<long>>();
}

struct MatmulNtOp {
  template <class A, class B>
  auto operator()(const A& a, const B& b) const -> decltype(matmul_nt(a, b)) {
    return matmul_nt(a, b);
  }
};

// The operands of an op that @ and + could spell (linear, linear_cross_entropy): tensors,
// and NumPy arrays beside one as constants of its dtype, as the operators take them;
// anything else a TypeError naming the argument.
std::vector<PyTensor> tensor_operands(const char* op,
                                      const std::vector<std::pair<const char*, py::object>>& args) {
  const PyTensor* like = nullptr;
  for (const auto& [name, value] : args)
    if (!like && py::isinstance<PyTensor>(value)) like = &value.cast<const PyTensor&>();
  std::vector<PyTensor> out;
  for (const auto& [name, value] : args) {
    if (py::isinstance<PyTensor>(value)) out.push_back(value.cast<const PyTensor&>());
    else if (like && py::isinstance<py::array>(value)) out.push_back(array_constant(op, *like, value));
    else wrong_type(op, name, like ? "a tapegrad.Tensor or a NumPy array" : "a tapegrad.Tensor "
                    "(a NumPy array is taken beside one)", value);
  }
  return out;
}

void bind_shapes_and_reductions(py::module_& m) {
  m.def("matmul", [](const py::object& a, const py::object& b) {
    return tensor_or_constant_op<MatmulOp>("matmul", a, b);
  }, py::arg("a"), py::arg("b"), "a @ b: a tensor and a tensor or a NumPy array");
  m.def("matmul_nt", [](const py::object& a, const py::object& b) {
    return tensor_or_constant_op<MatmulNtOp>("matmul_nt", a, b);
  }, py::arg("a"), py::arg("b"), "a @ swapaxes(b, -1, -2) without forming the transpose");
  m.def("linear", [](const py::object& x, const py::object& weight, const py::object& bias) {
    std::vector<std::pair<const char*, py::object>> args = {{"x", x}, {"weight", weight}};
    if (!bias.is_none()) args.emplace_back("bias", bias);
    const std::vector<PyTensor> t = tensor_operands("linear", args);
    check_same_dtype("linear", t[0], t[1]);
    if (t.size() == 3) check_same_dtype("linear", t[0], t[2]);
    return unary(t[0], [&](const auto& X) {
      using T = element_t<decltype(X)>;
      return linear(X, t[1].get<T>(), t.size() == 3 ? t[2].get<T>() : Tensor<T>{});
    });
  }, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(),
  "x @ weight + bias as one op (weight (in, out); bias None: x @ weight): the numbers of "
  "matmul then add, without keeping the product before the bias for the backward");
  m.def("reshape", [](const PyTensor& a, const Shape& shape) {
    return unary(a, TAPEGRAD_CALL(reshape(x, shape)));
  }, py::arg("a"), py::arg("shape"));
  m.def("transpose", [](const PyTensor& a, std::optional<std::vector<std::size_t>> perm) {
    return unary(a, [&](const auto& x) {
      std::vector<std::size_t> p = perm.value_or(std::vector<std::size_t>{});
      if (!perm)  // NumPy's default: reverse the axes
        for (std::size_t i = x.dim(); i-- > 0;) p.push_back(i);
      return transpose(x, p);
    });
  }, py::arg("a"), py::arg("axes") = py::none());
  m.def("swapaxes", [](const PyTensor& a, long a1, long a2) {
    return unary(a, TAPEGRAD_CALL(swapaxes(x, a1, a2)));
  }, py::arg("a"), py::arg("axis1"), py::arg("axis2"));
  m.def("concatenate", [](const std::vector<PyTensor>& parts, long axis) {
    if (parts.empty()) fail("concatenate", "no tensors to join");
    check_one_dtype("concatenate", parts);
    return unary(parts[0], [&](const auto& first) {
      return concatenate(tensors_as<element_t<decltype(first)>>(parts), axis);
    });
  }, py::arg("tensors"), py::arg("axis") = 0);
  m.def("slice", [](const PyTensor& a, long axis, std::size_t start, std::size_t stop) {
    return unary(a, TAPEGRAD_CALL(slice(x, axis, start, stop)));
  }, py::arg("a"), py::arg("axis"), py::arg("start"), py::arg("stop"));
  m.def("repeat_interleave", [](const PyTensor& a, std::size_t repeats, long axis) {
    return unary(a, TAPEGRAD_CALL(repeat_interleave(x, repeats, axis)));
  }, py::arg("a"), py::arg("repeats"), py::arg("axis"));
  m.def("sum", [](const PyTensor& a, const py::object& axis, bool keepdims) {
    if (axis.is_none()) return unary(a, TAPEGRAD_CALL(sum(x)));
    return unary(a, TAPEGRAD_CALL(sum(x, axes_of(axis), keepdims)));
  }, py::arg("a"), py::arg("axis") = py::none(), py::arg("keepdims") = false);
  m.def("mean", [](const PyTensor& a, const py::object& axis, bool keepdims) {
    if (axis.is_none()) return unary(a, TAPEGRAD_CALL(mean(x)));
    return unary(a, TAPEGRAD_CALL(mean(x, axes_of(axis), keepdims)));
  }, py::arg("a"), py::arg("axis") = py::none(), py::arg("keepdims") = false);
  m.def("max", [](const PyTensor& a, long axis, bool keepdims) {
    return unary(a, TAPEGRAD_CALL(max(x, axis, keepdims)));
  }, py::arg("a"), py::arg("axis") = -1, py::arg("keepdims") = false);
  m.def("softmax", [](const PyTensor& a, long axis) {
    return unary(a, TAPEGRAD_CALL(softmax(x, axis)));
  }, py::arg("x"), py::arg("axis") = -1);
  m.def("log_softmax", [](const PyTensor& a, long axis) {
    return unary(a, TAPEGRAD_CALL(log_softmax(x, axis)));
  }, py::arg("x"), py::arg("axis") = -1);
  m.def("masked_softmax", [](const PyTensor& a, const py::object& mask) {
    const Mask m = mask_from_numpy(mask, "masked_softmax");
    return unary(a, TAPEGRAD_CALL(masked_softmax(x, m)));
  }, py::arg("x"), py::arg("mask"));
}

py::tuple result_tuple(const PyTensor& out, const std::optional<PyTensor>& weights) {
  if (!weights) return py::make_tuple(out, py::none());
  return py::make_tuple(out, *weights);
}

template <class T>
py::tuple result_tuple(const AttentionResult<T>& r) {
  return result_tuple(PyTensor(r.out), r.weights.defined() ? std::optional<PyTensor>(PyTensor(r.weights))
                                                           : std::nullopt);
}

void bind_attention(py::module_& m) {
  m.def("causal_mask", [](std::size_t tq, std::optional<std::size_t> tk) {
    return mask_to_numpy(causal_mask(tq, tk.value_or(tq)));
  }, py::arg("T"), py::arg("Tk") = py::none(),
  "(T, Tk) bool, True where query i may see key j (bottom-right aligned when Tk > T)");
  m.def("sliding_window_mask", [](std::size_t tq, std::size_t tk, std::size_t window) {
    return mask_to_numpy(sliding_window_mask(tq, tk, window));
  }, py::arg("Tq"), py::arg("Tk"), py::arg("window"));
  m.def("scaled_dot_product_attention", [](const PyTensor& q, const PyTensor& k, const PyTensor& v,
                                           const py::object& mask, std::optional<double> scale) {
    const char* op = "scaled_dot_product_attention";
    check_same_dtype(op, q, k);
    check_same_dtype(op, q, v);
    std::optional<Mask> msk;
    if (!mask.is_none()) msk = mask_from_numpy(mask, op);
    return std::visit([&](const auto& Q) {
      using T = element_t<decltype(Q)>;
      return result_tuple(scaled_dot_product_attention(Q, k.get<T>(), v.get<T>(), msk, scale));
    }, q.v);
  }, py::arg("Q"), py::arg("K"), py::arg("V"), py::arg("mask") = py::none(),
  py::arg("scale") = py::none(), "-> (out, weights); scale defaults to 1/sqrt(d_k)");
  m.def("attention", [](const PyTensor& q, const PyTensor& k, const PyTensor& v,
                        TAPEGRAD_SPEC_PARAMS, const std::string& path) {
    check_same_dtype("attention", q, k);
    check_same_dtype("attention", q, v);
    const AttentionSpec spec =
        spec_of("attention", TAPEGRAD_SPEC_VALUES);
    const AttentionPath p = attention_path_of("attention", path);
    return std::visit([&](const auto& Q) {
      using T = element_t<decltype(Q)>;
      return result_tuple(attention(Q, k.get<T>(), v.get<T>(), spec, p));
    }, q.v);
  }, py::arg("q"), py::arg("k"), py::arg("v"), TAPEGRAD_SPEC_ARGS, py::arg("path") = "fused",
  "q (B,Tq,heads*hd), k/v (B,Tk,kv_heads*hd) -> (out (B,Tq,heads*hd), weights or None for flash)");
  auto mha_inputs = [](const PyTensor& x, const std::vector<const PyTensor*>& ws) {
    for (const PyTensor* w : ws) check_same_dtype("multi_head_attention", x, *w);
  };
  m.def("multi_head_attention", [mha_inputs](const PyTensor& x, const PyTensor& wq, const PyTensor& wk,
                                             const PyTensor& wv, const PyTensor& wo,
                                             const py::object& heads, bool causal) {
    mha_inputs(x, {&wq, &wk, &wv, &wo});
    AttentionSpec keywords;
    keywords.causal = causal;
    const AttentionSpec spec = spec_with("multi_head_attention", heads, keywords);
    const bool by_heads = !py::isinstance<AttentionSpec>(heads);  // (D, D) weights
    return unary(x, [&](const auto& X) {
      using T = element_t<decltype(X)>;
      const Tensor<T>&Q = wq.get<T>(), &K = wk.get<T>(), &V = wv.get<T>(), &O = wo.get<T>();
      return by_heads ? multi_head_attention(X, Q, K, V, O, spec.heads, spec.causal)
                      : multi_head_attention(X, Q, K, V, O, spec);
    });
  }, py::arg("x"), py::arg("Wq"), py::arg("Wk"), py::arg("Wv"), py::arg("Wo"), py::arg("heads"),
  py::arg("causal") = false);
  m.def("multi_head_attention_with_weights", [mha_inputs](const PyTensor& x, const PyTensor& wq,
        const PyTensor& wk, const PyTensor& wv, const PyTensor& wo, const py::object& heads,
        bool causal, std::optional<double> scale, bool fused) {
    mha_inputs(x, {&wq, &wk, &wv, &wo});
    AttentionSpec keywords;
    keywords.causal = causal;
    keywords.scale = scale;
    const AttentionSpec spec = spec_with("multi_head_attention_with_weights", heads, keywords);
    return std::visit([&](const auto& X) {
      using T = element_t<decltype(X)>;
      const Tensor<T>&Q = wq.get<T>(), &K = wk.get<T>(), &V = wv.get<T>(), &O = wo.get<T>();
      if (py::isinstance<AttentionSpec>(heads))
        return result_tuple(multi_head_attention_with_weights(X, Q, K, V, O, spec, fused));
      return result_tuple(multi_head_attention_with_weights(
          X, Q, K, V, O, spec.heads, MultiHeadOptions{spec.causal, spec.scale, fused}));
    }, x.v);
  }, py::arg("x"), py::arg("Wq"), py::arg("Wk"), py::arg("Wv"), py::arg("Wo"), py::arg("heads"),
  py::arg("causal") = false, py::arg("scale") = py::none(), py::arg("fused") = true);
}

RopeSpec rope_spec(double theta, const std::string& style, const std::string& scaling, double factor,
                   double low_freq_factor, double high_freq_factor, std::size_t original_context,
                   double beta_fast, double beta_slow) {
  return RopeSpec{theta, parse_rope_style(style), parse_rope_scaling(scaling), factor,
                  low_freq_factor, high_freq_factor, original_context, beta_fast, beta_slow};
}

void bind_model_ops(py::module_& m) {
  m.def("cross_entropy", [](const PyTensor& logits, const py::object& targets, std::int64_t ignore) {
    const Indices t = indices_from_numpy(targets, "cross_entropy");
    return unary(logits, TAPEGRAD_CALL(cross_entropy(x, t, ignore)));
  }, py::arg("logits"), py::arg("targets"), py::arg("ignore_index") = -100);
  m.def("linear_cross_entropy", [](const py::object& h, const py::object& weight, const py::object& targets,
                                   std::int64_t ignore, bool transposed, double cap, const py::object& chunk_rows) {
    const char* op = "linear_cross_entropy";
    const std::vector<PyTensor> hw = tensor_operands(op, {{"h", h}, {"weight", weight}});
    const Indices t = indices_from_numpy(targets, op);
    if (PyBool_Check(chunk_rows.ptr()) || !PyIndex_Check(chunk_rows.ptr()))
      wrong_type(op, "chunk_rows", "an integer (rows per chunk; 0: a default)", chunk_rows);
    const long long rows = py::int_(chunk_rows).cast<long long>();
    if (rows < 0) fail(op, "chunk_rows must be 0 (a default) or a number of rows, not {}", rows);
    LinearCrossEntropyOptions o;
    o.transposed = transposed;
    o.softcap = cap;
    o.ignore_index = ignore;
    o.chunk_rows = std::size_t(rows);
    return binary(op, hw[0], hw[1],
                  [&](const auto& x, const auto& w) { return linear_cross_entropy(x, w, t, o); });
  }, py::arg("h"), py::arg("weight"), py::arg("targets"), py::arg("ignore_index") = -100,
  py::arg("transposed") = false, py::arg("softcap") = 0.0, py::arg("chunk_rows") = 0,
  "cross_entropy([softcap](h @ weight), targets) (weight^T when transposed: a tied head) "
  "computed chunk_rows rows at a time (0: a default), so that the (N, V) logits never exist "
  "at once; with grad on, the forward also takes each chunk's gradients (the backward only "
  "scales them), so evaluate under no_grad");
  m.def("embedding", [](const PyTensor& weight, const py::object& ids) {
    const Indices i = indices_from_numpy(ids, "embedding");
    return unary(weight, TAPEGRAD_CALL(embedding(x, i)));
  }, py::arg("weight"), py::arg("ids"));
  m.def("weighted_row_sum", [](const PyTensor& rows, const py::object& ids, const PyTensor& weights) {
    const Indices i = indices_from_numpy(ids, "weighted_row_sum");
    return binary("weighted_row_sum", rows, weights, [&](const auto& r, const auto& w) {
      return weighted_row_sum(r, i, w);
    });
  }, py::arg("rows"), py::arg("ids"), py::arg("weights"),
  "rows (S, D), ids (N, k), weights (N, k) -> (N, D): out[n] = sum_j weights[n, j] * rows[ids[n, j]]");
  m.def("layer_norm", [](const PyTensor& x, const PyTensor& gamma, const PyTensor& beta, double eps) {
    check_same_dtype("layer_norm", x, gamma);
    check_same_dtype("layer_norm", x, beta);
    return unary(x, [&](const auto& X) {
      using T = element_t<decltype(X)>;
      return layer_norm(X, gamma.get<T>(), beta.get<T>(), T(eps));
    });
  }, py::arg("x"), py::arg("gamma"), py::arg("beta"), py::arg("eps") = 1e-5);
  m.def("rms_norm", [](const PyTensor& x, const PyTensor& gamma, double eps) {
    return binary("rms_norm", x, gamma, [&](const auto& X, const auto& g) {
      return rms_norm(X, g, element_t<decltype(X)>(eps));
    });
  }, py::arg("x"), py::arg("gamma"), py::arg("eps") = 1e-5);
  m.def("rope", [](const PyTensor& x, std::size_t offset, double theta, const std::string& style,
                   const std::string& scaling, double factor, double lo, double hi, std::size_t orig,
                   double bf, double bs) {
    const RopeSpec spec = rope_spec(theta, style, scaling, factor, lo, hi, orig, bf, bs);
    return unary(x, TAPEGRAD_CALL(rope(x, offset, spec)));
  }, py::arg("x"), py::arg("offset") = 0, py::arg("theta") = 10000.0, py::arg("style") = "half",
  py::arg("scaling") = "none", py::arg("factor") = 1.0, py::arg("low_freq_factor") = 1.0,
  py::arg("high_freq_factor") = 4.0, py::arg("original_context") = 0, py::arg("beta_fast") = 32.0,
  py::arg("beta_slow") = 1.0);
  m.def("rope_heads", [](const PyTensor& x, std::size_t heads, std::size_t offset, double theta,
                         const std::string& style, const std::string& scaling, double factor) {
    const RopeSpec spec = rope_spec(theta, style, scaling, factor, 1.0, 4.0, 0, 32.0, 1.0);
    return unary(x, TAPEGRAD_CALL(rope_heads(x, heads, offset, spec)));
  }, py::arg("x"), py::arg("heads"), py::arg("offset") = 0, py::arg("theta") = 10000.0,
  py::arg("style") = "half", py::arg("scaling") = "none", py::arg("factor") = 1.0);
}

#undef TAPEGRAD_CALL

}  // namespace

void bind_ops(py::module_& m) {
  bind_elementwise(m);
  bind_shapes_and_reductions(m);
  bind_attention_spec(m);
  bind_attention(m);
  bind_model_ops(m);
}

}  // namespace tapegrad::python
