#include "text/utf8.hpp"

namespace tapegrad::text {
namespace {

// Unicode Table 3-7: the allowed range of the second byte depends on the lead byte (no
// overlong forms, no surrogates, nothing above U+10FFFF); later bytes are 80..BF.
struct LeadByte {
  std::size_t length;
  unsigned char second_low, second_high;
};

LeadByte classify(unsigned char lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes from bytes[0] form a valid prefix of some sequence (at least 1), and
// whether that prefix is a complete sequence.
std::size_t valid_prefix(std::string_view bytes, bool& complete) {
  LeadByte lead = classify(static_cast<unsigned char>(bytes[0]));
  complete = lead.length == 1;
  if (lead.length <= 1) return 1;
  std::size_t n = 1;
  while (n < lead.length && n < bytes.size()) {
    auto byte = static_cast<unsigned char>(bytes[n]);
    unsigned char low = n == 1 ? lead.second_low : 0x80, high = n == 1 ? lead.second_high : 0xBF;
    if (byte < low || byte > high) break;
    ++n;
  }
  complete = n == lead.length;
  return n;
}

}  // namespace

std::size_t valid_utf8_sequence_length(std::string_view bytes) {
  if (bytes.empty()) return 0;
  bool complete = false;
  std::size_t n = valid_prefix(bytes, complete);
  return complete ? n : 0;
}

Utf8Char decode_utf8_char(std::string_view bytes) {
  bool complete = false;
  const std::size_t n = valid_prefix(bytes, complete);
  if (!complete) return {0xFFFD, n, false};
  const auto lead = static_cast<unsigned char>(bytes[0]);
  std::uint32_t cp = n == 1 ? lead : lead & (0x7Fu >> n);  // the lead byte's payload bits
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(bytes[k]) & 0x3Fu);
  return {cp, n, true};
}

std::vector<std::uint32_t> decode_utf8(std::string_view bytes, std::size_t* invalid) {
  if (invalid) *invalid = 0;
  std::vector<std::uint32_t> out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const Utf8Char c = decode_utf8_char(bytes.substr(i));
    if (!c.valid && invalid) *invalid += c.length;
    out.push_back(c.code_point);
    i += c.length;
  }
  return out;
}

std::size_t utf8_length(std::uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void append_utf8(std::string& out, std::uint32_t cp) {
  switch (utf8_length(cp)) {
    case 1:
      out += char(cp);
      return;
    case 2:
      out += char(0xc0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3f));
      return;
    case 3:
      out += char(0xe0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3f));
      out += char(0x80 | (cp & 0x3f));
      return;
    default:
      out += char(0xf0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3f));
      out += char(0x80 | ((cp >> 6) & 0x3f));
      out += char(0x80 | (cp & 0x3f));
  }
}

std::string encode_utf8(const std::vector<std::uint32_t>& cps) {
  std::string out;
  for (std::uint32_t cp : cps) append_utf8(out, cp);
  return out;
}

std::string replace_invalid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Utf8Char c = decode_utf8_char(bytes.substr(i));
    if (c.valid) out.append(bytes.substr(i, c.length));
    else out.append("\xEF\xBF\xBD");
    i += c.length;
  }
  return out;
}

}  // namespace tapegrad::text
