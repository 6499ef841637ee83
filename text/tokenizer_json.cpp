#include "text/tokenizer_json.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>

#include "platform/file_io.hpp"
#include "text/utf8.hpp"

namespace tapegrad::text {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// GPT-2's bytes_to_unicode: the printable Latin-1 bytes stand for themselves, the other 68
// bytes for U+0100 onwards in byte order, so that every byte is a visible character.
struct ByteLevelAlphabet {
  std::array<std::uint32_t, 256> code_point_of_byte{};
  std::map<std::uint32_t, unsigned char> byte_of_code_point;

  ByteLevelAlphabet() {
    std::uint32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      code_point_of_byte[b] = printable ? std::uint32_t(b) : next_extra++;
      byte_of_code_point[code_point_of_byte[b]] = static_cast<unsigned char>(b);
    }
  }
};

const ByteLevelAlphabet& alphabet() {
  static const ByteLevelAlphabet table;
  return table;
}

// A token's bytes as the file spells them.
std::string byte_level_string(std::string_view bytes) {
  std::string out;
  for (char c : bytes) append_utf8(out, alphabet().code_point_of_byte[static_cast<unsigned char>(c)]);
  return out;
}

// The bytes a vocabulary string stands for, or nothing when a character is not one of the
// alphabet's.
std::optional<std::string> token_bytes_of(std::string_view spelled) {
  std::string bytes;
  for (std::size_t i = 0; i < spelled.size();) {
    const Utf8Char c = decode_utf8_char(spelled.substr(i));
    const auto found = alphabet().byte_of_code_point.find(c.code_point);
    if (!c.valid || found == alphabet().byte_of_code_point.end()) return std::nullopt;
    bytes += char(found->second);
    i += c.length;
  }
  return bytes;
}

// The one place the reader's messages are formatted: the file, the field, the problem.
class JsonReader {
 public:
  explicit JsonReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw std::invalid_argument("tokenizer.json " + source_ + ": " + field + ": " + what);
  }
  [[noreturn]] void unsupported(const std::string& field, const std::string& value) const {
    fail(field, value + " is not supported (it changes the encoding)");
  }
  // `object[key]` when present and not null.
  const Json* find(const Json& object, const char* key) const {
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }
  const Json& object(const Json& value, const std::string& field) const {
    if (!value.is_object()) fail(field, "expected an object, found " + value.dump());
    return value;
  }
  std::string string(const Json& object, const char* key, const std::string& field) const {
    const Json* value = find(object, key);
    if (value == nullptr || !value->is_string()) fail(field + "." + key, "expected a string");
    return value->get<std::string>();
  }
  bool flag(const Json& object, const char* key, bool otherwise, const std::string& field) const {
    const Json* value = find(object, key);
    if (value == nullptr) return otherwise;
    if (!value->is_boolean()) fail(field + "." + key, "expected true or false, found " + value->dump());
    return value->get<bool>();
  }
  std::int32_t id(const Json& value, const std::string& field) const {
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
        value.get<std::int64_t>() > std::int64_t(1) << 30)
      fail(field, "expected a token id (an integer from 0), found " + value.dump());
    return std::int32_t(value.get<std::int64_t>());
  }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

// The model's vocabulary: every id's bytes, and which ids the model's own table holds.
struct ReadVocabulary {
  std::vector<std::optional<std::string>> bytes;  // by id
  std::unordered_map<std::string, std::int32_t> id_of_spelling;
  std::size_t entries = 0;  // vocab and added_tokens: ids without a hole stay below

  void put(const JsonReader& r, const std::string& field, std::int32_t id, std::string token_bytes) {
    if (std::size_t(id) >= entries)
      r.fail(field, "id " + std::to_string(id) + " is past the " + std::to_string(entries) +
                        " tokens of model.vocab and added_tokens (ids must run from 0 with no hole)");
    if (std::size_t(id) >= bytes.size()) bytes.resize(std::size_t(id) + 1);
    bytes[id] = std::move(token_bytes);
  }
};

