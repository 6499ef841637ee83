// The tokenizer's own text format, one item per line:
//   tapegrad-bpe 1                  format and version
//   mode regex                      basic | regex
//   pattern <rest of the line>      the split pattern (empty in basic mode)
//   specials N                      then N lines "<id> <token>" (ids follow the merges)
//   merges M                        then M lines "<first> <second>": merge i makes id 256 + i
#include <sstream>
#include <stdexcept>

#include "platform/file_io.hpp"
#include "text/bpe_tokenizer.hpp"

namespace tapegrad::text {
namespace {

constexpr std::string_view format_line = "tapegrad-bpe 1";

class LineReader {
 public:
  LineReader(std::string_view contents, std::string source)
      : contents_(contents), source_(std::move(source)) {}

  std::string_view next(const char* expected) {
    if (offset_ >= contents_.size()) fail("ends early: expected " + std::string(expected));
    std::size_t end = contents_.find('\n', offset_);
    if (end == std::string_view::npos) end = contents_.size();
    std::string_view line = contents_.substr(offset_, end - offset_);
    offset_ = end + 1;
    ++number_;
    return line;
  }
  // The text after "<keyword> " on the next line.
  std::string_view field(std::string_view keyword) {
    std::string_view line = next(std::string(keyword).c_str());
    if (line.substr(0, keyword.size() + 1) != std::string(keyword) + " ")
      fail("expected '" + std::string(keyword) + " ...', found '" + std::string(line) + "'");
    return line.substr(keyword.size() + 1);
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("tokenizer file " + source_ + ", line " +
                                std::to_string(number_) + ": " + what);
  }
  bool at_end() const { return offset_ >= contents_.size(); }

 private:
  std::string_view contents_;
  std::string source_;
  std::size_t offset_ = 0;
  int number_ = 0;
};

std::int64_t parse_count(LineReader& reader, std::string_view digits) {
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos)
    reader.fail("expected a number, found '" + std::string(digits) + "'");
  return std::stoll(std::string(digits));
}

}  // namespace

std::string BpeTokenizer::to_text() const {
  if (!is_minbpe())
    throw std::invalid_argument(
        "BpeTokenizer::to_text: this tokenizer's ids are not minbpe's (bytes 0..255, merge i "
        "makes 256 + i, special tokens after them): write it as tokenizer.json instead");
  std::ostringstream out;
  out << format_line << "\nmode " << bpe_mode_name(v_.mode) << "\npattern " << v_.pattern << "\n";
  out << "specials " << v_.added.size() << "\n";
  for (const AddedToken& token : v_.added) out << token.id << " " << token.content << "\n";
  out << "merges " << v_.merges.size() << "\n";
  for (const BpeMerge& merge : v_.merges) out << merge.first << " " << merge.second << "\n";
  return out.str();
}

BpeTokenizer BpeTokenizer::from_text(std::string_view contents, const std::string& source) {
  LineReader reader(contents, source);
  if (std::string_view line = reader.next("the format line"); line != format_line)
    reader.fail("expected '" + std::string(format_line) + "', found '" + std::string(line) + "'");
  BpeMode mode{};
  try {
    mode = parse_bpe_mode(reader.field("mode"));
  } catch (const std::invalid_argument& error) {
    reader.fail(error.what());
  }
  std::string pattern(reader.field("pattern"));
  if (mode == BpeMode::regex) {
    try {
      RegexSplitter check(pattern);
    } catch (const std::invalid_argument& error) {
      reader.fail(error.what());
    }
  }
  std::int64_t special_count = parse_count(reader, reader.field("specials"));
  std::vector<std::pair<std::int64_t, std::string>> specials;
  for (std::int64_t s = 0; s < special_count; ++s) {
    std::string_view line = reader.next("a special token");
    std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space + 1 == line.size())
      reader.fail("expected '<id> <token>', found '" + std::string(line) + "'");
    std::int64_t id = parse_count(reader, line.substr(0, space));
    for (const auto& [other_id, token] : specials)
      if (token == line.substr(space + 1)) reader.fail("special token '" + token + "' repeats");
    specials.emplace_back(id, std::string(line.substr(space + 1)));
  }
  std::int64_t merge_count = parse_count(reader, reader.field("merges"));
  std::vector<BpeMerge> merges;
  std::unordered_map<std::uint64_t, std::int64_t> seen;
  for (std::int64_t m = 0; m < merge_count; ++m) {
    std::string_view line = reader.next("a merge");
    std::size_t space = line.find(' ');
    if (space == std::string_view::npos)
      reader.fail("expected '<first> <second>', found '" + std::string(line) + "'");
    auto first = std::int32_t(parse_count(reader, line.substr(0, space)));
    auto second = std::int32_t(parse_count(reader, line.substr(space + 1)));
    auto id = std::int32_t(256 + m);
    if (first >= id || second >= id)
      reader.fail("merge " + std::to_string(m) + " (" + std::to_string(first) + ", " +
                  std::to_string(second) + ") uses an id not yet made (the merge makes " +
                  std::to_string(id) + ")");
    if (!seen.emplace(pair_key(first, second), m).second)
      reader.fail("merge (" + std::to_string(first) + ", " + std::to_string(second) +
                  ") repeats merge " + std::to_string(seen[pair_key(first, second)]));
    merges.push_back({first, second, id});
  }
  if (!reader.at_end()) reader.next("nothing"), reader.fail("unexpected text after the merges");
  std::vector<std::string> special_tokens;
  for (std::size_t s = 0; s < specials.size(); ++s) {
    if (specials[s].first != 256 + merge_count + std::int64_t(s))
      throw std::invalid_argument("tokenizer file " + source + ": special token '" +
                                  specials[s].second + "' has id " +
                                  std::to_string(specials[s].first) + ", expected " +
                                  std::to_string(256 + merge_count + std::int64_t(s)) +
                                  " (the ids after the merges, in order)");
    special_tokens.push_back(specials[s].second);
  }
  return BpeTokenizer(mode, std::move(pattern), std::move(merges), std::move(special_tokens));
}

void BpeTokenizer::save(const std::string& path) const {
  detail::write_file_atomically(path, to_text(), "BpeTokenizer::save: '" + path + "'");
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  return from_text(read_text_file(path, "tokenizer file " + path), path);
}

}  // namespace tapegrad::text
