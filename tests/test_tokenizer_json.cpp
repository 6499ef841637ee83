// text/tokenizer_json: Hugging Face's tokenizer.json in and out. A small file written here by
// hand (its encodings worked out in the comments), the refusals, and minbpe round trips.
// tests/python/test_tokenizer_json.py compares with the `tokenizers` library itself.
#include <catch2/catch.hpp>

#include <cerrno>

#include "nn/io/npz_error.hpp"
#include "platform/io_error.hpp"
#include "temp_files.hpp"
#include "text/tokenizer_json.hpp"

using namespace tapegrad::text;
using Ids = std::vector<std::int32_t>;

namespace {

// GPT-2's bytes_to_unicode, as its encoder.py states it: the printable bytes ! .. ~, ¡ .. ¬
// and ® .. ÿ are their own character, the rest U+0100, U+0101, ... in byte order.
std::string spelled_byte(int b) {
  auto printable = [](int c) { return (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174; };
  int cp = b;
  if (!printable(b)) {
    cp = 256;
    for (int c = 0; c < b; ++c) cp += printable(c) ? 0 : 1;
  }
  std::string out;
  if (cp < 0x80) return std::string(1, char(cp));
  out += char(0xC0 | (cp >> 6));
  out += char(0x80 | (cp & 0x3F));
  return out;
}

// The 256 byte tokens at ids first_id + b, as JSON object members, skipping `missing`.
std::string byte_vocab(int first_id, int missing = -1) {
  std::string out;
  for (int b = 0; b < 256; ++b) {
    if (b == missing) continue;
    std::string spelled = spelled_byte(b);
    if (spelled == "\"" || spelled == "\\") spelled = "\\" + spelled;
    out += ", \"" + spelled + "\": " + std::to_string(first_id + b);
  }
  return out;
}

constexpr int kFirstByteId = 6;  // byte b is id 6 + b: a = 103, b = 104, c = 105, space = 38

// Tokens 0..5 before the bytes: ab, abc, Ġab, bc, the special <s> (added), ca (in the
// vocabulary but made by no merge). Merges by rank: a+b, b+c, ab+c, Ġ+ab.
std::string hand_file(const std::string& pre_tokenizer = R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})",
                      const std::string& model_extra = R"("ignore_merges": false)",
                      const std::string& post_processor = "null",
                      const std::string& top_extra = "") {
  return R"({"version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [{"id": 4, "content": "<s>", "single_word": false, "lstrip": false,
                      "rstrip": false, "normalized": false, "special": true}],
    "normalizer": null, "pre_tokenizer": )" + pre_tokenizer + R"(,
    "post_processor": )" + post_processor + R"(,
    "decoder": {"type": "ByteLevel"}, )" + top_extra + R"(
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false, )" +
         model_extra + R"(,
      "vocab": {"ab": 0, "abc": 1, "Ġab": 2, "bc": 3, "ca": 5)" + byte_vocab(kFirstByteId) + R"(},
      "merges": [["a", "b"], "b c", ["ab", "c"], ["Ġ", "ab"]]}})";
}

constexpr std::int32_t a = kFirstByteId + 'a', c = kFirstByteId + 'c', space = kFirstByteId + ' ';