void read_model(const JsonReader& r, const Json& model, BpeVocabulary& v, ReadVocabulary& read) {
  r.object(model, "model");
  if (const Json* type = r.find(model, "type"); type != nullptr && *type != "BPE")
    r.unsupported("model.type", type->dump() + " (only BPE)");
  if (r.find(model, "dropout") != nullptr) r.unsupported("model.dropout", model["dropout"].dump());
  if (r.flag(model, "byte_fallback", false, "model")) r.unsupported("model.byte_fallback", "true");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const Json* affix = r.find(model, key); affix != nullptr && *affix != "")
      r.unsupported(std::string("model.") + key, affix->dump());
  v.ignore_merges = r.flag(model, "ignore_merges", false, "model");
  const Json* vocab = r.find(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) r.fail("model.vocab", "expected an object of token -> id");
  std::unordered_map<std::int32_t, std::string> spelling_of_id;
  for (const auto& [spelled, value] : vocab->items()) {
    const std::int32_t id = r.id(value, "model.vocab[\"" + spelled + "\"]");
    if (const auto [other, added] = spelling_of_id.emplace(id, spelled); !added)
      r.fail("model.vocab", "id " + std::to_string(id) + " is given to both \"" + other->second +
                                "\" and \"" + spelled + "\"");
    std::optional<std::string> bytes = token_bytes_of(spelled);
    if (!bytes)
      r.fail("model.vocab[\"" + spelled + "\"]",
             "not a byte-level token (a character outside GPT-2's byte alphabet)");
    read.put(r, "model.vocab[\"" + spelled + "\"]", id, std::move(*bytes));
    read.id_of_spelling.emplace(spelled, id);
  }
  for (int b = 0; b < 256; ++b) {
    const std::string spelled = byte_level_string(std::string(1, char(b)));
    const auto found = read.id_of_spelling.find(spelled);
    if (found == read.id_of_spelling.end())
      r.fail("model.vocab", "byte " + std::to_string(b) + " (\"" + spelled + "\") has no token");
    v.byte_ids[b] = found->second;
  }
}

// Merges are "a b" strings (older files) or ["a", "b"] pairs (tokenizers 0.20 on).
void read_merges(const JsonReader& r, const Json& model, BpeVocabulary& v, const ReadVocabulary& read) {
  const Json* merges = r.find(model, "merges");
  if (merges == nullptr || !merges->is_array()) r.fail("model.merges", "expected an array");
  auto id_of = [&](const std::string& spelled, const std::string& field) {
    const auto found = read.id_of_spelling.find(spelled);
    if (found == read.id_of_spelling.end()) r.fail(field, "\"" + spelled + "\" is not in model.vocab");
    return found->second;
  };
  for (std::size_t i = 0; i < merges->size(); ++i) {
    const Json& merge = (*merges)[i];
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    std::string first, second;
    if (merge.is_string()) {
      const std::string line = merge.get<std::string>();
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        r.fail(field, "expected \"first second\", found \"" + line + "\"");
      first = line.substr(0, space);
      second = line.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      first = merge[0].get<std::string>();
      second = merge[1].get<std::string>();
    } else {
      r.fail(field, "expected \"first second\" or [\"first\", \"second\"], found " + merge.dump());
    }
    v.merges.push_back({id_of(first, field), id_of(second, field), id_of(first + second, field)});
  }
}

void read_added_tokens(const JsonReader& r, const Json& file, BpeVocabulary& v, ReadVocabulary& read) {
  const Json* added = r.find(file, "added_tokens");
  if (added == nullptr) return;
  if (!added->is_array()) r.fail("added_tokens", "expected an array");
  for (std::size_t i = 0; i < added->size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    const Json& token = r.object((*added)[i], field);
    AddedToken out;
    out.content = r.string(token, "content", field);
    if (out.content.empty()) r.fail(field + ".content", "empty");
    out.id = r.id(token.contains("id") ? token["id"] : Json(), field + ".id");
    out.special = r.flag(token, "special", false, field);
    out.normalized = r.flag(token, "normalized", !out.special, field);
    for (const char* key : {"lstrip", "rstrip", "single_word"})
      if (r.flag(token, key, false, field))
        r.unsupported(field + "." + key, "true (token \"" + out.content + "\")");
    if (std::size_t(out.id) < read.bytes.size() && read.bytes[out.id]) {
      out.in_vocabulary = true;
      if (*read.bytes[out.id] != out.content)
        r.fail(field, "id " + std::to_string(out.id) + " of \"" + out.content +
                          "\" is already a different token's in model.vocab");
    }
    read.put(r, field + ".id", out.id, out.content);
    v.added.push_back(std::move(out));
  }
}

