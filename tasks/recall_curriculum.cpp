// The recall task's training options: fewer distinct pairs and a growing curriculum,
// chained inputs and dense targets (each documented in tasks/sequence_task.hpp). Evaluation
// inputs never use them.
#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "tasks/sequence_task.hpp"

namespace tapegrad::tasks {

void SequenceTask::set_recall_min_pairs(std::size_t min_pairs) {
  if (name_ != "recall" || min_pairs < 1 || min_pairs > pairs_) {
    throw std::invalid_argument("recall min pairs must be in [1, 8] (recall task only)");
  }
  min_pairs_ = min_pairs;
}

Example SequenceTask::generate_recall_mixed(Generator& gen) const {
  std::size_t n = min_pairs_ + std::size_t(gen.integer(pairs_ - min_pairs_ + 1));
  return generate_recall_pairs(gen, n);
}

Example SequenceTask::generate_recall_pairs(Generator& gen, std::size_t n) const {
  if (name_ != "recall" || n < 1 || n > pairs_) {
    throw std::invalid_argument("recall pairs must be in [1, 8] (recall task only)");
  }
  std::vector<std::int64_t> keys(static_cast<std::size_t>(num_keys_));
  std::iota(keys.begin(), keys.end(), 0);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t j = i + std::size_t(gen.integer(keys.size() - i));
    std::swap(keys[i], keys[j]);
  }
  std::vector<std::int64_t> values(n);
  for (auto& v : values) v = num_keys_ + std::int64_t(gen.integer(std::uint64_t(symbols_)));
  // slots: every pair once, then repeats, shuffled
  std::vector<std::size_t> slots(pairs_);
  for (std::size_t i = 0; i < pairs_; ++i) slots[i] = i < n ? i : std::size_t(gen.integer(n));
  for (std::size_t i = pairs_ - 1; i > 0; --i) std::swap(slots[i], slots[std::size_t(gen.integer(i + 1))]);
  Example ex;
  for (std::size_t s : slots) {
    ex.input.push_back(keys[s]);
    ex.input.push_back(values[s]);
  }
  ex.input.push_back(keys[gen.integer(n)]);
  ex.answer = solve(ex.input);
  return ex;
}

void SequenceTask::set_recall_grow_steps(std::size_t grow_steps) {
  if (name_ != "recall") throw std::invalid_argument("recall grow steps: recall task only");
  grow_steps_ = grow_steps;
}

std::size_t SequenceTask::recall_max_pairs(std::size_t step) const {
  if (grow_steps_ == 0 || step >= grow_steps_) return pairs_;
  std::size_t stage = std::max<std::size_t>(1, grow_steps_ / (pairs_ + 1 - min_pairs_));
  return std::min(pairs_, min_pairs_ + step / stage);
}

void SequenceTask::set_recall_dense(bool dense) {
  if (name_ != "recall") throw std::invalid_argument("recall dense loss: recall task only");
  dense_ = dense;
}

Example SequenceTask::sample_train(Generator& gen, std::size_t step) const {
  if (name_ != "recall" || (grow_steps_ == 0 && chain_fraction_ == 0)) return sample_train(gen);
  const std::size_t hi = recall_max_pairs(step);
  for (;;) {
    Example ex;
    if (chain_fraction_ > 0 && gen.uniform() < chain_fraction_) {
      ex = generate_recall_chain(gen);
    } else {
      std::size_t n = min_pairs_ + std::size_t(gen.integer(hi - min_pairs_ + 1));
      ex = n == pairs_ ? generate(gen) : generate_recall_pairs(gen, n);
    }
    if (!is_held_out(ex.input)) return ex;
  }
}

void SequenceTask::set_recall_chain_fraction(double fraction) {
  if (name_ != "recall" || !(fraction >= 0 && fraction <= 1)) {
    throw std::invalid_argument("recall chain fraction must be in [0, 1] (recall task only)");
  }
  chain_fraction_ = fraction;
}

Example SequenceTask::generate_recall_chain(Generator& gen) const {
  Example ex;
  std::int64_t key = std::int64_t(gen.integer(std::uint64_t(num_keys_)));
  for (std::size_t i = 0; i < pairs_; ++i) {
    ex.input.push_back(key);
    ex.input.push_back(num_keys_ + std::int64_t(gen.integer(std::uint64_t(symbols_))));
    key = (key + kRecallChainStep) % num_keys_;
  }
  ex.input.push_back(ex.input[2 * gen.integer(pairs_)]);
  ex.answer = solve(ex.input);
  return ex;
}

bool SequenceTask::is_recall_chain(const std::vector<std::int64_t>& input) const {
  if (name_ != "recall" || input.size() != input_len_) return false;
  for (std::size_t j = 0; j + 1 < pairs_; ++j) {
    if (input[2 * j + 2] != (input[2 * j] + kRecallChainStep) % num_keys_) return false;
  }
  return true;
}

Batch SequenceTask::make_train_batch(const std::vector<Example>& examples) const {
  Batch batch = make_batch(examples);
  if (!dense_ && chain_fraction_ == 0) return batch;
  for (std::size_t b = 0; b < examples.size(); ++b) {
    const std::vector<std::int64_t>& in = examples[b].input;
    if (chain_fraction_ > 0 && is_recall_chain(in)) {
      // value position 2j + 1 predicts the next key, in[2j + 2]
      for (std::size_t j = 0; j + 1 < pairs_; ++j) batch.targets(b, 2 * j + 1) = in[2 * j + 2];
    }
    if (!dense_) continue;
    // keys at 0, 2, ..., 2 * (pairs - 1); position 2j predicts in[2j + 1], its value
    for (std::size_t j = 1; j < pairs_; ++j) {
      bool repeated = false;
      for (std::size_t i = 0; i < j && !repeated; ++i) repeated = in[2 * i] == in[2 * j];
      if (repeated) batch.targets(b, 2 * j) = in[2 * j + 1];
    }
    // the query is a repeated key too: its position (input_len - 1) learns the answer
    batch.targets(b, input_len_ - 1) = examples[b].answer[0];
  }
  return batch;
}

}  // namespace tapegrad::tasks
