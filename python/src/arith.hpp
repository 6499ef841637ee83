#pragma once
// a (op) b for + - * / ** @ when one side is a tensor and the other a tensor, a NumPy array or
// a number: the one dispatch behind both tapegrad.add(a, b) and the Tensor operators
// (forward and reflected). Op is a transparent functor (std::plus<> ...), so the library's
// own Tensor/Scalar operators choose add/sub/mul/div and the operand order. An array or a
// number becomes a constant of the tensor's dtype, never on the tape; an array of another
// dtype is refused (numpy_convert's array_constant), since dtypes never mix silently.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <type_traits>

#include "numpy_convert.hpp"
#include "ops/elementwise.hpp"
#include "ops/matmul.hpp"
#include "py_errors.hpp"
#include "py_tensor.hpp"

namespace tapegrad::python {

namespace py = pybind11;

// matmul as a functor, so that @ goes through the same dispatch as + - * /.
struct MatmulOp {
  template <class A, class B>
  auto operator()(const A& a, const B& b) const -> decltype(matmul(a, b)) {  // SFINAE: no scalars
    return matmul(a, b);
  }
};

// pow as a functor, for ** and tapegrad.pow: a tensor or a number on either side.
struct PowOp {
  template <class A, class B>
  auto operator()(const A& a, const B& b) const -> decltype(pow(a, b)) {
    return pow(a, b);
  }
};

template <class Op>
PyTensor tensor_op_tensor(const char* op, const PyTensor& a, const PyTensor& b) {
  return binary(op, a, b, Op{});
}

// tensor (op) other when `tensor_first`, else other (op) tensor; nullopt when `other` is
// neither a tensor, an array nor a number (an operator then returns NotImplemented).
template <class Op>
std::optional<PyTensor> try_tensor_op(const char* op, const PyTensor& t, const py::object& other,
                                      bool tensor_first) {
  auto ordered = [&](const PyTensor& c) {
    return tensor_first ? tensor_op_tensor<Op>(op, t, c) : tensor_op_tensor<Op>(op, c, t);
  };
  if (py::isinstance<PyTensor>(other)) return ordered(other.cast<const PyTensor&>());
  if (py::isinstance<py::array>(other)) return ordered(array_constant(op, t, other));
  if constexpr (std::is_invocable_v<Op, Tensor<float>, float>) {
    if (const std::optional<double> s = number_of(other))
      return unary(t, [&](const auto& x) {
        const element_t<decltype(x)> c(*s);
        return tensor_first ? Op{}(x, c) : Op{}(c, x);
      });
  }
  return std::nullopt;
}

// tapegrad.add(a, b) and friends: either operand may be the tensor.
template <class Op>
PyTensor tensor_or_constant_op(const char* op, const py::object& a, const py::object& b) {
  const bool a_is_tensor = py::isinstance<PyTensor>(a);
  if (!a_is_tensor && !py::isinstance<PyTensor>(b))
    throw py::type_error(std::string(op) + ": at least one operand must be a tapegrad.Tensor, "
                         "got " + type_name(a) + " and " + type_name(b));
  const std::optional<PyTensor> out =
      a_is_tensor ? try_tensor_op<Op>(op, a.cast<const PyTensor&>(), b, true)
                  : try_tensor_op<Op>(op, b.cast<const PyTensor&>(), a, false);
  if (!out)
    wrong_type(op, "the operand beside the tensor", "a tensor, a NumPy array or a number",
               a_is_tensor ? b : a);
  return *out;
}

}  // namespace tapegrad::python
