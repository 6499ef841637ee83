// libFuzzer target: arbitrary bytes as an .npz archive through load_npz_bytes, the reader
// behind load_npz and every checkpoint load. An input must load or throw NpzError; any
// other exception, a sanitizer report, a hang (-timeout) or an allocation above
// -malloc_limit_mb is a bug. Whatever loads must survive a save/load round trip.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/round_trip.hpp"
#include "nn/io/npz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<tapegrad::NpzEntry> entries;
  try {
    entries = tapegrad::load_npz_bytes(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz input");
  } catch (const tapegrad::NpzError&) {
    return 0;
  }
  tapegrad::fuzz::require_round_trip(entries);
  return 0;
}
