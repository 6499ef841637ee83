#include "text/regex_split.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

namespace tapegrad::text {

namespace {

// Unicode's White_Space property, what Oniguruma (Hugging Face tokenizers) and Rust's regex
// take for \s. PCRE2's \s also matches U+180E, no longer a space since Unicode 6.3.
constexpr std::string_view white_space =
    R"(\t-\r\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000})";

// The pattern with each \s (and \S outside a character class) spelled as White_Space.
std::string with_unicode_white_space(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 's') {
        out += in_class ? std::string(white_space) : "[" + std::string(white_space) + "]";
      } else if (escaped == 'S') {
        if (in_class)
          throw std::invalid_argument("RegexSplitter: \\S inside a character class is not supported "
                                      "(pattern: " + pattern + ")");
        out += "[^" + std::string(white_space) + "]";
      } else {
        out += c;
        out += escaped;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' first in the class (after an optional '^') is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const std::size_t end = pattern.find(":]", i + 2);  // a POSIX class [:alpha:]
      if (end != std::string::npos) {
        out += pattern.substr(i + 1, end + 1 - i);
        i = end + 1;
      }
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

pcre2_code* compile(const std::string& pattern, int& error_code, PCRE2_SIZE& error_offset) {
  // MATCH_INVALID_UTF: invalid UTF-8 in the text is never matched (instead of an error), so
  // arbitrary bytes can be split; UCP: \w, \p and friends follow Unicode, as in Python's re.
  return pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                       PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                       &error_offset, nullptr);
}

}  // namespace

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(std::string pattern) : pattern_(std::move(pattern)) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // The pattern as given compiles first, so that an error's offset is in the user's text.
  pcre2_code* code = compile(pattern_, error_code, error_offset);
  if (code != nullptr) {
    pcre2_code_free(code);
    code = compile(with_unicode_white_space(pattern_), error_code, error_offset);
  }
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    throw std::invalid_argument("RegexSplitter: pattern does not compile at offset " +
                                std::to_string(error_offset) + ": " +
                                reinterpret_cast<const char*>(message) + " (pattern: " +
                                pattern_ + ")");
  }
  // The JIT is an optimisation only: without it (an unsupported CPU) matching still works.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  compiled_ = std::make_unique<Compiled>();
  compiled_->code = code;
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;
RegexSplitter::RegexSplitter(const RegexSplitter& other) : RegexSplitter(other.pattern_) {}
RegexSplitter& RegexSplitter::operator=(const RegexSplitter& other) {
  if (this != &other) *this = RegexSplitter(other.pattern_);
  return *this;
}

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), &pcre2_match_data_free);
  std::vector<std::string_view> chunks;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t covered = 0;  // text[0, covered) is in chunks already
  std::size_t start = 0;
  while (start < text.size()) {
    int rc = pcre2_match(compiled_->code, subject, text.size(), start, 0, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw std::runtime_error("RegexSplitter: matching failed at byte " +
                               std::to_string(start) + ": " +
                               reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    std::size_t begin = span[0], end = span[1];
    if (end == begin) {  // an empty match covers nothing: move on one byte
      start = begin + 1;
      continue;
    }
    if (begin > covered) chunks.push_back(text.substr(covered, begin - covered));
    chunks.push_back(text.substr(begin, end - begin));
    covered = start = end;
  }
  if (covered < text.size()) chunks.push_back(text.substr(covered));
  return chunks;
}

}  // namespace tapegrad::text