void read_normalizer(const JsonReader& r, const Json& file) {
  if (const Json* normalizer = r.find(file, "normalizer"))
    r.fail("normalizer", "normalizer " +
                             (normalizer->is_object() && normalizer->contains("type")
                                  ? (*normalizer)["type"].get<std::string>()
                                  : normalizer->dump()) +
                             " is not supported");
}

// ByteLevel alone (its own GPT-2 split, or none), or Split(Regex, Isolated) then
// ByteLevel without its split.
void read_pre_tokenizer(const JsonReader& r, const Json& file, BpeVocabulary& v) {
  const Json* pre = r.find(file, "pre_tokenizer");
  if (pre == nullptr) r.unsupported("pre_tokenizer", "null (a byte-level BPE needs ByteLevel)");
  r.object(*pre, "pre_tokenizer");
  const std::string type = r.string(*pre, "type", "pre_tokenizer");
  auto byte_level = [&](const Json& level, const std::string& field) {
    if (r.string(level, "type", field) != "ByteLevel") r.unsupported(field + ".type", level["type"].dump());
    return r.flag(level, "use_regex", true, field);
  };
  if (type == "ByteLevel") {
    v.mode = byte_level(*pre, "pre_tokenizer") ? BpeMode::regex : BpeMode::basic;
    v.pattern = v.mode == BpeMode::regex ? std::string(gpt2_split_pattern) : "";
    v.add_prefix_space = r.flag(*pre, "add_prefix_space", false, "pre_tokenizer");
    return;
  }
  if (type != "Sequence") r.unsupported("pre_tokenizer.type", "\"" + type + "\"");
  const Json* steps = r.find(*pre, "pretokenizers");
  if (steps == nullptr || !steps->is_array() || steps->size() != 2)
    r.unsupported("pre_tokenizer.pretokenizers", "anything but [Split, ByteLevel]");
  const Json& split = r.object((*steps)[0], "pre_tokenizer.pretokenizers[0]");
  const std::string field = "pre_tokenizer.pretokenizers[0]";
  if (r.string(split, "type", field) != "Split") r.unsupported(field + ".type", split["type"].dump());
  const Json* pattern = r.find(split, "pattern");
  if (pattern == nullptr || !pattern->is_object() || !pattern->contains("Regex") ||
      !(*pattern)["Regex"].is_string())
    r.unsupported(field + ".pattern", pattern == nullptr ? "null" : pattern->dump() + " (only Regex)");
  if (r.string(split, "behavior", field) != "Isolated")
    r.unsupported(field + ".behavior", split["behavior"].dump() + " (only Isolated)");
  if (r.flag(split, "invert", false, field)) r.unsupported(field + ".invert", "true");
  const Json& level = r.object((*steps)[1], "pre_tokenizer.pretokenizers[1]");
  if (byte_level(level, "pre_tokenizer.pretokenizers[1]"))
    r.unsupported("pre_tokenizer.pretokenizers[1].use_regex", "true after a Split");
  if (r.flag(level, "add_prefix_space", false, "pre_tokenizer.pretokenizers[1]"))
    r.unsupported("pre_tokenizer.pretokenizers[1].add_prefix_space", "true after a Split");
  v.mode = BpeMode::regex;
  v.pattern = (*pattern)["Regex"].get<std::string>();
  try {
    RegexSplitter check(v.pattern);
  } catch (const std::invalid_argument& error) {
    r.fail(field + ".pattern", error.what());
  }
}

