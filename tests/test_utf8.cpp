// text/utf8: the one UTF-8 decoder (what becomes U+FFFD) and encoder that the tasks, the
// tokenizers and the programs share.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "text/utf8.hpp"

using namespace tapegrad::text;

TEST_CASE("utf8: decoding and encoding round trip", "[utf8]") {
  std::string s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z";  // a é € 😀 z
  std::vector<std::uint32_t> cps = decode_utf8(s);
  CHECK(cps == std::vector<std::uint32_t>{0x61, 0xe9, 0x20ac, 0x1f600, 0x7a});
  CHECK(encode_utf8(cps) == s);
  // a lone continuation byte and a truncated sequence become U+FFFD
  CHECK(decode_utf8("a\x80" "b") == std::vector<std::uint32_t>{0x61, 0xfffd, 0x62});
}

// Unicode's "maximal subpart" practice (Python's errors="replace"): one U+FFFD for the
// longest prefix of a valid sequence that breaks off, one per byte that starts none.
TEST_CASE("utf8: invalid bytes decode to one U+FFFD per maximal invalid subpart", "[utf8]") {
  const std::uint32_t bad = 0xfffd;
  CHECK(decode_utf8("\xe2\x82") == std::vector<std::uint32_t>{bad});
  CHECK(decode_utf8("\xe2\x82" "a") == std::vector<std::uint32_t>{bad, 0x61});
  CHECK(decode_utf8("\xf0\x9f\x98" "\xf0\x9f\x98\x80") == std::vector<std::uint32_t>{bad, 0x1f600});
  // bytes that start no sequence: each its own
  CHECK(decode_utf8("\xc0\xaf") == std::vector<std::uint32_t>{bad, bad});          // overlong
  CHECK(decode_utf8("\xed\xa0\x80") == std::vector<std::uint32_t>{bad, bad, bad});  // a surrogate
  CHECK(decode_utf8("\xf4\x90\x80\x80") == std::vector<std::uint32_t>{bad, bad, bad, bad});  // > U+10FFFF
  // the same reading as replace_invalid_utf8, which shows decoded bytes
  for (const std::string s : {"a\xe2\x82z", "\xf1\x80\x80", "\xe0\x80\xaf", "x\xff\xfe", "\xc3"})
    CHECK(encode_utf8(decode_utf8(s)) == replace_invalid_utf8(s));
  std::size_t invalid = 0;
  decode_utf8("\xe2\x82" "a\x80", &invalid);
  CHECK(invalid == 3);  // bytes, not replacements
}

TEST_CASE("utf8: utf8_length is the length append_utf8 writes", "[utf8]") {
  for (std::uint32_t cp : {0x0u, 0x7fu, 0x80u, 0x7ffu, 0x800u, 0xffffu, 0x10000u, 0x10ffffu}) {
    std::string out;
    append_utf8(out, cp);
    CHECK(out.size() == utf8_length(cp));
    CHECK(decode_utf8(out) == std::vector<std::uint32_t>{cp});
  }
}
