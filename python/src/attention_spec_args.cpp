#include "attention_spec_args.hpp"

#include <fmt/format.h>

#include "autograd/errors.hpp"
#include "py_errors.hpp"

namespace tapegrad::python {

AttentionSpec spec_of(const char* op, const py::object& heads, std::size_t kv_heads,
                      std::size_t head_dim, std::optional<double> scale, bool causal,
                      std::size_t window, const std::string& bias, double softcap,
                      bool causal_default) {
  if (py::isinstance<AttentionSpec>(heads)) {
    if (kv_heads != 0 || head_dim != 0 || scale || causal != causal_default || window != 0 ||
        bias != "none" || softcap != 0.0)
      throw py::type_error(fmt::format(
          "{}: pass an AttentionSpec or its fields as keywords, not both", op));
    return heads.cast<AttentionSpec>();
  }
  if (!py::isinstance<py::int_>(heads) || py::isinstance<py::bool_>(heads))
    wrong_type(op, "heads", "an integer or an AttentionSpec", heads);
  const long h = heads.cast<long>();
  if (h < 1) fail(op, "heads must be at least 1, got {}", h);
  AttentionSpec spec;
  spec.heads = static_cast<std::size_t>(h);
  spec.kv_heads = kv_heads;
  spec.head_dim = head_dim;
  spec.scale = scale;
  spec.causal = causal;
  spec.window = window;
  spec.bias = position_bias_from_name(op, bias);
  spec.softcap = softcap;
  return spec;
}

void bind_attention_spec(py::module_& m) {
  static const std::string bias_doc = "the positional bias added to the scores: one of " +
                                      position_bias_names() + " (a bias needs causal attention)";
  py::class_<AttentionSpec>(m, "AttentionSpec",
                            "which attention: heads, grouped K/V heads, scale and the modifiers "
                            "(causal mask, sliding window, positional bias, logit soft-cap)")
      .def(py::init([](std::size_t heads, std::size_t kv_heads, std::size_t head_dim,
                       std::optional<double> scale, bool causal, std::size_t window,
                       const std::string& bias, double softcap) {
             return spec_of("AttentionSpec", py::int_(heads), kv_heads, head_dim, scale, causal,
                            window, bias, softcap);
           }),
           py::arg("heads") = 1, py::arg("kv_heads") = 0, py::arg("head_dim") = 0,
           py::arg("scale") = py::none(), py::arg("causal") = false, py::arg("window") = 0,
           py::arg("bias") = "none", py::arg("softcap") = 0.0)
      .def_readwrite("heads", &AttentionSpec::heads)
      .def_readwrite("kv_heads", &AttentionSpec::kv_heads, "0: as many as heads")
      .def_readwrite("head_dim", &AttentionSpec::head_dim, "0: q's width / heads")
      .def_readwrite("scale", &AttentionSpec::scale, "None: 1/sqrt(head_dim)")
      .def_readwrite("causal", &AttentionSpec::causal)
      .def_readwrite("window", &AttentionSpec::window, "0: none; w: keys i-w+1..i")
      .def_property("bias", [](const AttentionSpec& s) { return to_string(s.bias); },
                    [](AttentionSpec& s, const std::string& b) {
                      s.bias = position_bias_from_name("AttentionSpec", b);
                    }, bias_doc.c_str())
      .def_readwrite("softcap", &AttentionSpec::softcap, "c > 0: scores -> c tanh(s / c); 0: off")
      .def("__repr__", [](const AttentionSpec& s) {
        return fmt::format("AttentionSpec(heads={}, kv_heads={}, head_dim={}, scale={}, causal={}, "
                           "window={}, bias='{}', softcap={})", s.heads, s.kv_heads, s.head_dim,
                           s.scale ? fmt::format("{}", *s.scale) : "None",
                           s.causal ? "True" : "False", s.window, to_string(s.bias), s.softcap);
      });
}

}  // namespace tapegrad::python
