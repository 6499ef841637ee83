#pragma once
// Checkpoints: every parameter plus the model's configuration in one .npz (nn/io/npz) that
// numpy.load reads. Keys are the parameter names (`blocks.0.attn.Wq`); the configuration
// sits under the reserved prefix `__config__.` as 0-d entries: `format`, then one entry
// per field of nn/config.hpp under the field's name: sizes, flags and choices (the index of
// the choice's name) as int64, the seed as the int64 bit pattern, reals as float64
// (attention_scale NaN = the default 1/sqrt(head_dim)).
//
// The schema is the field list itself: each field names the format that first stored it
// (`since`) and the value older files stand for (`old`). This build writes format
// kCheckpointFormat, the newest `since`. A file of format F must hold every field with
// since <= F; a field it predates takes its `old` value (a file may hold such a field
// anyway, as format-2 files written just before format 3 do: it is read). A file newer
// than this build, or a `__config__.` entry that is neither a field nor one of
// kConfigExtras, is an error naming it. tests/fixtures/checkpoints/ holds a file of every
// format, each of which must load. Execution fields (FieldRole::execution: how a run
// computes, not what) are neither written nor read: a model read from a file has their
// defaults, and an entry of one in a file is ignored.
//
// Saving is atomic (save_npz). Loading reads and checks everything before it writes a
// single value, so a failed load leaves the model as it was.
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/io/checkpoint_error.hpp"  // CheckpointError, what the loaders throw
#include "nn/io/finite_weights.hpp"  // nonfinite_value: what loaders refuse
#include "nn/module.hpp"
#include "nn/io/npz.hpp"
#include "nn/transformer.hpp"

namespace tapegrad {

inline constexpr const char* kConfigPrefix = "__config__.";
inline constexpr std::int64_t kCheckpointFormat = kNewestFieldFormat;
// What programs store under the config prefix beside the model's fields: the task a model
// was trained on and a text task's characters or BPE tokenizer (kTaskKey, kVocabKey and
// kTokenizerKey in tasks/checkpoint_entries.hpp).
inline constexpr std::array<const char*, 3> kConfigExtras = {"train_task", "text_vocab",
                                                             "text_tokenizer"};
// A training checkpoint's optimiser, generator and progress entries (nn/io/training_state):
// reserved like the config's, so model-only loaders skip them.
inline constexpr const char* kTrainingPrefix = "__train__.";

// The config as npz entries (`__config__.*`) and back. config_from_entries throws
// CheckpointError naming `label` if the format is unknown, an entry is missing, unknown,
// has the wrong dtype or shape, or the config does not validate.
std::vector<NpzEntry> config_entries(const TransformerConfig& config);
TransformerConfig config_from_entries(const std::vector<NpzEntry>& entries,
                                  const std::string& label);

// Parameters of any module (and `extra` entries, e.g. a config) -> `path`.
template <class T>
void save_parameters(const std::string& path, const Module<T>& module,
                     const std::vector<NpzEntry>& extra = {});
// Copies every parameter of `module` from `path`. The file must hold exactly the
// module's names (entries under `__config__.` aside), each with its shape and dtype T,
// except that float32 loads into a double model by default, widened exactly (so a model
// trained in float can be gradient-checked in double); float64 into float is refused.
template <class T>
void load_parameters(const std::string& path, Module<T>& module);

// save_parameters(path, model, config_entries(model.config()))
template <class T>
void save_checkpoint(const std::string& path, const Transformer<T>& model);
// A new Transformer built from the file's config, with the file's parameters; the file's
// counts, names, shapes and dtypes are checked against the config's parameter plan before
// the model is built (nn/io/weight_loader.hpp).
template <class T>
Transformer<T> load_checkpoint(const std::string& path);
// The same from the file's entries already read (`path` names them in errors), for a caller
// that also reads the entries beside the model.
template <class T>
Transformer<T> checkpoint_model(const std::vector<NpzEntry>& entries, const std::string& path);
// Into an existing model: its architecture (the config's fields of that role) must equal the
// file's; the model keeps its own initialisation and objective fields, which the weights do
// not depend on.
template <class T>
void load_checkpoint(const std::string& path, Transformer<T>& model);
TransformerConfig read_checkpoint_config(const std::string& path);

#define TAPEGRAD_CHECKPOINT_EXTERN(T)                                                      \
  extern template void save_parameters(const std::string&, const Module<T>&,              \
                                       const std::vector<NpzEntry>&);                      \
  extern template void load_parameters(const std::string&, Module<T>&);                    \
  extern template void save_checkpoint(const std::string&, const Transformer<T>&);             \
  extern template Transformer<T> load_checkpoint(const std::string&);                          \
  extern template Transformer<T> checkpoint_model(const std::vector<NpzEntry>&, const std::string&); \
  extern template void load_checkpoint(const std::string&, Transformer<T>&);
TAPEGRAD_CHECKPOINT_EXTERN(float)
TAPEGRAD_CHECKPOINT_EXTERN(double)
#undef TAPEGRAD_CHECKPOINT_EXTERN

}  // namespace tapegrad
