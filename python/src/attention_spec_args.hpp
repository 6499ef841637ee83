#pragma once
// One way to say which attention: every attention function takes either an AttentionSpec
// object in place of `heads` (tg.attention(q, k, v, tg.AttentionSpec(4, causal=True))) or
// the same fields as keyword arguments, with the same names and defaults. Everything here
// walks TAPEGRAD_ATTENTION_SPEC_FIELDS (ops/attention_spec.hpp): a field added there is a
// keyword of every attention function, an argument and a property of AttentionSpec, and
// part of its repr, with no line here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "ops/attention_spec.hpp"

namespace tapegrad::python {

namespace py = pybind11;

// A field as a Python keyword takes it: a positional bias by its name, the rest as they are.
template <class T>
struct Keyword {
  using type = T;
  static const T& from_spec(const T& v) { return v; }
  static T to_spec(const char*, const T& v) { return v; }
};
template <>
struct Keyword<PositionBias> {
  using type = std::string;
  static std::string from_spec(PositionBias b) { return to_string(b); }
  static PositionBias to_spec(const char* op, const std::string& name) {
    return position_bias_from_name(op, name);
  }
};
template <class T>
using keyword_t = typename Keyword<T>::type;

// The defaults the keywords show: AttentionSpec's, but for `causal` where a function
// defaults to causal attention (decoding).
inline AttentionSpec keyword_defaults(bool causal) {
  AttentionSpec s;
  s.causal = causal;
  return s;
}

// `, type name` / `, py::arg("name") = default` / `, name` for each option after heads.
#define TAPEGRAD_SPEC_PARAM(ctx, type, name, default_value, doc) \
  , ::tapegrad::python::keyword_t<type> name
#define TAPEGRAD_SPEC_KEYWORD(defaults, type, name, default_value, doc) \
  , py::arg(#name) = ::tapegrad::python::Keyword<type>::from_spec((defaults).name)
#define TAPEGRAD_SPEC_VALUE(ctx, type, name, default_value, doc) , name

// A bound function's parameters for the spec: heads (an integer or an AttentionSpec) and
// the options, in AttentionSpec's order ...
#define TAPEGRAD_SPEC_PARAMS \
  const py::object& heads TAPEGRAD_ATTENTION_OPTIONS(TAPEGRAD_SPEC_PARAM, )
// ... their py::arg list, with AttentionSpec's defaults (causal's given) ...
#define TAPEGRAD_SPEC_ARGS_CAUSAL(causal_default)                  \
  py::arg("heads") TAPEGRAD_ATTENTION_OPTIONS(TAPEGRAD_SPEC_KEYWORD, \
                                              ::tapegrad::python::keyword_defaults(causal_default))
#define TAPEGRAD_SPEC_ARGS TAPEGRAD_SPEC_ARGS_CAUSAL(false)
// ... and the same names as arguments, for spec_of.
#define TAPEGRAD_SPEC_VALUES heads TAPEGRAD_ATTENTION_OPTIONS(TAPEGRAD_SPEC_VALUE, )

// The spec `op` was called with: `heads` itself when it is an AttentionSpec (then the other
// fields must keep their defaults: a spec and keywords together would leave one of them
// unused), else the fields. A wrong type is a TypeError naming the argument. Called as
// spec_of(op, TAPEGRAD_SPEC_VALUES) from a function that takes TAPEGRAD_SPEC_PARAMS.
AttentionSpec spec_of(const char* op, TAPEGRAD_SPEC_PARAMS, bool causal_default = false);
// The same for a function that takes some of the options (multi_head_attention): `keywords`
// holds them, the others at AttentionSpec's defaults.
AttentionSpec spec_with(const char* op, const py::object& heads, const AttentionSpec& keywords,
                        bool causal_default = false);

void bind_attention_spec(py::module_& m);

}  // namespace tapegrad::python
