#pragma once
// How a text task turns text into token ids and back: one id per Unicode character (the
// sorted vocabulary of the characters a text holds) or byte-level BPE (text/bpe_tokenizer).
// Both say how many bytes of text a token stands for, which is what bits per byte needs
// to compare models whose tokens differ.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/bpe_tokenizer.hpp"

namespace tapegrad::tasks {

class TextCoder {
 public:
  // The sorted, distinct code points `vocab`: token id i is vocab[i]. Throws
  // std::runtime_error when vocab is not sorted.
  static TextCoder characters(std::vector<std::uint32_t> vocab);
  // The distinct code points of a UTF-8 text (invalid bytes read as U+FFFD).
  static TextCoder characters_of(const std::string& utf8);
  static TextCoder bpe(text::BpeTokenizer tokenizer);

  bool is_bpe() const { return bpe_ != nullptr; }
  const char* kind() const { return is_bpe() ? "bpe" : "char"; }
  std::size_t vocab_size() const;
  const std::vector<std::uint32_t>& characters() const { return characters_; }  // char only
  const text::BpeTokenizer* tokenizer() const { return bpe_.get(); }            // bpe only

  // char: characters outside the vocabulary are dropped. bpe: every byte string encodes.
  std::vector<std::int64_t> encode(const std::string& utf8) const;
  // The text of the ids: invalid UTF-8 shown as U+FFFD; ids outside the vocabulary skipped.
  std::string decode(const std::vector<std::int64_t>& ids) const;
  // The raw bytes of the ids (bpe tokens may end inside a character).
  std::string decode_bytes(const std::vector<std::int64_t>& ids) const;
  // The UTF-8 bytes token `id` stands for (0 outside the vocabulary).
  std::size_t token_bytes(std::int64_t id) const;

 private:
  std::vector<std::uint32_t> characters_;
  std::vector<std::uint8_t> character_bytes_;  // UTF-8 length of each character
  std::shared_ptr<const text::BpeTokenizer> bpe_;
};

// Splits a byte stream of tokens into whole UTF-8 characters, for printing a model's
// tokens as they come: push() returns what can be shown now, finish() the rest (an
// incomplete or invalid sequence as U+FFFD).
class Utf8Stream {
 public:
  std::string push(const std::string& bytes);
  std::string finish();

 private:
  std::string pending_;
};

}  // namespace tapegrad::tasks
