// Splitting text into chunks with a PCRE2 pattern (UTF mode, Unicode properties), the first
// step of byte-level BPE in "regex" mode. No xtensor: the tokenizer needs none.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::text {

// The GPT-4 split pattern (cl100k_base): contractions, letter runs with one leading
// non-letter, numbers in groups of at most 3 digits, punctuation runs, newlines, spaces.
inline constexpr std::string_view gpt4_split_pattern =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

// The GPT-2 split pattern (Hugging Face's ByteLevel pre-tokenizer with use_regex): contractions
// (lower case), letter, number and punctuation runs with one optional leading space, spaces.
inline constexpr std::string_view gpt2_split_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A compiled pattern; its \s is Unicode's White_Space (as in Hugging Face tokenizers'
// Oniguruma, not PCRE2's own, which adds U+180E), and \S inside a class is refused. split() returns consecutive chunks that cover the text exactly: the
// matches, and between them whatever the pattern did not match (invalid UTF-8 included, so
// that every byte string survives the split). Thread-safe: each call has its own match data.
class RegexSplitter {
 public:
  // Throws std::invalid_argument naming the pattern and the offset of a compile error.
  explicit RegexSplitter(std::string pattern);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;
  // A copy compiles the pattern again (PCRE2 code is not shared), so tokenizers copy.
  RegexSplitter(const RegexSplitter& other);
  RegexSplitter& operator=(const RegexSplitter& other);

  const std::string& pattern() const { return pattern_; }
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  std::string pattern_;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace tapegrad::text
