#pragma once
// PyTensor: the one Python type `tapegrad.Tensor`, holding a float32 or a float64 tensor.
// One type rather than one per dtype, so that isinstance() and every op work on both and a
// mix of the two is refused with a message instead of a pybind11 overload error.
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "autograd/errors.hpp"
#include "autograd/tensor.hpp"

namespace tapegrad::python {

// The NumPy name of a tensor's element type, as Python sees dtypes.
template <class T>
constexpr const char* dtype_name() {
  return std::is_same_v<T, double> ? "float64" : "float32";
}

struct PyTensor {
  std::variant<Tensor<float>, Tensor<double>> v;

  PyTensor(Tensor<float> t) : v(std::move(t)) {}
  PyTensor(Tensor<double> t) : v(std::move(t)) {}

  bool is_double() const { return v.index() == 1; }
  const char* dtype() const { return is_double() ? dtype_name<double>() : dtype_name<float>(); }
  std::string shape_string() const {
    return std::visit([](const auto& t) { return t.shape_string(); }, v);
  }
  template <class T>
  const Tensor<T>& get() const {
    return std::get<Tensor<T>>(v);
  }
};

// f(tensor) for whichever dtype `a` holds.
template <class X>
struct element;
template <class T>
struct element<Tensor<T>> {
  using type = T;
};
// The element type of a Tensor<T> a generic lambda received.
template <class X>
using element_t = typename element<std::decay_t<X>>::type;

template <class F>
PyTensor unary(const PyTensor& a, F&& f) {
  return std::visit([&](const auto& t) { return PyTensor(f(t)); }, a.v);
}

// Both operands must have one dtype: mixing them would need a silent conversion, which
// would either lose float64's digits or hide a float32 model behind a float64 result.
inline void check_same_dtype(const char* op, const PyTensor& a, const PyTensor& b) {
  if (a.v.index() != b.v.index())
    fail(op, "a {} tensor {} and a {} tensor {} do not mix; convert one with .astype()",
         a.dtype(), a.shape_string(), b.dtype(), b.shape_string());
}

// A list of tensors taken by one op (concatenate, gradcheck) must share one dtype too.
inline void check_one_dtype(const char* op, const std::vector<PyTensor>& ts) {
  for (const PyTensor& t : ts) check_same_dtype(op, ts[0], t);
}

// The Tensor<T> of each, for a list check_one_dtype has passed.
template <class T>
std::vector<Tensor<T>> tensors_as(const std::vector<PyTensor>& ts) {
  std::vector<Tensor<T>> out;
  out.reserve(ts.size());
  for (const PyTensor& t : ts) out.push_back(t.get<T>());
  return out;
}

template <class F>
PyTensor binary(const char* op, const PyTensor& a, const PyTensor& b, F&& f) {
  check_same_dtype(op, a, b);
  if (a.is_double()) return PyTensor(f(a.get<double>(), b.get<double>()));
  return PyTensor(f(a.get<float>(), b.get<float>()));
}

}  // namespace tapegrad::python
