#include "numpy_convert.hpp"

#include <cstring>
#include <string>

namespace tapegrad::python {
namespace {

// Never destroyed: a static py::module_ would drop its reference in an exit handler, after
// the interpreter has finalised, and crash the process on the way out.
py::module_& numpy() {
  static py::module_* np = new py::module_(py::module_::import("numpy"));
  return *np;
}

std::string dtype_str(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

// A row-major, native-byte-order copy when `a` is anything else; `a` itself otherwise.
py::array c_contiguous(const py::array& a) {
  const bool native = a.dtype().attr("isnative").cast<bool>();
  if (native && (a.flags() & py::array::c_style)) return a;
  py::object native_dtype = a.dtype().attr("newbyteorder")("=");
  return numpy().attr("ascontiguousarray")(a, py::arg("dtype") = native_dtype);
}

Shape shape_of(const py::array& a) {
  Shape s(std::size_t(a.ndim()));
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = std::size_t(a.shape(py::ssize_t(i)));
  return s;
}

template <class T>
Array<T> array_from(const py::array& contiguous) {
  Array<T> out = Array<T>::from_shape(shape_of(contiguous));
  if (out.size() > 0) std::memcpy(out.data(), contiguous.data(), out.size() * sizeof(T));
  return out;
}

template <class T>
std::vector<py::ssize_t> dims_of(const T& a) {
  return std::vector<py::ssize_t>(a.shape().begin(), a.shape().end());
}

}  // namespace

bool dtype_is_double(const char* op, const py::object& dtype) {
  std::string name;
  if (py::isinstance<py::str>(dtype)) {
    name = dtype.cast<std::string>();
  } else if (!dtype.is_none()) {
    try {
      name = py::str(numpy().attr("dtype")(dtype)).cast<std::string>();
    } catch (const py::error_already_set&) {  // not a dtype at all: the message below
    }
  }
  if (name == "float64") return true;
  if (name == "float32") return false;
  wrong_type(op, "dtype", "float32 or float64 ('float32', np.float32, np.dtype('float32'), ...)",
             dtype);
}

PyTensor tensor_from_numpy(const py::object& data, bool requires_grad, const py::object& dtype) {
  if (py::isinstance<PyTensor>(data))
    throw py::type_error("tensor: got a tapegrad.Tensor; use .detach() or .numpy() to copy one");
  py::array a = numpy().attr("asarray")(data);
  if (!dtype.is_none())
    a = numpy().attr("asarray")(a, py::arg("dtype") = dtype_name_of("tensor", dtype));
  const char kind = a.dtype().kind();
  const auto size = a.dtype().itemsize();
  if (kind != 'f' || (size != 4 && size != 8))
    throw py::type_error("tensor: an array of dtype " + dtype_str(a) + " " +
                         shape_str(shape_of(a)) +
                         " is neither float32 nor float64; pass dtype='float32' or "
                         "dtype='float64' to convert it");
  a = c_contiguous(a);
  if (size == 8) return PyTensor(Tensor<double>(array_from<double>(a), requires_grad));
  return PyTensor(Tensor<float>(array_from<float>(a), requires_grad));
}

PyTensor array_constant(const char* op, const PyTensor& like, const py::object& array) {
  const py::array a = numpy().attr("asarray")(array);
  if (dtype_str(a) != like.dtype())
    throw py::type_error(std::string(op) + ": a " + like.dtype() + " tensor " + like.shape_string() +
                         " and a " + dtype_str(a) + " array " + shape_str(shape_of(a)) +
                         " do not mix; convert the array with .astype('" + like.dtype() + "')");
  return tensor_from_numpy(a, false, py::none());
}

template <class T>
py::array array_to_numpy(const Array<T>& a) {
  py::array_t<T> out(dims_of(a));
  if (a.size() > 0) std::memcpy(out.mutable_data(), a.data(), a.size() * sizeof(T));
  return std::move(out);
}
template py::array array_to_numpy(const Array<float>&);
template py::array array_to_numpy(const Array<double>&);

py::array tensor_to_numpy(const PyTensor& t, bool copy) {
  return std::visit(
      [&](const auto& tensor) -> py::array {
        using T = element_t<decltype(tensor)>;
        const auto& value = tensor.value();
        if (copy) return array_to_numpy<T>(value);
        // The capsule owns a handle, so the storage lives as long as the view does.
        auto* owner = new std::decay_t<decltype(tensor)>(tensor);
        py::capsule keep(owner, [](void* p) { delete static_cast<decltype(owner)>(p); });
        py::array view(py::dtype::of<T>(), dims_of(value), {}, value.data(), keep);
        view.attr("flags").attr("writeable") = false;
        return view;
      },
      t.v);
}

Indices indices_from_numpy(const py::object& data, const char* what) {
  py::array a = numpy().attr("asarray")(data);
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::type_error(std::string(what) + ": token ids must be an integer array, not " +
                         dtype_str(a) + " " + shape_str(shape_of(a)));
  a = numpy().attr("ascontiguousarray")(a, py::arg("dtype") = "int64");
  Indices out = Indices::from_shape(shape_of(a));
  if (out.size() > 0) std::memcpy(out.data(), a.data(), out.size() * sizeof(std::int64_t));
  return out;
}

py::array indices_to_numpy(const Indices& ids) {
  py::array_t<std::int64_t> out(dims_of(ids));
  if (ids.size() > 0) std::memcpy(out.mutable_data(), ids.data(), ids.size() * sizeof(std::int64_t));
  return std::move(out);
}

Mask mask_from_numpy(const py::object& data, const char* what) {
  py::array a = numpy().attr("asarray")(data);
  if (a.dtype().kind() != 'b')
    throw py::type_error(std::string(what) + ": a mask must be a bool array (True: may attend), not " +
                         dtype_str(a) + " " + shape_str(shape_of(a)));
  a = numpy().attr("ascontiguousarray")(a);
  Mask out = Mask::from_shape(shape_of(a));
  const bool* src = static_cast<const bool*>(a.data());
  std::copy(src, src + out.size(), out.begin());
  return out;
}

py::array mask_to_numpy(const Mask& m) {
  py::array_t<bool> out(dims_of(m));
  std::copy(m.begin(), m.end(), out.mutable_data());
  return std::move(out);
}

}  // namespace tapegrad::python
