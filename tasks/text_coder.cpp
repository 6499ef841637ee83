#include "tasks/text_coder.hpp"

#include <algorithm>
#include <stdexcept>
#include <string_view>

#include "text/utf8.hpp"

namespace tapegrad::tasks {

namespace {

// Whether `tail` (1 to 3 bytes from a lead byte) is the start of a valid sequence that
// more bytes could complete: every second byte a lead byte allows is in one of these.
bool could_complete(std::string_view tail) {
  for (unsigned char fill : {0x80, 0x90, 0xa0, 0xbf}) {
    std::string padded(tail);
    padded.append(4 - tail.size(), char(fill));
    if (text::valid_utf8_sequence_length(padded) > tail.size()) return true;
  }
  return false;
}

}  // namespace

TextCoder TextCoder::characters(std::vector<std::uint32_t> vocab) {
  if (!std::is_sorted(vocab.begin(), vocab.end()) ||
      std::adjacent_find(vocab.begin(), vocab.end()) != vocab.end())
    throw std::runtime_error("text vocabulary is not sorted and distinct");
  TextCoder c;
  c.characters_ = std::move(vocab);
  for (std::uint32_t cp : c.characters_)
    c.character_bytes_.push_back(static_cast<std::uint8_t>(text::utf8_length(cp)));
  return c;
}

TextCoder TextCoder::characters_of(const std::string& utf8) {
  std::vector<std::uint32_t> vocab = text::decode_utf8(utf8);
  std::sort(vocab.begin(), vocab.end());
  vocab.erase(std::unique(vocab.begin(), vocab.end()), vocab.end());
  return characters(std::move(vocab));
}

TextCoder TextCoder::bpe(text::BpeTokenizer tokenizer) {
  TextCoder c;
  c.bpe_ = std::make_shared<const text::BpeTokenizer>(std::move(tokenizer));
  return c;
}

std::size_t TextCoder::vocab_size() const {
  return bpe_ ? std::size_t(bpe_->vocab_size()) : characters_.size();
}

std::vector<std::int64_t> TextCoder::encode(const std::string& utf8) const {
  std::vector<std::int64_t> ids;
  if (bpe_) {
    for (std::int32_t id : bpe_->encode(utf8)) ids.push_back(id);
    return ids;
  }
  for (std::uint32_t cp : text::decode_utf8(utf8)) {
    auto it = std::lower_bound(characters_.begin(), characters_.end(), cp);
    if (it != characters_.end() && *it == cp) ids.push_back(std::int64_t(it - characters_.begin()));
  }
  return ids;
}

std::string TextCoder::decode_bytes(const std::vector<std::int64_t>& ids) const {
  if (!bpe_) {
    std::vector<std::uint32_t> cps;
    for (std::int64_t id : ids)
      if (id >= 0 && std::size_t(id) < characters_.size()) cps.push_back(characters_[std::size_t(id)]);
    return text::encode_utf8(cps);
  }
  std::string bytes;
  for (std::int64_t id : ids)
    if (id >= 0 && id < bpe_->vocab_size()) bytes += bpe_->token_bytes(std::int32_t(id));
  return bytes;
}

std::string TextCoder::decode(const std::vector<std::int64_t>& ids) const {
  return text::replace_invalid_utf8(decode_bytes(ids));
}

std::size_t TextCoder::token_bytes(std::int64_t id) const {
  if (id < 0 || std::size_t(id) >= vocab_size()) return 0;
  return bpe_ ? bpe_->token_bytes(std::int32_t(id)).size() : character_bytes_[std::size_t(id)];
}

std::string Utf8Stream::push(const std::string& bytes) {
  pending_ += bytes;
  // Hold back a last character that more bytes could still complete.
  std::size_t cut = pending_.size();
  for (std::size_t k = 1; k <= std::min<std::size_t>(3, pending_.size()); ++k) {
    const auto byte = static_cast<unsigned char>(pending_[pending_.size() - k]);
    if ((byte & 0xc0) == 0x80) continue;  // a continuation byte: look further back
    if (byte >= 0xc0 && could_complete(std::string_view(pending_).substr(pending_.size() - k)))
      cut = pending_.size() - k;
    break;
  }
  std::string shown = text::replace_invalid_utf8(std::string_view(pending_).substr(0, cut));
  pending_.erase(0, cut);
  return shown;
}

std::string Utf8Stream::finish() {
  std::string shown = text::replace_invalid_utf8(pending_);
  pending_.clear();
  return shown;
}

}  // namespace tapegrad::tasks
