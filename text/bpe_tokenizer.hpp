// A byte-level BPE tokenizer (as minbpe defines it), trained, used and saved without xtensor.
//
// Training: ids 0..255 are the byte values. Each step counts the adjacent pairs of ids and
// merges the most frequent pair into the next new id (256, 257, ...), left to right and
// without overlap. TIE RULE: among pairs of equal count, the pair whose first occurrence
// comes first in the (current) text wins. In regex mode the text is split into chunks first
// (by default the GPT-4 pattern) and pairs never cross a chunk boundary; in basic mode the
// whole text is one chunk. Special tokens take the ids after the merges, in the order given,
// and are never split.
//
// The same class holds a Hugging Face byte-level BPE (text/tokenizer_json.hpp), whose ids are
// arbitrary: each byte, merge result and added token has the id the file gives it, and
// encoding is the same algorithm (lowest merge rank first, ties left to right).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/regex_split.hpp"

namespace tapegrad::text {

enum class BpeMode { basic, regex };
BpeMode parse_bpe_mode(std::string_view name);  // "basic" or "regex", else invalid_argument
const char* bpe_mode_name(BpeMode mode);

struct BpeMerge {
  std::int32_t first;
  std::int32_t second;
  std::int32_t id;  // minbpe: 256 + the merge's index
};

// A token matched in the text before the split and never merged: minbpe's special tokens,
// Hugging Face's added_tokens. `normalized` ones are matched in a second pass, in the text
// the others left (Hugging Face's order).
struct AddedToken {
  std::string content;
  std::int32_t id;
  bool special = true;      // SpecialTokens::as_text encodes only these as text
  bool normalized = false;
  bool in_vocabulary = false;  // also a token of the BPE vocabulary (ignore_merges finds it)
};

// Everything that defines a tokenizer with arbitrary ids. Ids are 0..tokens.size() - 1;
// an added token's id may be that of a vocabulary token with the same bytes (GPT-2's
// <|endoftext|>) or one past the vocabulary.
struct BpeVocabulary {
  std::vector<std::string> tokens;  // id -> bytes; an added token's content at its id
  std::array<std::int32_t, 256> byte_ids{};
  std::vector<BpeMerge> merges;     // by rank, lowest first
  std::vector<AddedToken> added;
  BpeMode mode = BpeMode::regex;
  std::string pattern;              // regex mode's split
  bool ignore_merges = false;       // a chunk that is a vocabulary token is that token
  bool add_prefix_space = false;    // a space before each text that does not start with one
  std::vector<std::int32_t> prefix_ids, suffix_ids;  // around encode()'s result
};

// Whether encode() turns the text of special tokens into their ids or encodes it as bytes.
enum class SpecialTokens { allowed, as_text };

class BpeTokenizer {
 public:
  // Trains vocab_size - 256 - special_tokens.size() merges (fewer if the text runs out of
  // pairs). Throws std::invalid_argument on a vocab_size below 256 + the specials, a
  // duplicate or empty special token, or one with a newline (the file format is by line).
  static BpeTokenizer train(std::string_view text, int vocab_size, BpeMode mode,
                            const std::vector<std::string>& special_tokens = {},
                            std::string pattern = std::string(gpt4_split_pattern));

  // The tokenizer these merges define (checked: each merge's parts exist before it).
  BpeTokenizer(BpeMode mode, std::string pattern, std::vector<BpeMerge> merges,
               std::vector<std::string> special_tokens);
  // A tokenizer with arbitrary ids, checked: bytes, merges and added tokens consistent.
  explicit BpeTokenizer(BpeVocabulary vocabulary);

  // `add_special_tokens`: the post-processor's ids (Llama 3's BOS) around the result.
  std::vector<std::int32_t> encode(std::string_view text,
                                   SpecialTokens specials = SpecialTokens::allowed,
                                   bool add_special_tokens = true) const;
  std::string decode_bytes(const std::vector<std::int32_t>& ids) const;  // raw bytes
  // The bytes as text: invalid UTF-8 shown as U+FFFD (the ids are unaffected).
  std::string decode(const std::vector<std::int32_t>& ids) const;

  // The documented text format (docs/TOKENIZER.md); load names the line of any error.
  // Only a minbpe tokenizer has one (is_minbpe()); to_text of another throws. A file that
  // cannot be read or written is an IoError (platform/io_error.hpp) naming it, with the errno.
  void save(const std::string& path) const;
  static BpeTokenizer load(const std::string& path);
  std::string to_text() const;
  static BpeTokenizer from_text(std::string_view contents, const std::string& source);

  BpeMode mode() const { return v_.mode; }
  const std::string& pattern() const { return v_.pattern; }
  const std::vector<BpeMerge>& merges() const { return v_.merges; }
  std::vector<std::string> special_tokens() const;  // the added tokens' contents
  const BpeVocabulary& vocabulary() const { return v_; }
  // Ids 0..255 are the bytes, merge i makes 256 + i, special added tokens follow, nothing else.
  bool is_minbpe() const;
  std::int32_t vocab_size() const;
  const std::string& token_bytes(std::int32_t id) const;  // an added token's: its content

 private:
  void check_and_index();
  std::vector<std::int32_t> encode_ordinary(std::string_view text) const;
  std::vector<std::int32_t> encode_added(std::string_view text, SpecialTokens specials,
                                         bool normalized_pass) const;
  void encode_chunk(std::string_view chunk, std::vector<std::int32_t>& out) const;
  void encode_long_chunk(std::string_view chunk, std::vector<std::int32_t>& out) const;

  BpeVocabulary v_;
  std::optional<RegexSplitter> splitter_;  // regex mode only
  std::unordered_map<std::uint64_t, std::int32_t> merge_rank_;  // pair key -> merge index
  std::unordered_map<std::string, std::int32_t> whole_token_;   // ignore_merges only: bytes -> id
};

// The key of an ordered pair of ids in hash maps.
inline std::uint64_t pair_key(std::int32_t first, std::int32_t second) {
  return (std::uint64_t(std::uint32_t(first)) << 32) | std::uint32_t(second);
}

// minbpe's training with incremental counts; declared here for the tests and the bench.
std::vector<BpeMerge> train_bpe_merges(const std::vector<std::string_view>& chunks,
                                       int merge_count);

}  // namespace tapegrad::text