// TemplateProcessing's single-sequence template: the special tokens before and after $A.
void read_template(const JsonReader& r, const Json& processor, const std::string& field,
                   BpeVocabulary& v) {
  const Json* single = r.find(processor, "single");
  const Json* specials = r.find(processor, "special_tokens");
  if (single == nullptr || !single->is_array()) r.fail(field + ".single", "expected an array");
  bool seen_sequence = false;
  for (std::size_t i = 0; i < single->size(); ++i) {
    const std::string item_field = field + ".single[" + std::to_string(i) + "]";
    const Json& item = r.object((*single)[i], item_field);
    if (item.contains("Sequence")) {
      if (seen_sequence) r.fail(item_field, "a second sequence in the single template");
      seen_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken")) r.fail(item_field, "expected Sequence or SpecialToken");
    const std::string name = r.string(r.object(item["SpecialToken"], item_field), "id", item_field);
    const Json* entry = specials == nullptr ? nullptr : r.find(*specials, name.c_str());
    if (entry == nullptr || !entry->is_object() || !entry->contains("ids") || !(*entry)["ids"].is_array())
      r.fail(field + ".special_tokens", "\"" + name + "\" has no ids");
    for (const Json& id : (*entry)["ids"])
      (seen_sequence ? v.suffix_ids : v.prefix_ids).push_back(r.id(id, field + ".special_tokens"));
  }
  if (!seen_sequence) r.fail(field + ".single", "no $A sequence");
}

void read_post_processor(const JsonReader& r, const Json& processor, const std::string& field,
                         BpeVocabulary& v) {
  const std::string type = r.string(r.object(processor, field), "type", field);
  if (type == "ByteLevel") return;  // offsets only
  if (type == "TemplateProcessing") return read_template(r, processor, field, v);
  if (type != "Sequence") r.unsupported(field + ".type", "\"" + type + "\"");
  const Json* steps = r.find(processor, "processors");
  if (steps == nullptr || !steps->is_array()) r.fail(field + ".processors", "expected an array");
  for (std::size_t i = 0; i < steps->size(); ++i)
    read_post_processor(r, (*steps)[i], field + ".processors[" + std::to_string(i) + "]", v);
}

void read_decoder(const JsonReader& r, const Json& file) {
  if (const Json* decoder = r.find(file, "decoder"))
    if (r.string(r.object(*decoder, "decoder"), "type", "decoder") != "ByteLevel")
      r.unsupported("decoder.type", (*decoder)["type"].dump() + " (decode gives the bytes)");
}

}  // namespace

BpeTokenizer tokenizer_from_json(std::string_view json_text, const std::string& source) {
  const JsonReader r(source);
  Json file;
  try {
    file = Json::parse(json_text);
  } catch (const Json::exception& error) {
    r.fail("the file", std::string("not JSON: ") + error.what());
  }
  r.object(file, "the file");
  for (const char* key : {"truncation", "padding"})
    if (const Json* value = r.find(file, key)) r.unsupported(key, value->dump());
  read_normalizer(r, file);
  const Json* model = r.find(file, "model");
  if (model == nullptr) r.fail("model", "missing");
  BpeVocabulary v;
  ReadVocabulary read;
  const Json* added = r.find(file, "added_tokens");
  const Json* vocab = model->is_object() ? r.find(*model, "vocab") : nullptr;
  read.entries = (vocab != nullptr ? vocab->size() : 0) + (added != nullptr ? added->size() : 0);
  read_model(r, *model, v, read);
  read_merges(r, *model, v, read);
  read_added_tokens(r, file, v, read);
  read_pre_tokenizer(r, file, v);
  if (const Json* processor = r.find(file, "post_processor"))
    read_post_processor(r, *processor, "post_processor", v);
  read_decoder(r, file);
  for (std::size_t id = 0; id < read.bytes.size(); ++id) {
    if (!read.bytes[id])
      r.fail("model.vocab", "no token has id " + std::to_string(id) + " (ids must run from 0 to " +
                                std::to_string(read.bytes.size() - 1) + ")");
    v.tokens.push_back(std::move(*read.bytes[id]));
  }
  try {
    return BpeTokenizer(std::move(v));
  } catch (const std::invalid_argument& error) {
    r.fail("the tokenizer", error.what());
  }
}

BpeTokenizer read_tokenizer_json(const std::string& path) {
  return tokenizer_from_json(read_text_file(path, "tokenizer file " + path), path);
}

BpeTokenizer read_tokenizer_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    const std::filesystem::path file = std::filesystem::path(path) / "tokenizer.json";
    if (!std::filesystem::exists(file, ec))
      throw std::invalid_argument("tokenizer folder " + path + " holds no tokenizer.json: give "
                                  "a folder with one, a tokenizer.json or a tokenizer program's file");
    return read_tokenizer_json(file.string());
  }
  const std::string text = read_text_file(path, "tokenizer file " + path);
  if (!text.empty() && text[0] == '{') return tokenizer_from_json(text, path);
  return BpeTokenizer::from_text(text, path);
}

namespace {

OrderedJson byte_level_json(bool add_prefix_space, bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space},
          {"trim_offsets", true}, {"use_regex", use_regex}};
}

