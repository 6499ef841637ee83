// libFuzzer target: the Transformer checkpoint loader (nn/io/checkpoint). load_checkpoint takes a
// path, so each input is written to a temporary file (in /dev/shm when there is one) and
// loaded from there: read_checkpoint_config, load_checkpoint<T>(path) building a model
// from the file's config, or load_checkpoint(path, model) into an existing one. The input
// is a raw checkpoint file (starting with "PK") or the records format of
// fuzz/checkpoint_records.hpp, which reaches the config and parameter checks without
// having to keep zip CRCs intact. A file whose model loads also has its training state
// (nn/io/training_state: AdamW's moments, generator states, the step and the loss curve)
// read against that model when it holds one. Allowed outcomes: a load, NpzError or
// CheckpointError.
// A hostile config must not build a giant model (-malloc_limit_mb, -rss_limit_mb).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz/checkpoint_records.hpp"
#include "fuzz/round_trip.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/io/training_state.hpp"

using namespace tapegrad;

namespace {

// One file per fuzzing process, removed when it exits normally.
struct TempFile {
  std::string path;
  TempFile() {
    const std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path = dir + "/tapegrad_fuzz_checkpoint_" + std::to_string(::getpid()) + ".npz";
  }
  ~TempFile() { std::remove(path.c_str()); }
  void write(std::string_view bytes) const {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) fuzz::violated("cannot create " + path);
    const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    if (std::fclose(f) != 0 || !ok) fuzz::violated("cannot write " + path);
  }
};

template <class T>
Transformer<T>& existing_model() {
  static Transformer<T> model(fuzz::existing_config());
  return model;
}

// What a training state that loaded must satisfy: a loss and a rate per step done, and
// moments that AdamW accepts.
template <class T>
void check_training_state(const std::string& path, const Transformer<T>& model) {
  const std::vector<NpzEntry> entries = load_npz(path);
  if (!holds_training_state(entries)) return;
  const TrainingState<T> s = training_state_from_entries<T>(entries, model, path);
  if (s.step > s.total_steps || s.losses.size() != s.step || s.lrs.size() != s.step)
    fuzz::violated("a training state that loaded has inconsistent counts");
  AdamW<T> opt(model.parameters());
  restore_moments<T>(s.moments, model, {&opt}, path);
}

template <class T>
void load(const std::string& path, bool into_existing) {
  if (into_existing) {
    Transformer<T>& model = existing_model<T>();
    load_checkpoint(path, model);
    if (model.config().vocab != fuzz::existing_config().vocab)
      fuzz::violated("loading changed the existing model's architecture");
    check_training_state(path, model);
    return;
  }
  Transformer<T> model = load_checkpoint<T>(path);
  // what loaded must describe itself: its config validates and matches the file's
  model.config().validate();
  if (model.config() != read_checkpoint_config(path))
    fuzz::violated("the model's config differs from the file's");
  check_training_state(path, model);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const TempFile file;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::uint8_t flags = 0;
  if (in.substr(0, 2) == "PK") {
    file.write(in);
  } else {
    fuzz::Records r = fuzz::decode_records(in);
    flags = r.flags;
    std::string bytes;
    try {
      bytes = save_npz_bytes(r.entries);
    } catch (const NpzError&) {
      return 0;  // names save_npz refuses (empty, duplicate, '/'): not a checkpoint we could write
    }
    file.write(bytes);
  }
  try {
    read_checkpoint_config(file.path);
  } catch (const NpzError&) {
  } catch (const CheckpointError&) {
  }
  try {
    if (flags & fuzz::kAsDouble)
      load<double>(file.path, flags & fuzz::kIntoExisting);
    else
      load<float>(file.path, flags & fuzz::kIntoExisting);
  } catch (const NpzError&) {
  } catch (const CheckpointError&) {
  }
  return 0;
}
