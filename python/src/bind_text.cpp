// text/: tapegrad.Tokenizer, the byte-level BPE tokenizer (train, encode, decode, save, load).
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "py_errors.hpp"
#include "text/bpe_tokenizer.hpp"

namespace tapegrad::python {
namespace {

// A str as its UTF-8 bytes, or bytes as they are: the tokenizer works on bytes.
std::string text_bytes(const py::object& text, const char* where) {
  if (py::isinstance<py::bytes>(text)) return std::string(text.cast<py::bytes>());
  if (py::isinstance<py::str>(text)) return text.cast<std::string>();
  throw py::type_error(std::string(where) + ": text must be str or bytes, not " +
                       std::string(py::str(py::type::of(text).attr("__name__"))));
}

// Token ids from a list, tuple or 1-D array of Python or NumPy integers, checked here so
// that a wrong argument is a TypeError naming it rather than pybind11's list of signatures.
std::vector<std::int32_t> token_ids(const text::BpeTokenizer& t, const py::object& ids,
                                    const char* where) {
  if (py::isinstance<py::str>(ids) || py::isinstance<py::bytes>(ids) || !PySequence_Check(ids.ptr()))
    wrong_type(where, "ids", "a sequence of integer token ids", ids);
  std::vector<std::int32_t> out;
  for (py::handle id : ids) {
    if (PyBool_Check(id.ptr()) || !PyIndex_Check(id.ptr()))
      wrong_type(where, "each of ids", "an integer token id", id);
    const auto index = py::reinterpret_steal<py::int_>(PyNumber_Index(id.ptr()));
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow != 0 || value < 0 || value >= t.vocab_size())
      throw py::index_error(std::string(where) + ": token id " + py::repr(index).cast<std::string>() +
                            " is outside [0, " + std::to_string(t.vocab_size()) + ")");
    out.push_back(std::int32_t(value));
  }
  return out;
}

std::vector<std::string> special_token_list(const py::object& specials) {
  std::vector<std::string> tokens;
  if (specials.is_none()) return tokens;
  for (py::handle token : specials) tokens.push_back(token.cast<std::string>());  // dict: its keys
  return tokens;
}

}  // namespace

void bind_text(py::module_& m) {
  using text::BpeTokenizer;
  py::class_<BpeTokenizer>(m, "Tokenizer",
                           "byte-level BPE (minbpe's training; ties go to the pair seen first)")
      .def_static("train", [](const py::object& text, int vocab_size, const std::string& mode,
                              const py::object& special_tokens) {
        std::string bytes = text_bytes(text, "Tokenizer.train");
        std::vector<std::string> specials = special_token_list(special_tokens);
        text::BpeMode parsed = text::parse_bpe_mode(mode);
        py::gil_scoped_release release;
        return BpeTokenizer::train(bytes, vocab_size, parsed, specials);
      }, py::arg("text"), py::arg("vocab_size"), py::arg("mode") = "regex",
         py::arg("special_tokens") = py::none(),
         "special tokens (a list, or a dict whose keys are used) take the ids after the merges")
      .def_static("load", &BpeTokenizer::load, py::arg("path"))
      .def("save", &BpeTokenizer::save, py::arg("path"))
      .def_property_readonly("merges", [](const BpeTokenizer& t) {
        std::vector<std::pair<std::pair<int, int>, int>> merges;
        for (const text::BpeMerge& merge : t.merges())
          merges.push_back({{merge.first, merge.second}, merge.id});
        return merges;
      }, "a list of ((first, second), new_id) in merge order")
      .def_property_readonly("special_tokens", [](const BpeTokenizer& t) {
        py::dict ids;
        auto first_id = int(t.vocab_size() - t.special_tokens().size());
        for (std::size_t s = 0; s < t.special_tokens().size(); ++s)
          ids[py::str(t.special_tokens()[s])] = first_id + int(s);
        return ids;
      })
      .def_property_readonly("vocab_size", &BpeTokenizer::vocab_size)
      .def_property_readonly("mode", [](const BpeTokenizer& t) { return text::bpe_mode_name(t.mode()); })
      .def_property_readonly("pattern", &BpeTokenizer::pattern)
      .def("encode", [](const BpeTokenizer& t, const py::object& text, bool allow_special) {
        std::string bytes = text_bytes(text, "Tokenizer.encode");
        py::gil_scoped_release release;
        return t.encode(bytes, allow_special ? text::SpecialTokens::allowed : text::SpecialTokens::as_text);
      }, py::arg("text"), py::arg("allow_special") = true)
      .def("decode", [](const BpeTokenizer& t, const py::object& ids) {
        return t.decode(token_ids(t, ids, "Tokenizer.decode"));
      }, py::arg("ids"), "text, invalid UTF-8 shown as U+FFFD")
      .def("decode_bytes", [](const BpeTokenizer& t, const py::object& ids) {
        return py::bytes(t.decode_bytes(token_ids(t, ids, "Tokenizer.decode_bytes")));
      }, py::arg("ids"));
}

}  // namespace tapegrad::python