OrderedJson pre_tokenizer_json(const BpeVocabulary& v) {
  if (v.mode == BpeMode::basic || v.pattern == gpt2_split_pattern)
    return byte_level_json(v.add_prefix_space, v.mode == BpeMode::regex);
  if (v.add_prefix_space)
    throw std::invalid_argument("tokenizer_json: add_prefix_space with a split pattern other than "
                                "GPT-2's has no tokenizer.json form");
  OrderedJson split = {{"type", "Split"}, {"pattern", {{"Regex", v.pattern}}},
                       {"behavior", "Isolated"}, {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", {split, byte_level_json(false, false)}}};
}

// The name a template gives a token: an added token's content, else its spelling.
std::string template_name(const BpeTokenizer& t, std::int32_t id) {
  for (const AddedToken& token : t.vocabulary().added)
    if (token.id == id) return token.content;
  return byte_level_string(t.token_bytes(id));
}

OrderedJson post_processor_json(const BpeTokenizer& t) {
  const BpeVocabulary& v = t.vocabulary();
  if (v.prefix_ids.empty() && v.suffix_ids.empty()) return byte_level_json(true, true);
  OrderedJson single = OrderedJson::array(), pair = OrderedJson::array(), specials = OrderedJson::object();
  auto special = [&](std::int32_t id, int type_id) {
    const std::string name = template_name(t, id);
    specials[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
    return OrderedJson{{"SpecialToken", {{"id", name}, {"type_id", type_id}}}};
  };
  for (int sequence = 0; sequence < 2; ++sequence) {
    OrderedJson& items = sequence == 0 ? single : pair;
    for (int part = 0; part <= sequence; ++part) {
      for (std::int32_t id : v.prefix_ids) items.push_back(special(id, part));
      items.push_back({{"Sequence", {{"id", part == 0 ? "A" : "B"}, {"type_id", part}}}});
      for (std::int32_t id : v.suffix_ids) items.push_back(special(id, part));
    }
  }
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair},
          {"special_tokens", specials}};
}

// The model's vocabulary: every id but the added tokens that are not in it, keyed by
// spelling, so two ids with the same bytes cannot both be written.
OrderedJson vocab_json(const BpeTokenizer& t) {
  const BpeVocabulary& v = t.vocabulary();
  std::vector<bool> outside(v.tokens.size(), false);
  for (const AddedToken& token : v.added) outside[token.id] = !token.in_vocabulary;
  OrderedJson vocab = OrderedJson::object();
  std::unordered_map<std::string, std::int32_t> id_of_bytes;
  for (std::int32_t id = 0; id < t.vocab_size(); ++id) {
    if (outside[id]) continue;
    if (const auto [other, added] = id_of_bytes.emplace(v.tokens[id], id); !added)
      throw std::invalid_argument("tokenizer_json: tokens " + std::to_string(other->second) +
                                  " and " + std::to_string(id) + " have the same bytes ('" +
                                  replace_invalid_utf8(v.tokens[id]) +
                                  "'); a tokenizer.json vocabulary holds each token once");
    vocab[byte_level_string(v.tokens[id])] = id;
  }
  return vocab;
}

}  // namespace

std::string tokenizer_json(const BpeTokenizer& t) {
  const BpeVocabulary& v = t.vocabulary();
  OrderedJson added = OrderedJson::array();
  for (const AddedToken& token : v.added)
    added.push_back({{"id", token.id}, {"content", token.content}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false}, {"normalized", token.normalized},
                     {"special", token.special}});
  OrderedJson merges = OrderedJson::array();
  for (const BpeMerge& merge : v.merges)
    merges.push_back({byte_level_string(t.token_bytes(merge.first)),
                      byte_level_string(t.token_bytes(merge.second))});
  OrderedJson model = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                       {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                       {"fuse_unk", false}, {"byte_fallback", false},
                       {"ignore_merges", v.ignore_merges}, {"vocab", vocab_json(t)},
                       {"merges", merges}};
  OrderedJson file = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr},
                      {"added_tokens", added}, {"normalizer", nullptr},
                      {"pre_tokenizer", pre_tokenizer_json(v)},
                      {"post_processor", post_processor_json(t)},
                      {"decoder", byte_level_json(true, true)}, {"model", model}};
  // A special token's content that is not UTF-8 cannot be JSON text.
  try {
    return file.dump(2);
  } catch (const OrderedJson::exception& error) {
    throw std::invalid_argument(std::string("tokenizer_json: ") + error.what());
  }
}

void write_tokenizer_json(const BpeTokenizer& tokenizer, const std::string& path) {
  detail::write_file_atomically(path, tokenizer_json(tokenizer), "write_tokenizer_json: '" + path + "'");
}

}  // namespace tapegrad::text
