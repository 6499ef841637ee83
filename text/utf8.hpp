// UTF-8 decoding: the one reading of invalid bytes (U+FFFD per maximal invalid subpart) for
// showing decoded bytes as text and for a text's characters (tasks/).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

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

}  // namespace tapegrad::text
