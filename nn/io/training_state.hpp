#pragma once
// A training checkpoint: a model checkpoint (nn/io/checkpoint) plus what a run needs to go on
// exactly where it stopped, under the reserved prefix `__train__.`:
//   format            int64 ()            3 (1: written before the precision was recorded;
//                                         2: before the caller's settings recorded
//                                         everything that shapes its data)
//   step              int64 ()            optimiser steps done
//   total_steps       int64 ()            the run's length (the schedule ends there)
//   m.<parameter>     T (parameter shape) AdamW's first moment, for every parameter
//   v.<parameter>     T (parameter shape) AdamW's second moment (>= 0)
//   t.<parameter>     int64 ()            that parameter's AdamW step count (<= step)
//   rng.<name>        int64 (n,)          a Generator's engine state, word by word
//   loss, lr          float64 (step,)     the loss and learning rate of every step done
//   setting.<name>    float64 or int64 () the run's settings (the caller's names)
//   precision         int64 ()            the matrix products' precision, the index of its
//                                         name in matmul_precision_names() (format 2 on; a
//                                         format-1 file stands for f32)
// Model-only readers (load_checkpoint, examples/generate) skip these entries, so a training
// checkpoint is also a model checkpoint. The reader treats the file as hostile: every
// name, dtype, shape and count is checked, the moments must be finite, and nothing is
// returned unless all of it fits.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nn/io/checkpoint.hpp"
#include "nn/optim.hpp"
#include "ops/precision.hpp"

namespace tapegrad {

// The training state's format, the format that first recorded the precision, and the one
// from which a caller's settings hold everything that shapes its data (a caller requires
// those settings of a file of that format and stands in for them in an older one).
inline constexpr std::int64_t kTrainingFormat = 3;
inline constexpr std::int64_t kPrecisionSince = 2;
inline constexpr std::int64_t kDataSettingsSince = 3;

template <class T>
struct TrainingState {
  std::int64_t format = kTrainingFormat;  // the format the file was written in
  std::size_t step = 0;
  std::size_t total_steps = 0;
  // AdamW's state of every parameter, by the parameter's name.
  std::map<std::string, typename AdamW<T>::State> moments;
  std::map<std::string, std::vector<std::uint64_t>> generators;
  std::vector<double> losses, lrs;  // one per step done
  std::map<std::string, double> real_settings;
  std::map<std::string, std::int64_t> integer_settings;
  // The float32 matrix products' precision: part of the arithmetic the run continues.
  MatmulPrecision precision = MatmulPrecision::f32;
};

// A Generator's state as words, and back. restore_generator throws CheckpointError naming
// `label` when the words are not a state this standard library wrote.
std::vector<std::uint64_t> generator_state(Generator& gen);
void restore_generator(Generator& gen, const std::vector<std::uint64_t>& words,
                       const std::string& label);

// The moments of every parameter of `model` that one of `optimizers` updates, by name;
// and back into the optimisers (every parameter they hold must be in `moments`).
template <class T>
std::map<std::string, typename AdamW<T>::State> collect_moments(
    const Module<T>& model, const std::vector<const AdamW<T>*>& optimizers);
template <class T>
void restore_moments(const std::map<std::string, typename AdamW<T>::State>& moments,
                     const Module<T>& model, const std::vector<AdamW<T>*>& optimizers,
                     const std::string& label);

template <class T>
std::vector<NpzEntry> training_state_entries(const TrainingState<T>& state);
// True when `entries` hold a training state (a `__train__.format` entry).
bool holds_training_state(const std::vector<NpzEntry>& entries);
// Reads and checks the training state of a checkpoint whose parameters are `model`'s.
// CheckpointError naming `label` and the entry for anything that does not fit.
template <class T>
TrainingState<T> training_state_from_entries(const std::vector<NpzEntry>& entries,
                                             const Module<T>& model, const std::string& label);

#define TAPEGRAD_TRAINING_STATE_EXTERN(T)                                                    \
  extern template std::map<std::string, typename AdamW<T>::State> collect_moments(          \
      const Module<T>&, const std::vector<const AdamW<T>*>&);                                \
  extern template void restore_moments(const std::map<std::string, typename AdamW<T>::State>&, \
                                       const Module<T>&, const std::vector<AdamW<T>*>&,      \
                                       const std::string&);                                  \
  extern template std::vector<NpzEntry> training_state_entries(const TrainingState<T>&);     \
  extern template TrainingState<T> training_state_from_entries(                              \
      const std::vector<NpzEntry>&, const Module<T>&, const std::string&);
TAPEGRAD_TRAINING_STATE_EXTERN(float)
TAPEGRAD_TRAINING_STATE_EXTERN(double)
#undef TAPEGRAD_TRAINING_STATE_EXTERN

}  // namespace tapegrad
