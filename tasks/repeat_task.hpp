#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"  // Generator
#include "tasks/batch.hpp"

namespace tapegrad::tasks {

// Induction data: `length` uniformly random tokens over `symbols` symbols, then an exact
// copy of them (2 * length tokens, no separator). The model reads seq[0 : 2L-1] and every
// position t is trained to predict seq[t+1]. The targets fall in two halves:
//   first half,  positions 0 .. L-2 (targets seq[1 .. L-1]): fresh random tokens, which no
//                model can predict better than log(symbols) nats;
//   second half, positions L-1 .. 2L-2 (targets seq[L .. 2L-1], the copy): predictable by
//                looking back one period, what an induction head learns to do.
// half_targets() and tasks::evaluate_halves (tasks/evaluate.hpp) measure each half alone.
// Held-out sequences are those whose first half hashes to one bucket of kHoldoutBuckets,
// as for the sequence tasks.
class RepeatTask {
 public:
  static constexpr std::size_t kDefaultLength = 16, kDefaultSymbols = 32;
  enum class Half { first, second };

  // Throws (fail) unless length >= 2, symbols >= 2, and there are enough distinct first
  // halves (symbols^length >= 256) for the held-out bucket to be sampled from.
  RepeatTask(std::size_t length, std::size_t symbols);

  std::size_t length() const { return length_; }    // tokens in each half
  std::size_t symbols() const { return symbols_; }
  std::size_t vocab_size() const { return symbols_; }
  std::size_t context() const { return 2 * length_ - 1; }  // the last token is never read
  std::string layout() const;

  // A uniformly random first half, held out or not.
  std::vector<std::int64_t> generate(Generator& gen) const;
  std::vector<std::int64_t> sequence(const std::vector<std::int64_t>& first_half) const;
  bool is_held_out(const std::vector<std::int64_t>& first_half) const;
  std::vector<std::int64_t> sample_train(Generator& gen) const;  // rejection-sampled
  std::vector<std::int64_t> sample_eval(Generator& gen) const;

  // tokens[b] = seq[0 : 2L-1], targets[b][t] = seq[t+1] at every position.
  Batch make_batch(const std::vector<std::vector<std::int64_t>>& first_halves) const;
  Batch train_batch(std::size_t batch, Generator& gen) const;
  // `count` held-out sequences drawn from `gen`, in batches of at most `batch`.
  std::vector<Batch> eval_batches(std::size_t batch, std::size_t count, Generator& gen) const;

  // The half whose token position t (0-based, in tokens) predicts.
  Half half_of(std::size_t position) const {
    return position + 1 < length_ ? Half::first : Half::second;
  }
  // `targets` (B, context) with the positions of the other half set to kIgnore.
  Indices half_targets(const Indices& targets, Half half) const;

 private:
  std::size_t length_ = 0, symbols_ = 0;
};

}  // namespace tapegrad::tasks
