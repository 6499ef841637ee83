#include "tasks/repeat_task.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "autograd/errors.hpp"

namespace tapegrad::tasks {

RepeatTask::RepeatTask(std::size_t length, std::size_t symbols) : length_(length), symbols_(symbols) {
  if (length < 2 || symbols < 2)
    fail("RepeatTask", "length={} and symbols={} must both be at least 2", length, symbols);
  // symbols^length >= 256, without overflow: with fewer distinct first halves the held-out
  // bucket (1 in 16) could be empty, and sample_eval would never return
  double distinct = 1;
  for (std::size_t i = 0; i < length && distinct < 256; ++i) distinct *= double(symbols);
  if (distinct < 256)
    fail("RepeatTask", "length={} over symbols={} gives {} distinct sequences; at least 256 are "
         "needed to hold some out for evaluation", length, symbols, distinct);
}

std::string RepeatTask::layout() const {
  return fmt::format("repeat: symbols 0..{}; a sequence is {} random symbols, then the same {} "
                     "again ({} tokens; the model reads the first {})",
                     symbols_ - 1, length_, length_, 2 * length_, context());
}

std::vector<std::int64_t> RepeatTask::generate(Generator& gen) const {
  std::vector<std::int64_t> half(length_);
  for (std::int64_t& token : half) token = std::int64_t(gen.integer(symbols_));
  return half;
}

std::vector<std::int64_t> RepeatTask::sequence(const std::vector<std::int64_t>& first_half) const {
  std::vector<std::int64_t> seq = first_half;
  seq.insert(seq.end(), first_half.begin(), first_half.end());
  return seq;
}

bool RepeatTask::is_held_out(const std::vector<std::int64_t>& first_half) const {
  return hash_tokens(first_half) % kHoldoutBuckets == 0;
}

std::vector<std::int64_t> RepeatTask::sample_train(Generator& gen) const {
  for (;;) {
    std::vector<std::int64_t> half = generate(gen);
    if (!is_held_out(half)) return half;
  }
}

std::vector<std::int64_t> RepeatTask::sample_eval(Generator& gen) const {
  for (;;) {
    std::vector<std::int64_t> half = generate(gen);
    if (is_held_out(half)) return half;
  }
}

Batch RepeatTask::make_batch(const std::vector<std::vector<std::int64_t>>& first_halves) const {
  const std::size_t B = first_halves.size(), T = context();
  Batch batch;
  batch.tokens = Indices::from_shape({B, T});
  batch.targets = Indices::from_shape({B, T});
  for (std::size_t b = 0; b < B; ++b) {
    if (first_halves[b].size() != length_)
      fail("RepeatTask", "a first half of {} tokens, expected {}", first_halves[b].size(), length_);
    const std::vector<std::int64_t> seq = sequence(first_halves[b]);
    for (std::size_t t = 0; t < T; ++t) {
      batch.tokens(b, t) = seq[t];
      batch.targets(b, t) = seq[t + 1];
    }
  }
  return batch;
}

Batch RepeatTask::train_batch(std::size_t batch, Generator& gen) const {
  std::vector<std::vector<std::int64_t>> halves;
  halves.reserve(batch);
  for (std::size_t b = 0; b < batch; ++b) halves.push_back(sample_train(gen));
  return make_batch(halves);
}

std::vector<Batch> RepeatTask::eval_batches(std::size_t batch, std::size_t count,
                                            Generator& gen) const {
  std::vector<Batch> out;
  for (std::size_t done = 0; done < count; done += batch) {
    std::vector<std::vector<std::int64_t>> halves;
    for (std::size_t b = done; b < std::min(count, done + batch); ++b)
      halves.push_back(sample_eval(gen));
    out.push_back(make_batch(halves));
  }
  return out;
}

Indices RepeatTask::half_targets(const Indices& targets, Half half) const {
  if (targets.dimension() != 2 || targets.shape()[1] != context())
    fail("RepeatTask", "targets must be (B, {}), got {} dimensions", context(), targets.dimension());
  Indices out = targets;
  for (std::size_t b = 0; b < out.shape()[0]; ++b)
    for (std::size_t t = 0; t < out.shape()[1]; ++t)
      if (half_of(t) != half) out(b, t) = kIgnore;
  return out;
}

}  // namespace tapegrad::tasks
