// read_safetensors / write_safetensors: the safetensors reader and writer (nn/io/safetensors)
// for checking them against the reference `safetensors` package. Bad files raise
// tapegrad._tapegrad.SafetensorsError (ValueError) with the reader's message.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <vector>

#include "bindings.hpp"
#include "nn/io/safetensors.hpp"

namespace tapegrad::python {

namespace {

py::dict read_safetensors(const std::string& path) {
  const SafetensorsFile file(path);
  py::dict out;
  for (const SafetensorsTensor& t : file.tensors()) {
    py::array_t<double> values(std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()));
    file.read(t.name, values.mutable_data());
    out[py::str(t.name)] = values;
  }
  return out;
}

template <class T>
void write_as(const std::string& path, const py::dict& tensors,
              const std::map<std::string, std::string>& metadata) {
  std::vector<py::array_t<T, py::array::c_style>> arrays;  // alive until the save returns
  std::vector<SafetensorsSource<T>> sources;
  for (const auto& [name, value] : tensors) {
    // explicit: the caller named the dtype to write, so every array is converted to it
    arrays.push_back(py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(value));
    if (!arrays.back()) throw py::type_error("write_safetensors: a value is not an array");
    const auto& a = arrays.back();
    sources.push_back({name.template cast<std::string>(),
                       std::vector<std::size_t>(a.shape(), a.shape() + a.ndim()), a.data()});
  }
  save_safetensors<T>(path, sources, metadata);
}

}  // namespace

void bind_safetensors(py::module_& m) {
  py::register_exception<SafetensorsError>(m, "SafetensorsError", PyExc_ValueError);
  m.def("read_safetensors", &read_safetensors, py::arg("path"),
        "Every tensor of a .safetensors file (F64, F32, BF16, F16) as float64 arrays, by name.");
  m.def(
      "write_safetensors",
      [](const std::string& path, const py::dict& tensors, const std::string& dtype,
         const std::map<std::string, std::string>& metadata) {
        if (dtype == "F32")
          write_as<float>(path, tensors, metadata);
        else if (dtype == "F64")
          write_as<double>(path, tensors, metadata);
        else
          throw py::value_error("write_safetensors: dtype must be 'F32' or 'F64', got '" + dtype +
                                "'");
      },
      py::arg("path"), py::arg("tensors"), py::arg("dtype") = "F32",
      py::arg("metadata") = std::map<std::string, std::string>{{"format", "pt"}},
      "Writes {name: array} as dtype 'F32' or 'F64' (each array converted to it).");
}

}  // namespace tapegrad::python
