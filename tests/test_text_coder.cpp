// A text task's tokens (tasks/text_coder.hpp): characters or byte-level BPE, the held-out
// split by bytes, the bytes each target stands for (bits per byte), the checkpoint entries,
// and printing tokens as whole UTF-8 characters.
#ifdef TAPEGRAD_WITH_EXAMPLES  // built only together with the example programs
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tasks/tasks.hpp"
#include "text/tokenizer_json.hpp"
#include "text/utf8.hpp"

using namespace tapegrad;
using namespace tapegrad::tasks;

namespace {

// A few kB with two- and three-byte characters, so that BPE has pairs to merge and a
// character can straddle any byte position.
std::string corpus() {
  std::string text;
  for (int i = 0; i < 60; ++i)
    text += "the caf\xc3\xa9 sold " + std::to_string(i * 7) + " cr\xc3\xa8mes for 3\xe2\x82\xac.\n";
  return text;
}

// Every target of the batches, as one id list.
std::vector<std::int64_t> targets_of(const std::vector<Batch>& batches) {
  std::vector<std::int64_t> ids;
  for (const Batch& b : batches)
    for (std::int64_t t : b.targets) ids.push_back(t);
  return ids;
}

}  // namespace

TEST_CASE("text coder: the held-out part starts 90% into the bytes, at a character", "[tasks][text]") {
  CHECK(TextTask::held_out_start(std::string(100, 'a')) == 90);
  // 9 + 2 bytes: 10% is 1 byte, so the split would fall inside the last character's bytes
  CHECK(TextTask::held_out_start(std::string(9, 'a') + "\xc3\xa9") == 11);
  CHECK(TextTask::held_out_start(std::string(8, 'a') + "\xe2\x82\xac") == 11);
}

TEST_CASE("text coder: char and BPE tasks hold out the same bytes", "[tasks][text]") {
  const std::string text = corpus();
  const std::string held_out = text.substr(TextTask::held_out_start(text));
  const TextTask chars = TextTask::from_string(text, 8);
  const text::BpeTokenizer tok = text::BpeTokenizer::train(
      text.substr(0, TextTask::held_out_start(text)), 300, text::BpeMode::regex);
  const TextTask bpe = TextTask::from_string(text, 8, TextCoder::bpe(tok));
  CHECK(bpe.vocab_size() == 300);
  CHECK(bpe.coder().is_bpe());
  CHECK(bpe.train_tokens() + bpe.eval_tokens() < chars.train_tokens() + chars.eval_tokens());
  // each task's held-out windows are consecutive, so their inputs and last target decode
  // to a prefix of the held-out text
  for (const TextTask* task : {&chars, &bpe}) {
    std::vector<std::int64_t> ids;
    for (const Batch& b : task->eval_batches(4, 1000))
      for (std::size_t i = 0; i < b.tokens.shape()[0]; ++i)
        for (std::size_t t = 0; t < 8; ++t) ids.push_back(b.tokens(i, t));
    const std::string shown = task->coder().decode_bytes(ids);
    INFO(task->coder().kind());
    CHECK(!shown.empty());
    CHECK(held_out.compare(0, shown.size(), shown) == 0);
  }
}

TEST_CASE("text coder: target bytes are the bytes the targets decode to, and bits per byte follows",
          "[tasks][text]") {
  const std::string text = corpus();
  const text::BpeTokenizer tok = text::BpeTokenizer::train(text, 320, text::BpeMode::basic);
  const TextTask chars = TextTask::from_string(text, 8);
  const TextTask bpe = TextTask::from_string(text, 8, TextCoder::bpe(tok));
  for (const TextTask* task_ptr : {&chars, &bpe}) {
    const TextTask& task = *task_ptr;
    INFO(task.coder().kind());
    const std::vector<Batch> eval = task.eval_batches(3, 1000);
    const std::vector<std::int64_t> targets = targets_of(eval);
    REQUIRE(!targets.empty());
    CHECK(task.target_bytes(eval) == task.coder().decode_bytes(targets).size());
  }
  // a uniform guess over 256 byte values is 8 bits per byte, whatever the tokens
  CHECK(bits_per_byte(std::log(256.0), 10, 10) == Approx(8.0).epsilon(1e-15));
  // the same loss over tokens of 4 bytes each is a quarter of it per byte
  CHECK(bits_per_byte(std::log(256.0), 10, 40) == Approx(2.0).epsilon(1e-15));
  CHECK(std::isnan(bits_per_byte(1.0, 0, 0)));
}

