#pragma once
// The training loop of train_tiny_transformer: AdamW (weight decay on matrices only), the
// warm-up + cosine schedule, one function per optimiser step, held-out evaluation every
// --eval-every steps and a hook after every step (where checkpoints are written).
#include <cmath>
#include <cstddef>
#include <functional>
#include <vector>

#include "apps/train/data_parallel.hpp"
#include "apps/train/metrics.hpp"
#include "apps/train/options.hpp"
#include "apps/train/setup.hpp"
#include "nn/optim.hpp"
#include "nn/transformer.hpp"

namespace tapegrad::train {

// Weight decay on matrices only (embeddings, attention and MLP weights), as nanoGPT:
// decaying norm gains and biases only pulls them toward 0 for nothing.
class Optimizers {
 public:
  Optimizers(const Transformer<float>& model, const Settings& s);
  void set_lr(double lr);
  void step();
  const std::vector<Tensor<float>>& parameters() const { return all_; }
  AdamW<float>& decayed() { return decayed_; }
  AdamW<float>& plain() { return plain_; }
  const AdamW<float>& decayed() const { return decayed_; }
  const AdamW<float>& plain() const { return plain_; }

 private:
  std::vector<Tensor<float>> all_;
  AdamW<float> decayed_, plain_;
};

// What a run has done so far.
struct TrainingProgress {
  std::size_t step = 0;  // optimiser steps done
  std::vector<LossRecord> losses;
  std::size_t tokens_seen = 0;
  double train_seconds = 0;
  // CPU time of all threads while training: on a machine shared with other work it tells
  // how long the run would take alone (with one thread).
  double train_cpu_seconds = 0;
  // Training checkpoints this process wrote: how many, their total write time (serialise,
  // write, fsync, rename) and the size of the last one.
  std::size_t checkpoints_written = 0;
  double checkpoint_seconds = 0;
  std::size_t checkpoint_bytes = 0;
  // A mixture-of-experts model's raw auxiliary losses at the last step (NaN for a dense
  // model): reported beside, never inside, the LM loss.
  double last_moe_aux = std::nan("");
  double last_moe_z = std::nan("");
  // Per layer, the fraction of expert choices the last step dropped over capacity (0 for
  // a dense layer); evaluation never drops, so the evals print this beside the load.
  std::vector<double> last_moe_dropped;
};

// The parts of a step's training loss beyond the LM loss train_step returns: the raw
// auxiliary losses and, per layer, the fraction of choices dropped over capacity.
struct MoEStepLosses {
  double aux = 0, z = 0;
  std::vector<double> dropped;
};

// A batch's losses as accumulate_gradients computed them (doubles, for the log).
struct AccumulatedLosses {
  double lm = 0, aux = 0, z = 0, total = 0;
  std::vector<double> dropped;  // per layer (0 for a dense one)
};

// Leaves in the parameters' gradients the gradient of the training loss of `batch` (its
// mean over the batch's loss positions, the LM loss plus, for a mixture of experts, the
// auxiliary losses), computed over `micro_batches` equal slices of its rows one after
// another (gradient accumulation: the activations of one slice at a time). Each slice's
// training loss is weighted by its share of the batch's loss positions (1/n of them each
// when no position counts) before its backward, so that the gradients summed in the
// parameters are the whole batch's, to rounding; the losses returned are weighted the same
// way, lm being the whole batch's LM loss. One slice is training_loss and backward, as ever.
// A mixture of experts' auxiliary losses, capacity and dropped fractions are each slice's
// own (weighted), as trainers that accumulate have them. With stop_at_nonfinite, a slice
// whose loss is not finite ends it before its backward, with every gradient dropped, and
// its total is returned. micro_batches must divide the batch's rows (UsageError otherwise).
template <class T>
AccumulatedLosses accumulate_gradients(Transformer<T>& model, const tasks::Batch& batch,
                                       std::size_t micro_batches, bool stop_at_nonfinite = true);

// One optimiser step on `batch` at learning rate `lr` (the gradient norm clipped to `clip`
// unless 0), its gradient accumulated over `micro_batches` slices (accumulate_gradients).
// The gradient is that of the training loss (the LM loss plus, for a mixture of
// experts, the auxiliary losses); the value returned is the LM loss before the update, and
// `moe` (when given) receives the auxiliary losses. A non-finite loss returns at once, with
// the parameters untouched.
// With `ranks`, `batch` is this rank's shard and the loss returned the global batch's.
double train_step(Transformer<float>& model, Optimizers& opt, const tasks::Batch& batch, double lr,
                  double clip, DataParallel* ranks = nullptr, MoEStepLosses* moe = nullptr,
                  std::size_t micro_batches = 1);

enum class TrainOutcome { finished, diverged, stopped };

// Everything the loop reads or advances.
struct TrainingRun {
  const Settings& settings;
  const TaskSetup& task;
  const EvalData& eval;
  Transformer<float>& model;
  Optimizers& optimizers;
  Generator& data;  // the training batches' stream
  // Called after every completed step; returns true to stop the run there.
  std::function<bool(const TrainingProgress&)> after_step;
  // Set in a data-parallel run: each rank trains on its shard of every batch.
  DataParallel* ranks = nullptr;
};

// Trains from progress.step up to settings.steps. Prints a one-line diagnosis on stderr
// when the loss goes non-finite (TrainOutcome::diverged).
TrainOutcome run_training(TrainingRun& run, TrainingProgress& progress);

}  // namespace tapegrad::train
