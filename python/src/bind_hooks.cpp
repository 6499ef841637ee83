// Hook points from Python (nn/hooks.hpp): run_with_cache, which returns the logits and an
// ActivationCache that reads as a dict of NumPy arrays, and run_with_hooks, whose
// functions see each activation as a tapegrad.Tensor and may return a replacement.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "bindings.hpp"
#include "nn/hooks.hpp"
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
