// The attention pieces below attention(): the fused path's two halves (weights, mix), the
// scores the softmax sees, the flash path by name; and the KV cache with the one-token
// decode op that reads it in place. The same AttentionSpec arguments as attention().
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <type_traits>

#include "attention_spec_args.hpp"
#include "bindings.hpp"
#include "nn/kv_cache.hpp"
#include "nn/transformer.hpp"
#include "ops/attention.hpp"
#include "ops/attention_decode.hpp"
#include "ops/attention_flash.hpp"
#include "ops/attention_fused.hpp"
#include "ops/threads.hpp"
#include "py_tensor.hpp"

namespace tapegrad::python {

namespace {

// t as a Tensor<T> for a cache of T, refused with both dtypes named otherwise.
template <class T>
const Tensor<T>& for_cache(const char* op, const PyTensor& t) {
  if (t.is_double() != std::is_same_v<T, double>)
    fail(op, "a {} tensor for a {} cache", t.dtype(), dtype_name<T>());
  return t.get<T>();
}

// f(q, k) on the two tensors' shared dtype.
template <class F>
PyTensor on_q_k(const char* op, const PyTensor& q, const PyTensor& k, F&& f) {
  check_same_dtype(op, q, k);
  return std::visit([&](const auto& Q) {
    return PyTensor(f(Q, k.get<element_t<decltype(Q)>>()));
  }, q.v);
}

void bind_attention_parts(py::module_& m) {
  m.def("attention_weights", [](const PyTensor& q, const PyTensor& k, TAPEGRAD_SPEC_PARAMS) {
    const AttentionSpec spec = spec_of("attention_weights", TAPEGRAD_SPEC_VALUES);
    return on_q_k("attention_weights", q, k, [&](const auto& Q, const auto& K) {
      return attention_weights(Q, K, check_attention_spec("attention_weights", Q.shape(), K.shape(),
                                                          K.shape(), spec));
    });
  }, py::arg("q"), py::arg("k"), TAPEGRAD_SPEC_ARGS,
  "q (B,Tq,heads*hd), k (B,Tk,kv_heads*hd) -> softmax weights (B,heads,Tq,Tk), 0 where masked");
  m.def("attention_mix", [](const PyTensor& weights, const PyTensor& v, TAPEGRAD_SPEC_PARAMS) {
    check_same_dtype("attention_mix", weights, v);
    const AttentionSpec spec = spec_of("attention_mix", TAPEGRAD_SPEC_VALUES);
    return std::visit([&](const auto& W) {
      using T = element_t<decltype(W)>;
      const Tensor<T>& V = v.get<T>();
      const Shape& ws = W.shape();
      if (ws.size() != 4 || ws[1] != spec.heads)
        fail("attention_mix", "weights must be (B, heads={}, Tq, Tk), got {}", spec.heads, W.shape_string());
      // The queries' shape the weights came from: (B, Tq, heads * head_dim), head_dim the
      // values' width when not given (mixing never reads q).
      const std::size_t kv = resolve_kv_heads(spec.heads, spec.kv_heads);
      const std::size_t hd = spec.head_dim ? spec.head_dim : (V.shape().size() == 3 ? V.shape()[2] / kv : 1);
      const Shape q_shape{ws[0], ws[2], spec.heads * hd};
      const Shape k_shape{ws[0], ws[3], kv * hd};
      const AttentionDims d = check_attention_spec("attention_mix", q_shape, k_shape, V.shape(), spec);
      return PyTensor(attention_mix(W, V, d));
    }, weights.v);
  }, py::arg("weights"), py::arg("v"), TAPEGRAD_SPEC_ARGS,
  "weights (B,heads,Tq,Tk) from attention_weights, v (B,Tk,kv_heads*dv) -> (B,Tq,heads*dv)");
  m.def("attention_scores", [](const PyTensor& q, const PyTensor& k, TAPEGRAD_SPEC_PARAMS) {
    const AttentionSpec spec = spec_of("attention_scores", TAPEGRAD_SPEC_VALUES);
    return on_q_k("attention_scores", q, k,
                  [&](const auto& Q, const auto& K) { return attention_scores(Q, K, spec); });
  }, py::arg("q"), py::arg("k"), TAPEGRAD_SPEC_ARGS,
  "scale * q.k (B,heads,Tq,Tk), -inf where masked: what the softmax sees; a constant");
  m.def("flash_attention", [](const PyTensor& q, const PyTensor& k, const PyTensor& v,
                              TAPEGRAD_SPEC_PARAMS) {
    check_same_dtype("flash_attention", q, k);
    check_same_dtype("flash_attention", q, v);
    const AttentionSpec spec = spec_of("flash_attention", TAPEGRAD_SPEC_VALUES);
    return std::visit([&](const auto& Q) {
      using T = element_t<decltype(Q)>;
      const Tensor<T>&K = k.get<T>(), &V = v.get<T>();
      const AttentionDims d = check_attention_spec("flash_attention", Q.shape(), K.shape(), V.shape(), spec);
      return PyTensor(flash_attention(Q, K, V, d));
    }, q.v);
  }, py::arg("q"), py::arg("k"), py::arg("v"), TAPEGRAD_SPEC_ARGS,
  "attention() by the tiled path: O(T) memory, no weights");
  m.def("num_threads", &num_threads, "the threads the kernels use (set_num_threads)");
}

template <class T>
void bind_cache(py::module_& nn, py::module_& m, const std::string& suffix) {
  using Cache = KVCache<T>;
  using Set = KVCacheSet<T>;
  py::class_<Cache>(nn, ("KVCache_" + suffix).c_str(), "one layer's keys and values, a ring")
      .def_property_readonly("length", &Cache::length, "positions appended so far")
      .def_property_readonly("capacity", &Cache::capacity)
      .def_property_readonly("count", &Cache::count, "positions held")
      .def_property_readonly("window", &Cache::window)
      .def_property_readonly("first_position", &Cache::first_position)
      .def_property_readonly("bytes", &Cache::bytes)
      .def_property_readonly("kv_dtype", [](const Cache& c) {
        return c.dtype() == KVDtype::bf16 ? "bf16" : "f32";
      }, "what the cache stores: f32 (the model's type) or bf16")
      .def("append", [](Cache& c, const PyTensor& k, const PyTensor& v) {
        c.append(for_cache<T>("KVCache.append", k), for_cache<T>("KVCache.append", v));
      }, py::arg("k"), py::arg("v"), "k (B,Tn,kv_heads*hd), v (B,Tn,kv_heads*dv)")
      .def("keys", [](const Cache& c) { return PyTensor(c.keys()); }, "(B, count, width), oldest first")
      .def("values", [](const Cache& c) { return PyTensor(c.values()); })
      .def("reset", &Cache::reset);
  py::class_<Set>(nn, ("KVCacheSet_" + suffix).c_str(), "one KVCache per layer of a model")
      .def(py::init([](const TransformerConfig& c, std::size_t batch, std::size_t positions,
                       const std::string& kv_dtype) {
             return Set(c, batch, positions, kv_dtype_from_name(kv_dtype));
           }), py::arg("config"), py::arg("batch"), py::arg("positions"),
           py::arg("kv_dtype") = "f32", "kv_dtype: f32 (the model's type) or bf16 (float32 models)")
      .def_property_readonly("length", &Set::length)
      .def_property_readonly("bytes", &Set::bytes)
      .def("__len__", &Set::size)
      .def("__getitem__", [](Set& s, std::size_t i) -> Cache& {
        if (i >= s.size()) throw py::index_error("KVCacheSet: layer " + std::to_string(i) +
                                                 " of " + std::to_string(s.size()));
        return s[i];
      }, py::return_value_policy::reference_internal)
      .def("reset", &Set::reset);
  m.def("attention_decode", [](const PyTensor& q, const Cache& cache, TAPEGRAD_SPEC_PARAMS) {
    const AttentionSpec spec = spec_of("attention_decode", TAPEGRAD_SPEC_VALUES, true);
    return PyTensor(cache.decode(for_cache<T>("attention_decode", q), spec));
  }, py::arg("q"), py::arg("cache"), TAPEGRAD_SPEC_ARGS_CAUSAL(true),
  "q (B,1,heads*hd), the newest held position's query -> (B,1,heads*dv) over the cache");
}

}  // namespace

void bind_decode(py::module_& m, py::module_& nn) {
  bind_attention_parts(m);
  bind_cache<float>(nn, m, "float32");
  bind_cache<double>(nn, m, "float64");
}

}  // namespace tapegrad::python