TEST_CASE("text coder: checkpoint entries give back the same tokens", "[tasks][text]") {
  const std::string text = corpus();
  const TextCoder chars = TextCoder::characters_of(text);
  const TextCoder bpe = TextCoder::bpe(text::BpeTokenizer::train(text, 290, text::BpeMode::regex, {"<|end|>"}));
  for (const TextCoder& coder : {chars, bpe}) {
    INFO(coder.kind());
    const std::optional<TextCoder> back = text_coder_from_entries(text_coder_entries(coder), "mem");
    REQUIRE(back.has_value());
    CHECK(back->is_bpe() == coder.is_bpe());
    CHECK(back->vocab_size() == coder.vocab_size());
    CHECK(back->encode(text) == coder.encode(text));
  }
  CHECK(bpe.encode("<|end|>") == std::vector<std::int64_t>{290 - 1});
  CHECK_FALSE(text_coder_from_entries({}, "mem").has_value());
  // a damaged tokenizer entry is an error naming the source, not a different tokenizer
  const std::vector<NpzEntry> entries = text_coder_entries(bpe);
  const xt::xarray<std::int64_t>& whole = entries[0].as<std::int64_t>();
  xt::xarray<std::int64_t> cut = xt::xarray<std::int64_t>::from_shape({20});
  for (std::size_t i = 0; i < 20; ++i) cut(i) = whole(i);
  const std::vector<NpzEntry> broken = {NpzEntry(kTokenizerKey, cut)};
  CHECK_THROWS_WITH(text_coder_from_entries(broken, "ckpt.npz"), Catch::Contains("ckpt.npz"));
}

TEST_CASE("text coder: a tokenizer read from a tokenizer.json goes into a checkpoint as that file", "[tasks][text]") {
  const std::string text = corpus();
  const text::BpeTokenizer trained = text::BpeTokenizer::train(text, 290, text::BpeMode::regex, {"<|end|>"});
  // ignore_merges (Llama 3's tokenizers) is one thing a minbpe file cannot say
  nlohmann::json json = nlohmann::json::parse(text::tokenizer_json(trained));
  json["model"]["ignore_merges"] = true;
  const TextCoder hf = TextCoder::bpe(text::tokenizer_from_json(json.dump(), "mem"));
  REQUIRE_FALSE(hf.tokenizer()->is_minbpe());  // the trap: such a tokenizer has no minbpe file
  CHECK_THROWS(hf.tokenizer()->to_text());
  const std::vector<NpzEntry> entries = text_coder_entries(hf);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].as<std::int64_t>()(0) == '{');
  const std::optional<TextCoder> back = text_coder_from_entries(entries, "mem");
  REQUIRE(back.has_value());
  CHECK_FALSE(back->tokenizer()->is_minbpe());
  CHECK(back->vocab_size() == trained.vocab_size());
  CHECK(back->encode(text + "<|end|>") == hf.encode(text + "<|end|>"));
}

TEST_CASE("text coder: tokens are printed as whole UTF-8 characters", "[tasks][text]") {
  const std::string text = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z";  // a é € 😀 z
  // the trap: each byte shown on its own is U+FFFD, not the character
  CHECK(text::replace_invalid_utf8(text.substr(1, 1)) == "\xef\xbf\xbd");
  Utf8Stream stream;
  std::string shown;
  std::vector<std::string> pieces;
  for (char byte : text) {
    pieces.push_back(stream.push(std::string(1, byte)));
    shown += pieces.back();
  }
  shown += stream.finish();
  CHECK(shown == text);
  CHECK(pieces[1].empty());                   // é's first byte waits
  CHECK(pieces[2] == "\xc3\xa9");             // and comes out whole
  CHECK(pieces[5] == "\xe2\x82\xac");         // € at its third byte
  CHECK(pieces[8].empty());                   // 😀's third byte waits
  CHECK(pieces[9] == "\xf0\x9f\x98\x80");
  // a byte that cannot start or continue a character is shown at once as U+FFFD; a
  // character cut off at the end is U+FFFD at finish()
  Utf8Stream bad;
  CHECK(bad.push("x\x80y") == "x\xef\xbf\xbdy");
  CHECK(bad.push("\xe2\x82").empty());
  CHECK(bad.finish() == "\xef\xbf\xbd");
  // a sequence that no byte can complete (E0 80 is overlong) is not held back
  Utf8Stream overlong;
  CHECK(overlong.push("\xe0\x80") == text::replace_invalid_utf8("\xe0\x80"));
}
#endif
