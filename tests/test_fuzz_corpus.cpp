// The fuzz corpus (fuzz/corpus: numpy's files, tapegrad's own, damaged ones and every input
// a fuzzer ever found a bug with) through the same readers as the libFuzzer targets, in the
// ordinary test run (and so under the sanitizer build too): each file loads or throws
// NpzError / CheckpointError / SafetensorsError, quickly.
// (hf_config: an accepted config.json also reads back the same after an export.) The fuzz targets themselves need
// clang; this keeps their regressions in every build.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "helpers.hpp"
#include "fuzz/checkpoint_records.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/io/hf_config.hpp"
#include "nn/io/hf_weights.hpp"
#include "nn/io/safetensors.hpp"
#include "test_paths.hpp"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = fs::path(TAPEGRAD_SOURCE_DIR) / "fuzz" / "corpus";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `load` on every file of corpus/<dir>; counts loads and clean rejections, and fails on
// anything else or on a file that takes over 5 s (libFuzzer's -timeout).
template <class Load>
void replay(const std::string& dir, Load load, int& loaded, int& rejected) {
  for (const auto& e : fs::directory_iterator(kCorpus / dir)) {
    INFO(e.path().string());
    const auto start = std::chrono::steady_clock::now();
    try {
      load(e.path(), slurp(e.path()));
      ++loaded;
    } catch (const NpzError&) {
      ++rejected;
    } catch (const CheckpointError&) {
      ++rejected;
    } catch (const SafetensorsError&) {
      ++rejected;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(seconds < 5.0);
  }
  Tape<float>::active().clear();
}

}  // namespace

TEST_CASE("fuzz corpus: npz and npy seeds load or throw NpzError", "[fuzz_corpus]") {
  int loaded = 0, rejected = 0;
  replay("npz", [](const fs::path&, const std::string& bytes) { load_npz_bytes(bytes); }, loaded, rejected);
  CHECK(loaded >= 4);     // numpy's savez, savez_compressed, empty; tapegrad's stored, deflated
  CHECK(rejected >= 12);  // the bad_* fixtures
  int npy_loaded = 0, npy_rejected = 0;
  replay("npy", [](const fs::path&, const std::string& bytes) { load_npy_bytes(bytes); },
         npy_loaded, npy_rejected);
  CHECK(npy_loaded >= 15);
  CHECK(npy_rejected >= 1);  // the truncated one
}

TEST_CASE("fuzz corpus: checkpoint seeds load or throw a clear error quickly", "[fuzz_corpus]") {
  int loaded = 0, rejected = 0;
  const fs::path tmp = fs::path(TAPEGRAD_BINARY_DIR) / "test_fuzz_corpus.npz";
  replay("checkpoint", [&tmp](const fs::path& path, const std::string& bytes) {
    if (bytes.rfind("PK", 0) == 0) {
      load_checkpoint<float>(path.string());
      return;
    }
    // the records format of fuzz/checkpoint_records.hpp, as fuzz_checkpoint reads it
    const fuzz::Records r = fuzz::decode_records(bytes);
    save_npz(tmp.string(), r.entries);
    if (r.flags & fuzz::kIntoExisting) {
      if (r.flags & fuzz::kAsDouble) {
        Transformer<double> model(fuzz::existing_config());
        load_checkpoint(tmp.string(), model);
      } else {
        Transformer<float> model(fuzz::existing_config());
        load_checkpoint(tmp.string(), model);
      }
    } else if (r.flags & fuzz::kAsDouble) {
      load_checkpoint<double>(tmp.string());
    } else {
      load_checkpoint<float>(tmp.string());
    }
  }, loaded, rejected);
  fs::remove(tmp);
  // tiny.npz, tiny_deflated.npz, tiny_0.rec and tiny_2.rec (float entries, loaded as float),
  // tiny_1/3.rec (float entries into a double model: widened exactly)
  CHECK(loaded >= 6);
  // huge config, 16385 layers, truncated, bit flip
  CHECK(rejected >= 4);
}

TEST_CASE("fuzz corpus: safetensors seeds open and read, or throw SafetensorsError",
          "[fuzz_corpus]") {
  int loaded = 0, rejected = 0;
  // as fuzz/fuzz_safetensors.cpp: open, then read every float tensor
  replay("safetensors", [](const fs::path&, const std::string& bytes) {
    const SafetensorsFile file = SafetensorsFile::from_bytes(bytes, "'seed'");
    for (const SafetensorsTensor& t : file.tensors()) {
      if (!safetensors_float_dtype(t.dtype)) continue;
      std::vector<double> values(t.elements());
      file.read(t.name, values.data());
    }
  }, loaded, rejected);
  CHECK(loaded >= 3);    // tapegrad's F32 and F64 files, the hand-laid halves
  CHECK(rejected >= 7);  // the bad_* near misses
}

TEST_CASE("fuzz corpus: config.json seeds import and read back after an export, or throw "
          "CheckpointError", "[fuzz_corpus]") {
  int loaded = 0, rejected = 0;
  // as fuzz/fuzz_hf_config.cpp
  replay("hf_config", [](const fs::path&, const std::string& text) {
    const HfModelConfig first = hf_config_from_json(text, "'seed'");
    CHECK(count_parameters(first.config).total() > 0);
    CHECK(hf_layout(first.config, first.model_type).model_type == first.model_type);
    const HfModelConfig again =
        hf_config_from_json(hf_config_to_json(first.config, first.kept_json), "'written back'");
    CHECK(again.config == first.config);
    CHECK(again.model_type == first.model_type);
  }, loaded, rejected);
  CHECK(loaded >= 13);  // the Hugging Face fixtures' config.json, as transformers wrote them
}
