#include "examples/tokenizer/commands.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "platform/file_io.hpp"
#include "text/utf8.hpp"

namespace tapegrad::apps::tokenizer {

std::string read_input(const std::string& path, const std::string& label) {
  return read_text_file(path, label + " " + path);
}

void write_file(const std::string& path, const std::string& contents) {
  detail::write_file_atomically(path, contents, "--out " + path);
}

std::vector<std::int32_t> parse_ids(const std::string& contents, const std::string& source) {
  std::vector<std::int32_t> ids;
  std::size_t i = 0, line = 1;
  while (i < contents.size()) {
    if (std::isspace(static_cast<unsigned char>(contents[i]))) {
      if (contents[i++] == '\n') ++line;
      continue;
    }
    std::size_t end = i;
    while (end < contents.size() && std::isdigit(static_cast<unsigned char>(contents[end]))) ++end;
    bool ends_well = end == contents.size() || std::isspace(static_cast<unsigned char>(contents[end]));
    if (end == i || end - i > 9 || !ends_well)
      throw std::invalid_argument(source + ", line " + std::to_string(line) +
                                  ": expected token ids (non-negative integers)");
    ids.push_back(std::stoi(contents.substr(i, end - i)));
    i = end;
  }
  return ids;
}

std::string format_ids(const std::vector<std::int32_t>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  return out + "\n";
}

namespace {

std::string printable(const std::string& bytes) {
  std::string shown;
  for (char c : bytes) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) shown += c;
    else if (c == '\n') shown += "\\n";
    else if (byte >= 0x80) shown += c;  // UTF-8 as is; a split character shows as U+FFFD
    else {
      char code[8];
      std::snprintf(code, sizeof code, "\\x%02x", byte);
      shown += code;
    }
  }
  return shown;
}

// A token as one line of the listing: at most kShownTokenBytes of it, cut at a character
// boundary, then its length (a token can be as long as the training text).
constexpr std::size_t kShownTokenBytes = 40;
std::string shown_token(const std::string& bytes) {
  if (bytes.size() <= kShownTokenBytes) return "'" + text::replace_invalid_utf8(printable(bytes)) + "'";
  std::size_t cut = kShownTokenBytes;
  while (cut > 0 && (static_cast<unsigned char>(bytes[cut]) & 0xc0) == 0x80) --cut;
  return "'" + text::replace_invalid_utf8(printable(bytes.substr(0, cut))) + "...' (" +
         std::to_string(bytes.size()) + " bytes)";
}

}  // namespace

void print_stats(const text::BpeTokenizer& tokenizer, const std::string& text, std::size_t top,
                 std::FILE* out) {
  std::vector<std::int32_t> ids = tokenizer.encode(text);
  std::fprintf(out, "%zu bytes, %zu tokens, %.3f bytes per token (vocab %d: %zu merges, %zu special)\n",
               text.size(), ids.size(), ids.empty() ? 0.0 : double(text.size()) / double(ids.size()),
               tokenizer.vocab_size(), tokenizer.merges().size(), tokenizer.special_tokens().size());
  std::vector<std::size_t> uses(tokenizer.vocab_size(), 0);
  for (std::int32_t id : ids) ++uses[id];
  std::vector<std::int32_t> merged;
  for (const text::BpeMerge& merge : tokenizer.merges())
    if (uses[merge.id] > 0) merged.push_back(merge.id);
  std::stable_sort(merged.begin(), merged.end(),
                   [&](std::int32_t a, std::int32_t b) { return uses[a] > uses[b]; });
  if (merged.size() > top) merged.resize(top);
  std::fprintf(out, "most frequent merged tokens:\n");
  for (std::int32_t id : merged)
    std::fprintf(out, "%8zu  %5d  %s\n", uses[id], id, shown_token(tokenizer.token_bytes(id)).c_str());
}

}  // namespace tapegrad::apps::tokenizer