std::string error_of(const std::string& json) {
  try {
    tokenizer_from_json(json, "t.json");
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("tokenizer.json: a hand-written file encodes as worked out by hand", "[tokenizer_json]") {
  const BpeTokenizer t = tokenizer_from_json(hand_file(), "hand.json");
  CHECK(t.vocab_size() == kFirstByteId + 256);
  CHECK_FALSE(t.is_minbpe());
  // a b c: a+b (rank 0) before b+c (rank 1), then ab+c.
  CHECK(t.encode("abc") == Ids{1});
  // b c a b: a+b first (rank 0), then b+c; bc+ab is no merge.
  CHECK(t.encode("bcab") == Ids{3, 0});
  // " abc" is one chunk Ġ a b c: a+b, then ab+c (rank 2) before Ġ+ab (rank 3).
  CHECK(t.encode(" abc") == Ids{space, 1});
  // " ab": Ġ a b -> Ġ ab -> Ġab.
  CHECK(t.encode(" ab") == Ids{2});
  // "ca" is in the vocabulary, but no merge makes it.
  CHECK(t.encode("ca") == Ids{c, a});
  // The special token is cut out before the split, and encoded as bytes when not allowed.
  CHECK(t.encode("abc<s>ab") == Ids{1, 4, 0});
  CHECK(t.encode("<s>", SpecialTokens::as_text) ==
        Ids{kFirstByteId + '<', kFirstByteId + 's', kFirstByteId + '>'});
  CHECK(t.decode_bytes({1, 4, space, 3}) == "abc<s> bc");
}

TEST_CASE("tokenizer.json: ignore_merges emits a chunk that is a vocabulary token whole", "[tokenizer_json]") {
  const BpeTokenizer t = tokenizer_from_json(hand_file(R"({"type": "ByteLevel", "use_regex": true})",
                                                       R"("ignore_merges": true)"),
                                             "hand.json");
  CHECK(t.encode("ca") == Ids{5});
  CHECK(t.encode("ca bca") == Ids{5, space, 3, a});  // " bca" is not a token: merged as usual
}

TEST_CASE("tokenizer.json: a Split then ByteLevel, add_prefix_space and a template", "[tokenizer_json]") {
  // Split isolates each character: no merge can cross them.
  const std::string split = R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "."}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})";
  const std::string bos = R"({"type": "Sequence", "processors": [{"type": "ByteLevel"},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [4], "tokens": ["<s>"]}}}]})";
  const BpeTokenizer t = tokenizer_from_json(hand_file(split, R"("ignore_merges": false)", bos), "t.json");
  CHECK(t.encode("ab") == Ids{4, a, a + 1});
  CHECK(t.encode("ab", SpecialTokens::allowed, false) == Ids{a, a + 1});
  // Without a split (ByteLevel alone, no regex) "ab c" is one chunk: Ġ is not merged with c.
  const BpeTokenizer basic = tokenizer_from_json(
      hand_file(R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": false})"), "t.json");
  CHECK(basic.mode() == BpeMode::basic);
  CHECK(basic.encode("ab c") == Ids{2, space, c});  // the prefix space: " ab c"
  CHECK(basic.encode(" ab") == Ids{2});             // already starts with one
  CHECK(basic.encode("ab<s>ab") == Ids{2, 4, 2});   // each piece between added tokens
}

TEST_CASE("tokenizer.json: what the reader refuses, naming the file and the field", "[tokenizer_json]") {
  auto with_model = [](const std::string& extra) { return hand_file(
      R"({"type": "ByteLevel"})", R"("ignore_merges": false, )" + extra); };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "t.json: model.type: \"WordPiece\" (only BPE) is not supported"},
      {with_model(R"("fuse_unk": true, "byte_fallback": true)"), "model.byte_fallback: true is not supported"},
      {with_model(R"("dropout": 0.1)"), "model.dropout: 0.1 is not supported"},
      {with_model(R"("continuing_subword_prefix": "##")"), "model.continuing_subword_prefix: \"##\" is not supported"},
      {hand_file("null"), "pre_tokenizer: null (a byte-level BPE needs ByteLevel) is not supported"},
      {hand_file(R"({"type": "Whitespace"})"), "pre_tokenizer.type: \"Whitespace\" is not supported"},
      {hand_file(R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "a"},
          "behavior": "Removed", "invert": false}, {"type": "ByteLevel", "use_regex": false}]})"),
       "pre_tokenizer.pretokenizers[0].behavior: \"Removed\" (only Isolated) is not supported"},
      {hand_file(R"({"type": "ByteLevel"})", R"("ignore_merges": false)", R"({"type": "BertProcessing"})"),
       "post_processor.type: \"BertProcessing\" is not supported"},
      {hand_file(R"({"type": "ByteLevel"})", R"("ignore_merges": false)", "null",
                 R"("normalizer": {"type": "NFC"},)"),  // a repeated key: the last one counts
       "t.json: normalizer: normalizer NFC is not supported"},
      {hand_file(R"({"type": "ByteLevel"})", R"("ignore_merges": false)", "null", R"("padding": {"strategy": "BatchLongest"},)"),
       "padding: {\"strategy\":\"BatchLongest\"} is not supported"},
  };
  for (const auto& [json, expected] : cases) CHECK_THAT(error_of(json), Catch::Contains(expected));
}

