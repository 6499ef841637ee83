// format_bytes (platform/format_bytes): the one byte formatter of the programs, the Python
// module's MemoryError and the file-size limits. Whole numbers of a unit read whole, so a
// limit reads as it was set; three significant digits otherwise, never an exponent.
#include <catch2/catch.hpp>

#include "platform/format_bytes.hpp"

using namespace tapegrad;

TEST_CASE("format_bytes: bytes below 1 KiB, then the largest unit at least 1", "[format_bytes]") {
  CHECK(format_bytes(0) == "0 bytes");
  CHECK(format_bytes(1023) == "1023 bytes");
  CHECK(format_bytes(1024) == "1 KiB");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(4.0 * 1024 * 1024) == "4 MiB");
  CHECK(format_bytes(64.0 * 1024 * 1024) == "64 MiB");
  CHECK(format_bytes(12.34 * 1024 * 1024) == "12.3 MiB");
  CHECK(format_bytes(1.5 * 1024 * 1024 * 1024) == "1.5 GiB");
  CHECK(format_bytes(3.804 * 1024 * 1024 * 1024) == "3.8 GiB");
}

TEST_CASE("format_bytes: no exponent, and past EiB the number grows", "[format_bytes]") {
  CHECK(format_bytes(1000.0 * 1024) == "1000 KiB");
  CHECK(format_bytes(768.0 * 1024 * 1024) == "768 MiB");
  CHECK(format_bytes(2048.0 * 1024 * 1024 * 1024 * 1024 * 1024 * 1024) == "2048 EiB");
}
