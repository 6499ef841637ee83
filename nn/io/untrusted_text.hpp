#pragma once
// How the npz layer shows a string taken from a file (a member name, a dtype) in a message:
// the bytes come from hostile files, so bounded to 80 and without control bytes.
#include <cstddef>
#include <string>
#include <string_view>

namespace tapegrad::detail {

inline std::string quoted(std::string_view s) {
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > 80) out += "...";
  return out + "'";
}

}  // namespace tapegrad::detail
