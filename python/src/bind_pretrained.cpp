// Hugging Face model folders (nn/io/pretrained.hpp) for tapegrad.nn: load_pretrained_float32
// and _float64 (a model, its model_type and the kept config.json fields) and
// save_pretrained_float32 and _float64; python/tapegrad/nn.py makes them
// Transformer.from_pretrained and model.save_pretrained.
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <tuple>

#include "bindings.hpp"
#include "memory_budget.hpp"
#include "nn/io/hf/registry.hpp"
#include "platform/file_io.hpp"
#include "nn/io/pretrained.hpp"
#include "py_tensor.hpp"  // dtype_name

namespace tapegrad::python {

namespace {

// The weights of the folder's model must fit before it is built: its config.json says how
// many there are.
template <class T>
void require_model_memory(const std::string& dir) {
  if (!is_pretrained_folder(dir)) return;  // load_pretrained says what is wrong
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  const HfModelConfig hf = hf_config_from_json(read_text_file(path, path), path);
  const std::uint64_t params = count_parameters(hf.config).total();
  require_memory("from_pretrained", fmt::format("{} parameters need", params),
                 double(params) * sizeof(T), fmt::format("in {}", dtype_name<T>()));
}

template <class T>
void bind_dtype(py::module_& nn) {
  const std::string dtype = dtype_name<T>();
  nn.def(("load_pretrained_" + dtype).c_str(), [](const std::string& dir, bool allow_nonfinite) {
    require_model_memory<T>(dir);
    py::gil_scoped_release release;
    PretrainedModel<T> p = load_pretrained<T>(dir, allow_nonfinite);
    return std::make_tuple(std::move(p.model), p.model_type, p.kept_json);
  }, py::arg("dir"), py::arg("allow_nonfinite") = false);
  nn.def(("save_pretrained_" + dtype).c_str(),
         [](const Transformer<T>& model, const std::string& dir, const std::string& kept_json) {
           py::gil_scoped_release release;
           save_pretrained(model, dir, kept_json);
         }, py::arg("model"), py::arg("dir"), py::arg("kept_json") = "");
}

}  // namespace

void bind_pretrained(py::module_& nn) {
  bind_dtype<float>(nn);
  bind_dtype<double>(nn);
  nn.def("hf_model_types", [] { return hf::model_types(); },
         "The config.json model_types from_pretrained reads and save_pretrained writes");
  nn.def("is_pretrained_folder", &is_pretrained_folder, py::arg("path"),
         "True when path is a directory holding a config.json");
}

}  // namespace tapegrad::python
