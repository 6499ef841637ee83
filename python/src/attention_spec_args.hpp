#pragma once
// One way to say which attention: every attention function takes either an AttentionSpec
// object in place of `heads` (tg.attention(q, k, v, tg.AttentionSpec(4, causal=True))) or
// the same fields as keyword arguments, with the same names and defaults.
#include <pybind11/pybind11.h>

#include <optional>
#include <string>

#include "ops/attention_spec.hpp"

namespace tapegrad::python {

namespace py = pybind11;

// The keyword arguments after the tensors, in AttentionSpec's order and with its defaults.
#define TAPEGRAD_SPEC_ARGS_CAUSAL(causal_default)                                            \
  py::arg("heads"), py::arg("kv_heads") = 0, py::arg("head_dim") = 0,                        \
      py::arg("scale") = py::none(), py::arg("causal") = causal_default,                     \
      py::arg("window") = 0, py::arg("bias") = "none", py::arg("softcap") = 0.0
#define TAPEGRAD_SPEC_ARGS TAPEGRAD_SPEC_ARGS_CAUSAL(false)

// The spec `op` was called with: `heads` itself when it is an AttentionSpec (then the other
// fields must keep their defaults: a spec and keywords together would leave one of them
// unused), else the fields. A wrong type is a TypeError naming the argument.
AttentionSpec spec_of(const char* op, const py::object& heads, std::size_t kv_heads,
                      std::size_t head_dim, std::optional<double> scale, bool causal,
                      std::size_t window, const std::string& bias, double softcap,
                      bool causal_default = false);

void bind_attention_spec(py::module_& m);

}  // namespace tapegrad::python
