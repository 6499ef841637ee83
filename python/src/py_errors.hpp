#pragma once
// The TypeError of an argument of the wrong type, in one wording: the function, the
// argument, what it takes and the type it got ("config: d_model must be an integer, not
// float (1.5)"), instead of pybind11's cast messages, which name C++ types.
#include <pybind11/pybind11.h>

#include <string>

namespace tapegrad::python {

namespace py = pybind11;

inline std::string type_name(const py::handle& x) {
  return py::type::of(x).attr("__name__").cast<std::string>();
}

// "float (1.5)", "Transformer_float64", "<class 'numpy.int8'>": the type, and the value
// when it is short enough to help.
inline std::string described(const py::handle& x) {
  const std::string value = py::repr(x).cast<std::string>();
  if (PyType_Check(x.ptr())) return value;
  return value.size() <= 40 ? type_name(x) + " (" + value + ")" : type_name(x);
}

[[noreturn]] inline void wrong_type(const std::string& op, const std::string& argument,
                                    const std::string& wanted, const py::handle& got) {
  throw py::type_error(op + ": " + argument + " must be " + wanted + ", not " + described(got));
}

}  // namespace tapegrad::python
