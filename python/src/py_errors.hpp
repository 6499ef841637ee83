#pragma once
// The TypeError of an argument of the wrong type, in one wording: the function, the
// argument, what it takes and the type it got ("Config: d_model must be an integer, not
// float (1.5)"), instead of pybind11's cast messages, which name C++ types.
#include <pybind11/pybind11.h>

#include <string>

namespace tapegrad::python {

namespace py = pybind11;

inline std::string type_name(const py::handle& x) {
  return py::type::of(x).attr("__name__").cast<std::string>();
}

[[noreturn]] inline void wrong_type(const std::string& op, const std::string& argument,
                                    const std::string& wanted, const py::handle& got) {
  std::string value = py::repr(got).cast<std::string>();
  if (value.size() > 40) value = value.substr(0, 37) + "...";
  throw py::type_error(op + ": " + argument + " must be " + wanted + ", not " + type_name(got) +
                       " (" + value + ")");
}

}  // namespace tapegrad::python
