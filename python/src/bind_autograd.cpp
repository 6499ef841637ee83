// The engine's switches and tools: no_grad, anomaly mode, gradcheck, the tape printer,
// the kernels' thread count.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <optional>

#include "autograd/gradcheck.hpp"
#include "autograd/memory.hpp"
#include "autograd/tape.hpp"
#include "bindings.hpp"
#include "memory_budget.hpp"
#include "numpy_convert.hpp"
#include "ops/kernels/gemm.hpp"  // kernels::set_num_threads
#include "platform/execution.hpp"
#include "py_tensor.hpp"

namespace tapegrad::python {
namespace {

// A C++ RAII guard as a Python context manager: alive between __enter__ and __exit__.
template <class Guard>
struct GuardScope {
  std::optional<Guard> guard;
  void enter() {
    if (guard) throw py::value_error("this context manager is already active; make a new one");
    guard.emplace();
  }
  void exit(const py::args&) { guard.reset(); }
};

template <class Guard>
void bind_guard(py::module_& m, const char* name, const char* doc) {
  py::class_<GuardScope<Guard>>(m, name, doc)
      .def(py::init<>())
      .def("__enter__", [](GuardScope<Guard>& g) { g.enter(); return &g; },
           py::return_value_policy::reference)
      .def("__exit__", &GuardScope<Guard>::exit);
}

// The library's result with its float32 hint in Python's words: float's 7 digits swamp
// central differences, so the usual cause of a failed float32 check is the dtype, not the
// gradient. `hint` is that one line, also the last line of str(result).
struct PyGradcheckResult : GradcheckResult {
  std::string hint;
  std::string to_string() const {
    std::string text = GradcheckResult::to_string();
    const std::size_t library_hint = text.find("hint: ");  // the C++ wording, replaced
    if (library_hint != std::string::npos) text.erase(library_hint);
    return hint.empty() ? text : text + hint + "\n";
  }
};

PyGradcheckResult with_hint(GradcheckResult r) {
  PyGradcheckResult out{std::move(r), ""};
  if (out.in_float && !out.passed)
    out.hint = "hint: finite differences need float64 (float32 has 7 digits): check float64 "
               "inputs (x.astype('float64')), or pass eps=1e-2, atol=1e-2, rtol=5e-2 for a "
               "coarse float32 check";
  return out;
}

template <class T>
GradcheckResult run_gradcheck(const py::function& f, const std::vector<PyTensor>& inputs,
                              const GradcheckOptions& options) {
  TensorFunction<T> fn = [&f](const std::vector<Tensor<T>>& xs) {
    py::list args;
    for (const Tensor<T>& x : xs) args.append(PyTensor(x));
    py::object out = f(args);
    if (!py::isinstance<PyTensor>(out))
      throw py::type_error("gradcheck: the function must return a tapegrad.Tensor, not " +
                           py::repr(out).cast<std::string>());
    const PyTensor& r = out.cast<const PyTensor&>();
    if (r.is_double() != std::is_same_v<T, double>)
      fail("gradcheck", "the function returned a {} tensor for {} inputs", r.dtype(),
           dtype_name<T>());
    return r.get<T>();
  };
  return gradcheck<T>(fn, tensors_as<T>(inputs), options);
}

void bind_gradcheck(py::module_& m) {
  py::class_<InputCheck>(m, "InputCheck", "one row of a gradcheck: one input")
      .def_readonly("shape", &InputCheck::shape)
      .def_readonly("checked", &InputCheck::checked)
      .def_readonly("max_abs_error", &InputCheck::max_abs_error)
      .def_readonly("max_rel_error", &InputCheck::max_rel_error)
      .def_readonly("passed", &InputCheck::passed);
  py::class_<PyGradcheckResult>(m, "GradcheckResult")
      .def_readonly("inputs", &PyGradcheckResult::inputs)
      .def_readonly("passed", &PyGradcheckResult::passed)
      .def_readonly("hint", &PyGradcheckResult::hint,
                    "one line when a float32 check failed, else ''")
      .def("__bool__", [](const PyGradcheckResult& r) { return r.passed; })
      .def("__str__", &PyGradcheckResult::to_string);
  m.def("gradcheck", [](const py::function& f, const std::vector<PyTensor>& inputs, double eps,
                        double atol, double rtol, std::size_t max_elements, std::uint64_t seed) {
    if (inputs.empty()) fail("gradcheck", "no inputs");
    check_one_dtype("gradcheck", inputs);
    const GradcheckOptions options{eps, atol, rtol, max_elements, seed};
    if (inputs[0].is_double()) return with_hint(run_gradcheck<double>(f, inputs, options));
    return with_hint(run_gradcheck<float>(f, inputs, options));
  }, py::arg("f"), py::arg("inputs"), py::arg("eps") = 1e-6, py::arg("atol") = 1e-5,
  py::arg("rtol") = 1e-3, py::arg("max_elements") = 0, py::arg("seed") = 0,
  "Central finite differences against backward for every input that requires grad. "
  "f takes the list of inputs and returns a Tensor. Use float64 inputs (float32 needs "
  "eps=1e-2, atol=1e-2, rtol=5e-2).");
}

kernels::MatmulPrecision precision_of(const char* op, const std::string& name) {
  if (name == "bf16" || name == "bfloat16") return kernels::MatmulPrecision::bf16;
  if (name == "f32" || name == "float32") return kernels::MatmulPrecision::f32;
  fail(op, "precision '{}' is not one of bf16 (bfloat16), f32 (float32)", name);
}

// with tapegrad.autocast("bf16"): this thread's float32 matrix products in bf16 for the
// block, the previous precision restored after it.
struct AutocastScope {
  kernels::MatmulPrecision precision;
  std::optional<kernels::MatmulPrecisionGuard> guard;
};

void bind_precision(py::module_& m) {
  py::class_<AutocastScope>(m, "autocast",
                            "with tapegrad.autocast('bf16'): every float32 matrix product of this "
                            "thread rounds its operands to bf16 and sums in float32, and so do "
                            "their backward products, also when backward() is called after the "
                            "block; weights, optimiser and other ops stay float32")
      .def(py::init([](const std::string& dtype) {
        return new AutocastScope{precision_of("autocast", dtype), std::nullopt};
      }), py::arg("dtype") = "bf16")
      .def("__enter__", [](AutocastScope& s) {
        if (s.guard) throw py::value_error("this autocast is already active; make a new one");
        s.guard.emplace(s.precision);
        return &s;
      }, py::return_value_policy::reference)
      .def("__exit__", [](AutocastScope& s, const py::args&) { s.guard.reset(); });
  m.def("matmul_precision", [] {
    return kernels::matmul_precision() == kernels::MatmulPrecision::bf16 ? "bf16" : "f32";
  }, "this thread's precision of float32 matrix products: 'f32' or 'bf16'");
  m.def("set_matmul_precision", [](const std::string& precision) {
    kernels::set_matmul_precision(precision_of("set_matmul_precision", precision));
  }, py::arg("precision"), "'f32' or 'bf16' for this thread's float32 matrix products");
}

}  // namespace

void bind_autograd(py::module_& m) {
  bind_precision(m);
  bind_guard<NoGradGuard>(m, "no_grad", "with tapegrad.no_grad(): ops record nothing");
  bind_guard<AnomalyGuard>(m, "detect_anomaly",
                           "with tapegrad.detect_anomaly(): the first NaN/Inf an op or a "
                           "backward produces raises AnomalyError naming the op");
  m.def("grad_enabled", &grad_enabled);
  m.def("anomaly_mode", &anomaly_mode);
  bind_gradcheck(m);
  m.def("tape_string", [](const py::object& dtype) {
    return dtype_is_double("tape_string", dtype) ? tape_string<double>() : tape_string<float>();
  }, py::arg("dtype") = "float32",
  "This thread's tape of that dtype, one line per node: op, input shapes -> output shape");
  m.def("tape_size", [](const py::object& dtype) {
    return dtype_is_double("tape_size", dtype) ? Tape<double>::active().size()
                                              : Tape<float>::active().size();
  }, py::arg("dtype") = "float32");
  m.def("clear_tape", []() {
    Tape<float>::active().clear();
    Tape<double>::active().clear();
  }, "Drops every recorded node of this thread (a backward through one then raises GraphError)");
  m.def("set_num_threads", &kernels::set_num_threads, py::arg("n"));
  m.def("set_max_memory", [](const py::object& max_bytes) {
    if (max_bytes.is_none()) return set_max_memory(std::nullopt);
    if (PyBool_Check(max_bytes.ptr()) || !PyIndex_Check(max_bytes.ptr()))
      wrong_type("set_max_memory", "max_bytes", "an integer number of bytes or None", max_bytes);
    const auto bytes = max_bytes.cast<long long>();
    if (bytes <= 0) fail("set_max_memory", "max_bytes must be > 0, got {}", bytes);
    set_max_memory(std::uint64_t(bytes));
  }, py::arg("max_bytes"),
  "A bound below the machine's memory for what tapegrad checks before allocating (models, "
  "optimiser state, zeros/ones/full/randn/uniform); None lifts it.");
  m.def("release_memory", &trim_free_memory,
        "Hands the memory freed so far back to the system (deleting a model or an optimiser "
        "does this by itself; tensors' memory is kept for reuse until then)");
}

}  // namespace tapegrad::python
