#pragma once
// a (op) b for + - * / when either side may be a Python number: the one dispatch behind
// both tapegrad.add(a, b) and the Tensor operators. Op is a transparent std functor
// (std::plus<> ...), so the library's own Tensor/Scalar operators choose add/sub/mul/div
// and the operand order. A number becomes a constant of the tensor's dtype, never on the tape.
#include <pybind11/pybind11.h>

#include <string>

#include "ops/elementwise.hpp"
#include "py_tensor.hpp"

namespace tapegrad::python {

namespace py = pybind11;

template <class Op>
PyTensor tensor_op_tensor(const char* op, const PyTensor& a, const PyTensor& b) {
  return binary(op, a, b, Op{});
}

template <class Op>
PyTensor tensor_op_number(const PyTensor& a, double s) {
  return unary(a, [&](const auto& x) { return Op{}(x, element_t<decltype(x)>(s)); });
}

template <class Op>
PyTensor number_op_tensor(double s, const PyTensor& b) {
  return unary(b, [&](const auto& x) { return Op{}(element_t<decltype(x)>(s), x); });
}

// Either operand a tensor or a Python number (not both numbers).
template <class Op>
PyTensor tensor_or_number_op(const char* op, const py::object& a, const py::object& b) {
  const bool ta = py::isinstance<PyTensor>(a), tb = py::isinstance<PyTensor>(b);
  if (ta && tb) return tensor_op_tensor<Op>(op, a.cast<const PyTensor&>(), b.cast<const PyTensor&>());
  if (ta) return tensor_op_number<Op>(a.cast<const PyTensor&>(), b.cast<double>());
  if (tb) return number_op_tensor<Op>(a.cast<double>(), b.cast<const PyTensor&>());
  throw py::type_error(std::string(op) + ": at least one operand must be a tapegrad.Tensor");
}

}  // namespace tapegrad::python