TEST_CASE("tokenizer.json: a broken vocabulary or merge is refused, naming it", "[tokenizer_json]") {
  auto file = [](const std::string& vocab, const std::string& merges,
                 const std::string& added = "[]") {
    return R"({"added_tokens": )" + added + R"(, "pre_tokenizer": {"type": "ByteLevel"},
      "model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": [)" + merges + "]}}";
  };
  const std::string bytes = byte_vocab(2).substr(1);  // byte b is id 2 + b
  CHECK(error_of(file("\"ab\": 0, \"bc\": 1, " + bytes, "\"a b\"")) == "no error");
  CHECK_THAT(error_of(file("\"ab\": 0, \"bc\": 1, \"zz\": 115, " + byte_vocab(2, 'q').substr(1), "\"a b\"")),
             Catch::Contains("t.json: model.vocab: byte 113 (\"q\") has no token"));
  CHECK_THAT(error_of(file("\"ab\": 0, \"xy\": 0, " + bytes, "")),
             Catch::Contains("model.vocab: id 0 is given to both \"ab\" and \"xy\""));
  CHECK_THAT(error_of(file("\"ab\": 0, \"bc\": 1, " + bytes, "\"a b\", [\"ab\", \"zz\"]")),
             Catch::Contains("model.merges[1]: \"zz\" is not in model.vocab"));
  CHECK_THAT(error_of(file("\"xy\": 0, \"bc\": 1, " + bytes, "\"a b\"")),  // the result is missing
             Catch::Contains("model.merges[0]: \"ab\" is not in model.vocab"));
  CHECK_THAT(error_of(file("\"ab\": 0, \"bc\": 1, " + bytes, "\"a b c\"")),
             Catch::Contains("model.merges[0]: expected \"first second\", found \"a b c\""));
  CHECK_THAT(error_of(file("\"ab\": 1000000000, " + bytes, "")),  // not a billion empty slots
             Catch::Contains("model.vocab[\"ab\"]: id 1000000000 is past the 257 tokens"));
  CHECK_THAT(error_of(file("\"ab\": 0, " + bytes, "")),  // id 1 is nobody's: 257 ids for 257 tokens
             Catch::Contains("id 257 is past the 257 tokens of model.vocab and added_tokens"));
  // GPT-2's <|endoftext|> is in both lists: counted twice, the hole is found at the end.
  CHECK_THAT(error_of(file("\"ab\": 0, \"<s>\": 258, " + bytes, "",
                           R"([{"id": 258, "content": "<s>", "special": true}])")),
             Catch::Contains("model.vocab: no token has id 1"));
  CHECK_THAT(error_of(file("\"ab\": 0, \"\\u4e2d\": 1, " + bytes, "")),
             Catch::Contains("model.vocab[\"中\"]: not a byte-level token"));
  CHECK_THAT(error_of(file("\"ab\": 0, \"bc\": 1, " + bytes, "",
                           R"([{"id": 1, "content": "<s>", "special": true}])")),
             Catch::Contains("added_tokens[0]: id 1 of \"<s>\" is already a different token's"));
  CHECK_THAT(error_of(file("\"ab\": 0, \"bc\": 1, " + bytes, "",
                           R"([{"id": 258, "content": "<s>", "special": true, "lstrip": true}])")),
             Catch::Contains("added_tokens[0].lstrip: true (token \"<s>\") is not supported"));
  CHECK_THAT(error_of("{\"model\": "), Catch::Contains("t.json: the file: not JSON"));
}

TEST_CASE("tokenizer.json: a minbpe tokenizer round trips with its ids and its text form", "[tokenizer_json]") {
  const std::string text = "The quick brown fox, the lazy dog's 123 4567 jumps!\n\n  Über naïve 中文 <|end|>";
  for (BpeMode mode : {BpeMode::regex, BpeMode::basic}) {
    const BpeTokenizer t = BpeTokenizer::train(text + text, 300, mode, {"<|end|>", "<pad>"});
    const BpeTokenizer back = tokenizer_from_json(tokenizer_json(t), "written");
    CHECK(back.is_minbpe());
    CHECK(back.to_text() == t.to_text());
    CHECK(back.encode(text) == t.encode(text));
  }
}

TEST_CASE("tokenizer.json: read_tokenizer_file takes a folder a tokenizer.json or a minbpe file", "[tokenizer_json]") {
  const tapegrad::test::TempDir dir;
  const std::string text = "one two three, one two three; four five one two";
  const BpeTokenizer minbpe = BpeTokenizer::train(text, 280, BpeMode::regex, {"<|end|>"});
  minbpe.save(dir.file("tok.model"));
  const BpeTokenizer hand = tokenizer_from_json(hand_file(), "hand.json");
  write_tokenizer_json(hand, dir.file("tokenizer.json"));
  CHECK(read_tokenizer_file(dir.file("tok.model")).to_text() == minbpe.to_text());
  const std::string sample = " abc bcab<s>";
  CHECK(read_tokenizer_file(dir.file("tokenizer.json")).encode(sample) == hand.encode(sample));
  CHECK(read_tokenizer_file(dir.path.string()).encode(sample) == hand.encode(sample));
  // the trap: read as a minbpe file, a tokenizer.json is refused, so the format must decide
  CHECK_THROWS(BpeTokenizer::load(dir.file("tokenizer.json")));
  CHECK_THROWS_WITH(read_tokenizer_file(dir.file("absent")), Catch::Contains("absent"));
}

