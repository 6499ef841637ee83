#include "tasks/checkpoint_entries.hpp"

#include <stdexcept>

#include <xtensor/xadapt.hpp>

#include "text/tokenizer_json.hpp"

namespace tapegrad::tasks {

NpzEntry task_entry(const std::string& task) {
  const std::vector<std::int64_t> codes(task.begin(), task.end());
  return NpzEntry(kTaskKey, xt::xarray<std::int64_t>(xt::adapt(codes, {codes.size()})));
}

std::string task_from_entries(const std::vector<NpzEntry>& entries) {
  std::string task;
  for (const NpzEntry& e : entries)
    if (e.name == kTaskKey && e.holds<std::int64_t>())
      for (std::int64_t c : e.as<std::int64_t>()) task += char(c);
  return task;
}

std::vector<NpzEntry> text_coder_entries(const TextCoder& coder) {
  std::vector<std::int64_t> values;
  if (const text::BpeTokenizer* bpe = coder.tokenizer()) {
    const std::string file = text::saved_tokenizer(*bpe).contents;
    for (char c : file) values.push_back(static_cast<unsigned char>(c));
  } else {
    values.assign(coder.characters().begin(), coder.characters().end());
  }
  const std::vector<std::size_t> shape = {values.size()};
  return {NpzEntry(coder.is_bpe() ? kTokenizerKey : kVocabKey,
                   xt::xarray<std::int64_t>(xt::adapt(values, shape)))};
}

std::optional<TextCoder> text_coder_from_entries(const std::vector<NpzEntry>& entries,
                                                 const std::string& source) {
  for (const NpzEntry& e : entries) {
    if (e.name == kVocabKey) {
      std::vector<std::uint32_t> vocab;
      for (std::int64_t cp : e.as<std::int64_t>()) {
        if (cp < 0 || cp > 0x10ffff)
          throw std::runtime_error(source + ": the text vocabulary holds " + std::to_string(cp) +
                                   ", not a code point");
        vocab.push_back(std::uint32_t(cp));
      }
      return TextCoder::characters(std::move(vocab));
    }
    if (e.name == kTokenizerKey) {
      std::string file;
      for (std::int64_t byte : e.as<std::int64_t>()) {
        if (byte < 0 || byte > 255)
          throw std::runtime_error(source + ": the tokenizer entry holds " + std::to_string(byte) +
                                   ", not a byte");
        file += char(byte);
      }
      if (!file.empty() && file.front() == '{')
        return TextCoder::bpe(text::tokenizer_from_json(file, source + " (its tokenizer.json)"));
      return TextCoder::bpe(text::BpeTokenizer::from_text(file, source + " (its tokenizer)"));
    }
  }
  return std::nullopt;
}

}  // namespace tapegrad::tasks
