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

#include "ops/embedding.hpp"  // Indices
#include "ops/softmax.hpp"    // Mask
#include "py_tensor.hpp"

namespace tapegrad::python {

namespace py = pybind11;

// `dtype` empty: the array's own (float32 or float64, else TypeError); else "float32" or
// "float64", converting explicitly.
PyTensor tensor_from_numpy(const py::object& data, bool requires_grad, const std::string& dtype);

// An array beside a tensor in an op (`t + a`, `a @ t`): a constant (no grad) of the
// tensor's dtype. An array of any other dtype is a TypeError naming both dtypes: converting
// it would silently lose float64's digits or widen a float32 model.
PyTensor array_constant(const char* op, const PyTensor& like, const py::object& array);

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