TEST_CASE("tokenizer.json: two tokens with the same bytes cannot be written", "[tokenizer_json]") {
  // 256 = ab, 257 = abc, 258 = bc, 259 = a + bc = abc again.
  const BpeTokenizer t(BpeMode::basic, "", {{'a', 'b', 256}, {256, 'c', 257}, {'b', 'c', 258}, {'a', 258, 259}}, {});
  CHECK_THROWS_WITH(tokenizer_json(t), Catch::Contains("tokens 257 and 259 have the same bytes ('abc')"));
}

TEST_CASE("tokenizer.json: a tokenizer read from one has no minbpe text form", "[tokenizer_json]") {
  const BpeTokenizer t = tokenizer_from_json(hand_file(), "hand.json");
  CHECK_THROWS_WITH(t.to_text(), Catch::Contains("write it as tokenizer.json"));
  const BpeTokenizer back = tokenizer_from_json(tokenizer_json(t), "written");
  CHECK(back.encode(" abc bcab<s>") == t.encode(" abc bcab<s>"));
}

TEST_CASE("tokenizer.json: the split's whitespace class is Unicode's White_Space as in tokenizers", "[tokenizer_json]") {
  // U+180E (Mongolian vowel separator) stopped being a space in Unicode 6.3; U+0085 is one.
  const std::vector<std::string_view> words = RegexSplitter(R"(\s+|\S+)").split("a\u180E\u0085b");
  CHECK(words == std::vector<std::string_view>{"a\u180E", "\u0085", "b"});
  const std::vector<std::string_view> runs = RegexSplitter(R"([^\s]+|[\s]+)").split("a\u180E \u2028b");
  CHECK(runs == std::vector<std::string_view>{"a\u180E", " \u2028", "b"});
  // tokenizers' ByteLevel split of "'' \n \u180E": the last space goes with U+180E.
  const std::vector<std::string_view> gpt2 =
      RegexSplitter(std::string(gpt2_split_pattern)).split("'' \n \u180E");
  CHECK(gpt2 == std::vector<std::string_view>{"''", " \n", " \u180E"});
  CHECK_THROWS_WITH(RegexSplitter(R"([\S])"), Catch::Contains("\\S inside a character class"));
}

TEST_CASE("tokenizer files: a missing one, read or written, is an IoError with its errno, not an NpzError", "[tokenizer_json]") {
  const tapegrad::test::TempDir dir;
  const std::string missing = dir.file("no/such/tokenizer");  // its folder is missing too
  const BpeTokenizer t = BpeTokenizer::train("one two three one two three", 260, BpeMode::regex);
  // "NpzError", "IoError <errno>", or what else was thrown, with the message
  const auto kind = [](const auto& f) -> std::string {
    try {
      f();
    } catch (const tapegrad::NpzError& e) {
      return std::string("NpzError: ") + e.what();
    } catch (const tapegrad::IoError& e) {
      return "IoError " + std::to_string(e.code().value());
    } catch (const std::exception& e) {
      return std::string("another error: ") + e.what();
    }
    return "nothing";
  };
  const std::string enoent = "IoError " + std::to_string(ENOENT);
  CHECK(kind([&] { BpeTokenizer::load(missing + ".bpe"); }) == enoent);
  CHECK(kind([&] { read_tokenizer_json(missing + ".json"); }) == enoent);
  CHECK(kind([&] { read_tokenizer_file(missing); }) == enoent);
  // written: the temporary file cannot be made in a folder that is not there
  CHECK(kind([&] { t.save(missing + ".bpe"); }) == enoent);
  CHECK(kind([&] { write_tokenizer_json(t, missing + ".json"); }) == enoent);
  // and the messages name the file, as before
  CHECK_THROWS_WITH(BpeTokenizer::load(missing + ".bpe"),
                    "cannot open tokenizer file " + missing + ".bpe: No such file or directory");
  CHECK_THROWS_WITH(t.save(missing + ".bpe"), Catch::StartsWith("BpeTokenizer::save: '" + missing + ".bpe': cannot create the temporary file"));
}
