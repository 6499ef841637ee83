// text/: tapegrad.Tokenizer, the byte-level BPE tokenizer (train, encode, decode, save, load,
// and Hugging Face's tokenizer.json through from_pretrained / save_pretrained).
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "bindings.hpp"
#include "py_errors.hpp"
#include "text/bpe_tokenizer.hpp"
#include "text/tokenizer_json.hpp"

namespace tapegrad::python {
namespace {

// A lone surrogate has no UTF-8 form: a ValueError naming the first one's index in `name`.
[[noreturn]] void refuse_surrogate(const py::str& text, const char* where, const std::string& name) {
  PyErr_Clear();
  const Py_ssize_t length = PyUnicode_GetLength(text.ptr());
  for (Py_ssize_t i = 0; i < length; ++i) {
    const Py_UCS4 c = PyUnicode_ReadChar(text.ptr(), i);
    if (c >= 0xD800 && c <= 0xDFFF) {
      char code[8];
      std::snprintf(code, sizeof code, "%04X", unsigned(c));
      throw py::value_error(std::string(where) + ": " + name + "[" + std::to_string(i) + "] is U+" + code +
                            ", a lone surrogate, which has no UTF-8 form: remove it, or pass "
                            "bytes (e.g. text.encode('utf-8', 'replace'))");
    }
  }
  throw py::value_error(std::string(where) + ": " + name + " has no UTF-8 form");
}

// A str as its UTF-8 bytes, or bytes as they are: the tokenizer works on bytes. `name` is
// the argument's, for the messages.
std::string text_bytes(const py::object& text, const char* where, const std::string& name = "text") {
  if (py::isinstance<py::bytes>(text)) return std::string(text.cast<py::bytes>());
  if (py::isinstance<py::str>(text)) {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
    if (utf8 == nullptr) refuse_surrogate(text.cast<py::str>(), where, name);
    return std::string(utf8, std::size_t(size));
  }
  throw py::type_error(std::string(where) + ": " + name + " must be str or bytes, not " +
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

std::vector<std::string> special_token_list(const py::object& specials, const char* where) {
  std::vector<std::string> tokens;
  if (specials.is_none()) return tokens;
  for (py::handle token : specials) {  // a dict: its keys
    if (!py::isinstance<py::str>(token) && !py::isinstance<py::bytes>(token))
      wrong_type(where, "each special token", "a str or bytes", token);
    const std::string name = "special_tokens[" + std::to_string(tokens.size()) + "]";
    tokens.push_back(text_bytes(py::reinterpret_borrow<py::object>(token), where, name));
  }
  return tokens;
}

// A folder's tokenizer.json, or the file itself.
text::BpeTokenizer from_pretrained(const std::string& path) {
  const std::filesystem::path given(path);
  return text::read_tokenizer_json(std::filesystem::is_directory(given) ? (given / "tokenizer.json").string() : path);
}

std::string decode_text(const text::BpeTokenizer& t, std::vector<std::int32_t> ids,
                        bool skip_special_tokens) {
  if (skip_special_tokens) {
    std::vector<bool> special(std::size_t(t.vocab_size()), false);
    for (const text::AddedToken& token : t.vocabulary().added) special[token.id] = token.special;
    ids.erase(std::remove_if(ids.begin(), ids.end(), [&](std::int32_t id) { return special[id]; }),
              ids.end());
  }
  return t.decode(ids);
}

}  // namespace

void bind_text(py::module_& m) {
  using text::BpeTokenizer;
  py::class_<BpeTokenizer>(m, "Tokenizer",
                           "byte-level BPE (minbpe's training; ties go to the pair seen first)")
      .def_static("train", [](const py::object& text, int vocab_size, const std::string& mode,
                              const py::object& special_tokens) {
        std::string bytes = text_bytes(text, "Tokenizer.train");
        std::vector<std::string> specials = special_token_list(special_tokens, "Tokenizer.train");
        text::BpeMode parsed = text::parse_bpe_mode(mode);
        py::gil_scoped_release release;
        return BpeTokenizer::train(bytes, vocab_size, parsed, specials);
      }, py::arg("text"), py::arg("vocab_size"), py::arg("mode") = "regex",
         py::arg("special_tokens") = py::none(),
         "special tokens (a list, or a dict whose keys are used) take the ids after the merges")
      .def_static("load", &BpeTokenizer::load, py::arg("path"))
      .def("save", &BpeTokenizer::save, py::arg("path"), "the tapegrad-bpe text form (minbpe ids only)")
      .def_static("from_pretrained", &from_pretrained, py::arg("path"),
                  "a Hugging Face byte-level BPE: a folder's tokenizer.json, or that file")
      .def("save_pretrained", [](const BpeTokenizer& t, const std::string& dir,
                                 std::optional<std::size_t> model_max_length) {
        text::write_tokenizer_folder(t, dir, model_max_length);
      }, py::arg("dir"), py::kw_only(), py::arg("model_max_length") = py::none(),
         "writes dir/tokenizer.json and dir/tokenizer_config.json (dir created if missing), "
         "which transformers' AutoTokenizer reads back as this tokenizer; model_max_length: "
         "the model's context, if known")
      .def_property_readonly("merges", [](const BpeTokenizer& t) {
        std::vector<std::pair<std::pair<int, int>, int>> merges;
        for (const text::BpeMerge& merge : t.merges())
          merges.push_back({{merge.first, merge.second}, merge.id});
        return merges;
      }, "a list of ((first, second), new_id) in merge order")
      .def_property_readonly("special_tokens", [](const BpeTokenizer& t) {
        py::dict ids;
        for (const text::AddedToken& token : t.vocabulary().added) ids[py::str(token.content)] = token.id;
        return ids;
      }, "every added token's content -> id")
      .def_property_readonly("vocab_size", &BpeTokenizer::vocab_size)
      .def_property_readonly("mode", [](const BpeTokenizer& t) { return text::bpe_mode_name(t.mode()); })
      .def_property_readonly("pattern", &BpeTokenizer::pattern)
      .def("encode", [](const BpeTokenizer& t, const py::object& text, bool allow_special,
                        bool add_special_tokens) {
        std::string bytes = text_bytes(text, "Tokenizer.encode");
        py::gil_scoped_release release;
        return t.encode(bytes, allow_special ? text::SpecialTokens::allowed : text::SpecialTokens::as_text,
                        add_special_tokens);
      }, py::arg("text"), py::arg("allow_special") = true, py::arg("add_special_tokens") = true,
         "add_special_tokens: the ids a tokenizer.json's post-processor adds (Llama 3's BOS)")
      .def("decode", [](const BpeTokenizer& t, const py::object& ids, bool skip_special_tokens) {
        return decode_text(t, token_ids(t, ids, "Tokenizer.decode"), skip_special_tokens);
      }, py::arg("ids"), py::arg("skip_special_tokens") = false,
         "text, invalid UTF-8 shown as U+FFFD; special tokens as their text unless skipped")
      .def("decode_bytes", [](const BpeTokenizer& t, const py::object& ids) {
        return py::bytes(t.decode_bytes(token_ids(t, ids, "Tokenizer.decode_bytes")));
      }, py::arg("ids"));
}

}  // namespace tapegrad::python
