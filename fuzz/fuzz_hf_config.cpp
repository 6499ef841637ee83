// libFuzzer target: arbitrary bytes as a Hugging Face config.json through
// hf_config_from_json, which must accept them or throw CheckpointError. An accepted file's
// model must be one tapegrad can size and write back: its parameter count and tensor layout
// follow from the configuration alone, and import -> export -> import gives the same
// configuration and the same model_type. Any other exception, a mismatch (abort), a
// sanitizer report, a hang or an allocation above -malloc_limit_mb is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "nn/io/checkpoint_error.hpp"
#include "nn/io/hf_config.hpp"
#include "nn/io/hf_weights.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tapegrad::HfModelConfig first;
  try {
    first = tapegrad::hf_config_from_json(text, "'fuzz input'");
  } catch (const tapegrad::CheckpointError&) {
    return 0;
  }
  (void)tapegrad::count_parameters(first.config).total();
  (void)tapegrad::hf_layout(first.config, first.model_type);
  const std::string written = tapegrad::hf_config_to_json(first.config, first.kept_json);
  const tapegrad::HfModelConfig again = tapegrad::hf_config_from_json(written, "'written back'");
  if (again.config != first.config || again.model_type != first.model_type) std::abort();
  return 0;
}
