#pragma once
// NumPy arrays in and out of tapegrad, with every conversion explicit.
//
// pybind11's py::array_t<float> converts whatever it is given (int64, float64, a
// big-endian or strided array) into a fresh float32 copy without a word; a float64 study
// would silently lose its digits and an integer mask would silently become data. Here a
// tensor is made only from a float32 or float64 array (the dtype is kept); any other
// dtype is refused with a TypeError naming it unless the caller asked for a dtype.
// Non-contiguous and non-native-byte-order arrays are copied into row-major order, value
// for value, by NumPy itself.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>

#include "ops/embedding.hpp"  // Indices
#include "ops/softmax.hpp"    // Mask
#include "py_errors.hpp"
#include "py_tensor.hpp"

namespace tapegrad::python {

namespace py = pybind11;

// A dtype argument as NumPy spells it ('float32', np.float32, np.dtype('float32'), and the
// same for float64): true for float64. Anything else is a TypeError naming `op`'s dtype
// argument and what it got. The string 'float' is refused: NumPy reads it as float64,
// PyTorch as float32.
bool dtype_is_double(const char* op, const py::object& dtype);
inline const char* dtype_name_of(const char* op, const py::object& dtype) {
  return dtype_is_double(op, dtype) ? "float64" : "float32";
}

// `dtype` None: the array's own (float32 or float64, else TypeError); else a dtype
// dtype_is_double takes, converting explicitly.
PyTensor tensor_from_numpy(const py::object& data, bool requires_grad, const py::object& dtype);

// An array beside a tensor in an op (`t + a`, `a @ t`): a constant (no grad) of the
// tensor's dtype. An array of any other dtype is a TypeError naming both dtypes: converting
// it would silently lose float64's digits or widen a float32 model.
PyTensor array_constant(const char* op, const PyTensor& like, const py::object& array);

// A Python or NumPy number (int, float, bool, np.float32(2), ...); nullopt for anything
// else: strings, complex numbers, sequences.
inline std::optional<double> number_of(const py::handle& x) {
  if (py::isinstance<py::str>(x) || py::isinstance<py::array>(x) || !PyNumber_Check(x.ptr()))
    return std::nullopt;
  const double v = PyFloat_AsDouble(x.ptr());
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return std::nullopt;
  }
  return v;
}

// A copy (the default), or a read-only view that keeps the tensor alive: writing into a
// tensor behind the tape's back would make a later backward silently wrong.
py::array tensor_to_numpy(const PyTensor& t, bool copy);
template <class T>
py::array array_to_numpy(const Array<T>& a);

// Token ids: any integer array (converted to int64); floats and bools are refused.
Indices indices_from_numpy(const py::object& data, const char* what);
py::array indices_to_numpy(const Indices& ids);
// Masks: bool arrays only; a 0/1 integer array is refused (true means "may attend").
Mask mask_from_numpy(const py::object& data, const char* what);
py::array mask_to_numpy(const Mask& m);

}  // namespace tapegrad::python
