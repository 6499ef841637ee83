#pragma once
// Training checkpoints under --out: ckpt-<step>.npz (the step in at least 8 digits), each a
// model checkpoint plus the training state of nn/io/training_state (AdamW's
// moments, the batch generator, the step, the loss curve and the run's settings). Written
// atomically (temporary file, fsync, rename, fsync of the directory); the older ones are
// removed only once the new one is complete, keeping the last two.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "apps/train/options.hpp"
#include "apps/train/setup.hpp"
#include "apps/train/training.hpp"
#include "nn/io/training_state.hpp"

namespace tapegrad::train {

inline constexpr std::size_t kCheckpointsKept = 2;

std::string checkpoint_path(const std::string& dir, std::size_t step);
// The training checkpoints in `dir`, oldest first.
std::vector<std::string> list_checkpoints(const std::string& dir);
// Temporary files a killed writer left behind (they never replaced a checkpoint).
void remove_stale_temporaries(const std::string& dir);
// UsageError when `dir` holds a checkpoint of a later step than `start_step` (another run's):
// pruning keeps the latest steps, so this run's own checkpoints would be the ones removed,
// and a later --resume of `dir` would continue the other run.
void check_no_later_checkpoints(const std::string& dir, std::size_t start_step);

// Everything a training checkpoint captures.
struct TrainerState {
  const Settings& settings;
  const TaskSetup& task;
  const Transformer<float>& model;
  const Optimizers& optimizers;
  Generator& data;
  const TrainingProgress& progress;
};

// Writes ckpt-<progress.step>.npz, removing all but the last two before the write and after
// it (so two complete ones stay on disk while it is written, three at most). Throws
// std::runtime_error naming the file, the reason and the checkpoint still intact.
std::string write_training_checkpoint(const TrainerState& state);

// The parameters of a --resume checkpoint as a model; UsageError when they do not fit or
// hold NaN/Inf (naming the tensor) unless s.allow_nonfinite.
Transformer<float> load_resumed_model(const Settings& s, const ResumeSource& resume);
// The training state of a --resume checkpoint (none for a model-only file), checked
// against `model`; UsageError naming the entry when it does not fit.
std::optional<TrainingState<float>> read_training_state(const ResumeSource& resume,
                                                        const Transformer<float>& model);
// The notice for an option given on --resume with another value than the checkpoint's, which
// the run then uses: "--resume: --lr 0.002 differs from the checkpoint's 0.003; the run
// goes on with 0.002 and no longer matches an uninterrupted one".
std::string override_notice(const std::string& option, const std::string& file_value,
                            const std::string& given);
// The checkpoint's settings (the checkpoint interval and the precision included) for every
// option the user did not give; a one-line notice in `notices` for each one given with
// another value (the caller prints them once every check has passed). UsageError when the checkpoint is past
// --steps, its settings are out of the options' ranges, or --seed or --eval-size disagrees
// with it (the seed drew the weights and the data the run continues, the held-out set is
// what the run's evaluations are measured on).
void apply_checkpoint_settings(Settings& s, const TrainingState<float>& state,
                               std::vector<std::string>& notices);
// The windows the checkpoint's run trained on (a fine-tune's may be shorter than the model's
// context); none from a checkpoint written before they were recorded. UsageError when
// --context is given with another value, or the value does not fit the model.
std::optional<std::size_t> checkpoint_windows(const Settings& s, const TrainingState<float>& state,
                                              const TransformerConfig& model);
// Puts the optimisers, the batch generator and the progress where the checkpoint left them.
void restore_training(const TrainingState<float>& state, const TaskSetup& task,
                      const Transformer<float>& model, Optimizers& optimizers, Generator& data,
                      TrainingProgress& progress, const std::string& label);

}  // namespace tapegrad::train
