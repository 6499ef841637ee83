#pragma once
// A byte-level BPE tokenizer whose ids are not minbpe's, as in every real GPT-2, Llama 3 or
// Qwen2 tokenizer.json: the 256 byte tokens in GPT-2's bytes_to_unicode order ('!' is id
// 0, the space byte id 220), then the merges trained on a text, then <|endoftext|>.
#include <array>
#include <string>
#include <string_view>

#include "text/bpe_tokenizer.hpp"

namespace tapegrad::test {

inline text::BpeTokenizer gpt2_ordered_tokenizer(std::string_view training_text, int merges) {
  // bytes_to_unicode lists the printable bytes first, then the others, each in byte order
  auto printable = [](int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; };
  std::array<std::int32_t, 256> id_of_byte{};
  std::int32_t next = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (int b = 0; b < 256; ++b)
      if (printable(b) == (pass == 0)) id_of_byte[b] = next++;

  const text::BpeTokenizer trained = text::BpeTokenizer::train(
      training_text, 256 + merges, text::BpeMode::regex, {}, std::string(text::gpt2_split_pattern));
  auto renumbered = [&](std::int32_t minbpe_id) { return minbpe_id < 256 ? id_of_byte[minbpe_id] : minbpe_id; };
  text::BpeVocabulary v;
  v.tokens.resize(256);
  for (int b = 0; b < 256; ++b) {
    v.byte_ids[b] = id_of_byte[b];
    v.tokens[id_of_byte[b]] = std::string(1, char(b));
  }
  for (const text::BpeMerge& m : trained.merges()) {
    v.merges.push_back({renumbered(m.first), renumbered(m.second), m.id});
    v.tokens.push_back(v.tokens[renumbered(m.first)] + v.tokens[renumbered(m.second)]);
  }
  v.tokens.push_back("<|endoftext|>");
  v.added.push_back({"<|endoftext|>", std::int32_t(v.tokens.size() - 1)});
  v.mode = text::BpeMode::regex;
  v.pattern = std::string(text::gpt2_split_pattern);
  return text::BpeTokenizer(std::move(v));
}

}  // namespace tapegrad::test
