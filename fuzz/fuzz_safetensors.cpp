// libFuzzer target: arbitrary bytes as a .safetensors file through SafetensorsFile::from_bytes
// (the checks of every open), then every float tensor read as float and as double. An input
// must open or throw SafetensorsError; once open, every read of a float tensor must succeed
// (the header's checks promise its bytes are there). Any other exception, a sanitizer
// report, a hang (-timeout) or an allocation above -malloc_limit_mb is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const tapegrad::SafetensorsFile file =
        tapegrad::SafetensorsFile::from_bytes(std::move(bytes), "'fuzz input'");
    for (const tapegrad::SafetensorsTensor& t : file.tensors()) {
      if (!tapegrad::safetensors_float_dtype(t.dtype)) continue;
      std::vector<float> as_float(t.elements());
      std::vector<double> as_double(t.elements());
      file.read(t.name, as_float.data());
      file.read(t.name, as_double.data());
    }
  } catch (const tapegrad::SafetensorsError&) {
  }
  return 0;
}
