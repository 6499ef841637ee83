// UTF-8 checks for showing decoded bytes as text.
#pragma once
#include <string>
#include <string_view>

namespace tapegrad::text {

// The bytes with every invalid UTF-8 sequence replaced by U+FFFD, one per maximal invalid
// subpart (Unicode's recommended practice, as Python's errors="replace").
std::string replace_invalid_utf8(std::string_view bytes);

// The length of the valid UTF-8 sequence starting at bytes[0], or 0 when there is none.
std::size_t valid_utf8_sequence_length(std::string_view bytes);

}  // namespace tapegrad::text
