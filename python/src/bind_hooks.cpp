// Hook points from Python (nn/hooks.hpp): run_with_cache, which returns the logits and an
// ActivationCache that reads as a dict of NumPy arrays, and run_with_hooks, whose
// functions see each activation as a tapegrad.Tensor and may return a replacement; and the
// helpers of nn/interpret.hpp built on them (patching grids, direct logit attribution).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "bindings.hpp"
#include "nn/hooks.hpp"
#include "nn/interpret.hpp"
#include "nn/transformer.hpp"
#include "numpy_convert.hpp"
#include "py_tensor.hpp"

namespace tapegrad::python {

namespace {

// One cache of either dtype: the Python class is one, as tapegrad.Tensor is.
struct PyActivationCache {
  std::variant<ActivationCache<float>, ActivationCache<double>> v;

  template <class F>
  decltype(auto) visit(F&& f) const {
    return std::visit(f, v);
  }
  std::vector<std::string> names() const {
    return visit([](const auto& c) { return c.names(); });
  }
};

// What a Python hook returned, as the activation's replacement: None keeps it; a Tensor
// of the model's dtype is used as is (on the tape); an array becomes a constant.
template <class T>
Tensor<T> replacement(const py::object& result, const Tensor<T>& activation,
                      const std::string& name) {
  if (result.is_none()) return activation;
  const std::string op = "run_with_hooks (at '" + name + "')";
  if (py::isinstance<PyTensor>(result)) {
    const PyTensor& t = result.cast<const PyTensor&>();
    check_same_dtype(op.c_str(), PyTensor(activation), t);
    return t.get<T>();
  }
  return array_constant(op.c_str(), PyTensor(activation), result).get<T>();
}

template <class T>
Hooks<T> hooks_of(const py::dict& functions) {
  Hooks<T> hooks;
  for (const auto& [key, fn] : functions) {
    const std::string name = py::cast<std::string>(key);
    if (!PyCallable_Check(fn.ptr()))
      fail("run_with_hooks", "the hook at '{}' is not callable", name);
    const py::object f = py::reinterpret_borrow<py::object>(fn);
    hooks.add(name, [f](const Tensor<T>& x, const std::string& at) {
      return replacement<T>(f(PyTensor(x), at), x, at);
    });
  }
  return hooks;
}

py::array_t<double> grid(const std::vector<std::vector<double>>& rows) {
  const std::size_t cols = rows.empty() ? 0 : rows[0].size();
  py::array_t<double> a({rows.size(), cols});
  for (std::size_t r = 0; r < rows.size(); ++r)
    std::copy(rows[r].begin(), rows[r].end(), a.mutable_data(r, 0));
  return a;
}

// metric(logits: tapegrad.Tensor) -> a number, from Python, for `op`
template <class T>
LogitMetric<T> metric_of(const py::function& metric, const char* op) {
  return [metric, op](const Tensor<T>& logits) {
    const py::object result = metric(PyTensor(logits));
    if (const std::optional<double> value = number_of(result)) return *value;
    wrong_type(op, "the metric's result", "a number", result);
  };
}

template <class T>
void bind_interpret(py::module_& m) {
  m.def("patch_residual_by_position", [](Transformer<T>& model, const py::object& clean,
                                         const py::object& corrupted, const py::function& metric) {
    return grid(patch_residual_by_position(model, indices_from_numpy(clean, "patch_residual_by_position"),
                                           indices_from_numpy(corrupted, "patch_residual_by_position"),
                                           metric_of<T>(metric, "patch_residual_by_position")));
  }, py::arg("model"), py::arg("clean"), py::arg("corrupted"), py::arg("metric"),
  "-> (layers, T) array: metric(logits) of the corrupted run with blocks.{l}.resid_pre at "
  "position p from the clean run");
  m.def("patch_heads", [](Transformer<T>& model, const py::object& clean, const py::object& corrupted,
                          const py::function& metric) {
    return grid(patch_heads(model, indices_from_numpy(clean, "patch_heads"),
                            indices_from_numpy(corrupted, "patch_heads"),
                            metric_of<T>(metric, "patch_heads")));
  }, py::arg("model"), py::arg("clean"), py::arg("corrupted"), py::arg("metric"),
  "-> (layers, heads) array: metric(logits) of the corrupted run with head h's attn.z from "
  "the clean run");
  m.def("direct_logit_attribution", [](Transformer<T>& model, const py::object& tokens,
                                       const py::object& targets, std::int64_t ignore_index) {
    const LogitAttribution a = direct_logit_attribution(
        model, indices_from_numpy(tokens, "direct_logit_attribution"),
        indices_from_numpy(targets, "direct_logit_attribution"), ignore_index);
    py::dict out;
    out["heads"] = grid(a.heads);
    out["embed"] = a.embed;
    out["logit"] = a.logit;
    out["rest"] = a.rest;
    return out;
  }, py::arg("model"), py::arg("tokens"), py::arg("targets"), py::arg("ignore_index") = -100,
  "-> {'heads': (layers, heads) array, 'embed', 'logit', 'rest'}: each component's mean share "
  "of the target logits, the final norm frozen at this run's scale (docs/HOOKS.md)");
}

template <class T>
void bind_runs(py::module_& m) {
  m.def("run_with_cache", [](Transformer<T>& model, const py::object& tokens,
                             const std::optional<std::vector<std::string>>& names, bool grads) {
    const Indices ids = indices_from_numpy(tokens, "run_with_cache");
    CachedRun<T> run = run_with_cache(model, ids, names.value_or(std::vector<std::string>{}), grads);
    return py::make_tuple(PyTensor(run.logits), PyActivationCache{std::move(run.cache)});
  }, py::arg("model"), py::arg("tokens"), py::arg("names") = py::none(), py::arg("grads") = false,
  "model.forward(tokens) keeping the activations at `names` (None: every hook point) -> "
  "(logits, cache); with grads, a backward from the logits leaves cache.grad(name)");
  m.def("run_with_hooks", [](Transformer<T>& model, const py::object& tokens, const py::dict& functions) {
    const Indices ids = indices_from_numpy(tokens, "run_with_hooks");
    Hooks<T> hooks = hooks_of<T>(functions);
    return PyTensor(model.run_with_hooks(ids, hooks));
  }, py::arg("model"), py::arg("tokens"), py::arg("hooks"),
  "model.forward(tokens) with hooks {name: fn}: fn(activation, name) sees a tapegrad.Tensor "
  "and returns None (keep it), a Tensor (on the tape) or an array of its shape");
  bind_interpret<T>(m);
}

}  // namespace

void bind_hooks(py::module_& m) {
  py::class_<PyActivationCache>(m, "ActivationCache",
                                "The activations of one run by hook point name, as NumPy arrays")
      .def("__getitem__", [](const PyActivationCache& c, const std::string& name) {
        return c.visit([&](const auto& cache) { return array_to_numpy(cache[name].value()); });
      })
      .def("tensor", [](const PyActivationCache& c, const std::string& name) {
        return c.visit([&](const auto& cache) { return PyTensor(cache[name]); });
      }, py::arg("name"), "the activation as the tapegrad.Tensor the model used")
      .def("grad", [](const PyActivationCache& c, const std::string& name) {
        return c.visit([&](const auto& cache) { return array_to_numpy(cache.grad(name)); });
      }, py::arg("name"), "d (what backward started from) / d activation")
      .def("__contains__", [](const PyActivationCache& c, const std::string& name) {
        return c.visit([&](const auto& cache) { return cache.contains(name); });
      })
      .def("__len__", [](const PyActivationCache& c) { return c.names().size(); })
      .def("__iter__", [](const PyActivationCache& c) { return py::iter(py::cast(c.names())); })
      .def("keys", &PyActivationCache::names)
      .def("__repr__", [](const PyActivationCache& c) {
        return "ActivationCache(" + std::to_string(c.names().size()) + " activations)";
      });
  bind_runs<float>(m);
  bind_runs<double>(m);
}

}  // namespace tapegrad::python
