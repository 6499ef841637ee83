// tapegrad._tapegrad: the compiled half of the `tapegrad` package (python/tapegrad/).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <vector>

#include "bindings.hpp"

PYBIND11_MODULE(_tapegrad, m) {
  using namespace tapegrad::python;
  m.doc() = "tapegrad: a tape-based autograd engine in C++ (float32 and float64)";
  bind_errors(m);
  bind_tensor(m);
  bind_ops(m);
  bind_autograd(m);
  py::module_ nn = m.def_submodule("nn", "the transformer, its configuration, optimisers");
  bind_nn(nn);
  bind_pretrained(nn);
  bind_decode(m, nn);
  bind_hooks(m);
  py::module_ tasks = m.def_submodule("tasks", "the built-in training tasks");
  bind_tasks(tasks);
  bind_text(m);
  bind_safetensors(m);
  // What the tests use to show the trap tapegrad.tensor avoids: pybind11's default
  // py::array_t<float> converts any numeric array to float32 without a word.
  py::module_ testing = m.def_submodule("_testing", "for the tests only");
  testing.def("read_as_array_t_float", [](const py::array_t<float>& a) {
    return std::vector<double>(a.data(), a.data() + a.size());
  });
}
