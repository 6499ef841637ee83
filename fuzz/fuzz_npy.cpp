// libFuzzer target: arbitrary bytes as one .npy array through load_npy_bytes. Inside an
// npz the zip layer (CRC-32 of every member) keeps random mutations away from the npy
// header parser; here every mutation reaches it: magic, version, header length, the
// header dict (descr, fortran_order, shape), the payload size. Load or NpzError, nothing
// else; what loads must survive a save/load round trip.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/round_trip.hpp"
#include "nn/io/npz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tapegrad::NpzEntry entry;
  try {
    entry = tapegrad::NpzEntry(
        "x", tapegrad::load_npy_bytes(std::string_view(reinterpret_cast<const char*>(data), size),
                                      "fuzz input"));
  } catch (const tapegrad::NpzError&) {
    return 0;
  }
  tapegrad::fuzz::require_round_trip({entry});
  return 0;
}
