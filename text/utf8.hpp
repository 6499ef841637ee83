// UTF-8 decoding and encoding: the one reading of invalid bytes (U+FFFD per maximal invalid
// subpart) for showing decoded bytes as text and for a text's characters (tasks/), and the
// one writing of code points as bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::text {

// The bytes with every invalid UTF-8 sequence replaced by U+FFFD, one per maximal invalid
// subpart (Unicode's recommended practice, as Python's errors="replace").
std::string replace_invalid_utf8(std::string_view bytes);

// The character at bytes[0] (not empty) and the bytes it takes: for an invalid sequence,
// U+FFFD over its maximal invalid subpart (the longest prefix of a valid sequence there,
// or the one byte that starts none).
struct Utf8Char {
  std::uint32_t code_point;
  std::size_t length;
  bool valid;
};
Utf8Char decode_utf8_char(std::string_view bytes);

// The length of the valid UTF-8 sequence starting at bytes[0], or 0 when there is none.
std::size_t valid_utf8_sequence_length(std::string_view bytes);

// Every character of the bytes as a code point, decode_utf8_char's U+FFFD for each maximal
// invalid subpart; `invalid`, when given, counts the invalid bytes.
std::vector<std::uint32_t> decode_utf8(std::string_view bytes, std::size_t* invalid = nullptr);

// The bytes UTF-8 writes a code point in (1 to 4), and the code points written out. Code
// points are taken as given: decode_utf8's output (valid characters and U+FFFD) round-trips.
std::size_t utf8_length(std::uint32_t code_point);
void append_utf8(std::string& out, std::uint32_t code_point);
std::string encode_utf8(const std::vector<std::uint32_t>& code_points);

}  // namespace tapegrad::text
