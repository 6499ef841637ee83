// A byte-level BPE tokenizer (as minbpe defines it), trained, used and saved without xtensor.
//
// Training: ids 0..255 are the byte values. Each step counts the adjacent pairs of ids and
// merges the most frequent pair into the next new id (256, 257, ...), left to right and
// without overlap. TIE RULE: among pairs of equal count, the pair whose first occurrence
// comes first in the (current) text wins. In regex mode the text is split into chunks first
// (by default the GPT-4 pattern) and pairs never cross a chunk boundary; in basic mode the
// whole text is one chunk. Special tokens take the ids after the merges, in the order given,
// and are never split.
#pragma once
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
  std::int32_t id;  // 256 + the merge's index
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

  std::vector<std::int32_t> encode(std::string_view text,
                                   SpecialTokens specials = SpecialTokens::allowed) const;
  std::string decode_bytes(const std::vector<std::int32_t>& ids) const;  // raw bytes
  // The bytes as text: invalid UTF-8 shown as U+FFFD (the ids are unaffected).
  std::string decode(const std::vector<std::int32_t>& ids) const;

  // The documented text format (docs/TOKENIZER.md); load names the line of any error.
  void save(const std::string& path) const;
  static BpeTokenizer load(const std::string& path);
  std::string to_text() const;
  static BpeTokenizer from_text(std::string_view contents, const std::string& source);

  BpeMode mode() const { return mode_; }
  const std::string& pattern() const { return pattern_; }
  const std::vector<BpeMerge>& merges() const { return merges_; }
  const std::vector<std::string>& special_tokens() const { return special_tokens_; }
  std::int32_t vocab_size() const;
  const std::string& token_bytes(std::int32_t id) const;  // a merge's or byte's bytes

 private:
  std::vector<std::int32_t> encode_ordinary(std::string_view text) const;
  void encode_chunk(std::string_view chunk, std::vector<std::int32_t>& out) const;
  void encode_long_chunk(std::string_view chunk, std::vector<std::int32_t>& out) const;
  std::int32_t special_id(std::size_t index) const;

  BpeMode mode_;
  std::string pattern_;
  std::optional<RegexSplitter> splitter_;  // regex mode only
  std::vector<BpeMerge> merges_;
  std::vector<std::string> special_tokens_;
  std::vector<std::string> vocab_;  // bytes of every non-special id
  std::unordered_map<std::uint64_t, std::int32_t> merge_rank_;  // pair key -> merge index
};

// The key of an ordered pair of ids in hash maps.
inline std::uint64_t pair_key(std::int32_t first, std::int32_t second) {
  return (std::uint64_t(std::uint32_t(first)) << 32) | std::uint32_t(second);
}

// minbpe's training with incremental counts; declared here for the tests and the bench.
std::vector<BpeMerge> train_bpe_merges(const std::vector<std::string_view>& chunks,
                                       int merge_count);

}  // namespace tapegrad::text
