#include "attention_spec_args.hpp"

#include <fmt/format.h>

#include "autograd/errors.hpp"
#include "py_errors.hpp"

namespace tapegrad::python {

namespace {
// Whether two specs differ in an option after heads.
bool options_differ(const AttentionSpec& a, const AttentionSpec& b) {
  bool differ = false;
#define TAPEGRAD_SPEC_DIFFERS(ctx, type, name, default_value, doc) differ = differ || a.name != b.name;
  TAPEGRAD_ATTENTION_OPTIONS(TAPEGRAD_SPEC_DIFFERS, )
#undef TAPEGRAD_SPEC_DIFFERS
  return differ;
}

[[noreturn]] void spec_and_keywords(const char* op) {
  throw py::type_error(
      fmt::format("{}: pass an AttentionSpec or its fields as keywords, not both", op));
}
}  // namespace

AttentionSpec spec_of(const char* op, TAPEGRAD_SPEC_PARAMS, bool causal_default) {
  const AttentionSpec defaults = keyword_defaults(causal_default);
  if (py::isinstance<AttentionSpec>(heads)) {
    // compared as given, before any is converted: a spec with keywords is refused as such
    bool given = false;
#define TAPEGRAD_SPEC_GIVEN(ctx, type, name, default_value, doc) \
    given = given || name != Keyword<type>::from_spec(defaults.name);
    TAPEGRAD_ATTENTION_OPTIONS(TAPEGRAD_SPEC_GIVEN, )
#undef TAPEGRAD_SPEC_GIVEN
    if (given) spec_and_keywords(op);
    return heads.cast<AttentionSpec>();
  }
  AttentionSpec keywords;
#define TAPEGRAD_SPEC_SET(ctx, type, name, default_value, doc) \
  keywords.name = Keyword<type>::to_spec(op, name);
  TAPEGRAD_ATTENTION_OPTIONS(TAPEGRAD_SPEC_SET, )
#undef TAPEGRAD_SPEC_SET
  return spec_with(op, heads, keywords, causal_default);
}

AttentionSpec spec_with(const char* op, const py::object& heads, const AttentionSpec& keywords,
                        bool causal_default) {
  if (py::isinstance<AttentionSpec>(heads)) {
    if (options_differ(keywords, keyword_defaults(causal_default))) spec_and_keywords(op);
    return heads.cast<AttentionSpec>();
  }
  if (!py::isinstance<py::int_>(heads) || py::isinstance<py::bool_>(heads))
    wrong_type(op, "heads", "an integer or an AttentionSpec", heads);
  const long h = heads.cast<long>();
  if (h < 1) fail(op, "heads must be at least 1, got {}", h);
  AttentionSpec spec = keywords;
  spec.heads = static_cast<std::size_t>(h);
  return spec;
}

void bind_attention_spec(py::module_& m) {
  py::class_<AttentionSpec> cls(m, "AttentionSpec",
                                "which attention: heads, grouped K/V heads, scale and the "
                                "modifiers (causal mask, sliding window, positional bias, logit "
                                "soft-cap)");
  cls.def(py::init([](std::size_t heads TAPEGRAD_ATTENTION_OPTIONS(TAPEGRAD_SPEC_PARAM, )) {
            return spec_of("AttentionSpec", py::int_(heads)
                               TAPEGRAD_ATTENTION_OPTIONS(TAPEGRAD_SPEC_VALUE, ));
          }),
          py::arg("heads") = AttentionSpec{}.heads
              TAPEGRAD_ATTENTION_OPTIONS(TAPEGRAD_SPEC_KEYWORD, AttentionSpec{}));
#define TAPEGRAD_SPEC_PROPERTY(ctx, type, name, default_value, doc)                            \
  cls.def_property(                                                                           \
      #name, [](const AttentionSpec& s) { return keyword_t<type>(Keyword<type>::from_spec(s.name)); }, \
      [](AttentionSpec& s, const keyword_t<type>& v) {                                        \
        s.name = Keyword<type>::to_spec("AttentionSpec", v);                                  \
      },                                                                                      \
      doc);
  TAPEGRAD_ATTENTION_SPEC_FIELDS(TAPEGRAD_SPEC_PROPERTY, )
#undef TAPEGRAD_SPEC_PROPERTY
  cls.def("__repr__", [](const AttentionSpec& s) { return to_string(s); });
}

}  // namespace tapegrad::python
