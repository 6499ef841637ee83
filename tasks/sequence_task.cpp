#include "tasks/sequence_task.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace tapegrad::tasks {

bool SequenceTask::known(const std::string& name) {
  return name == "sort" || name == "reverse" || name == "recall";
}

SequenceTask SequenceTask::make(const std::string& name) {
  SequenceTask t;
  t.name_ = name;
  if (name == "sort" || name == "reverse") {
    t.symbols_ = 10;
    t.input_len_ = t.answer_len_ = name == "sort" ? 8 : 12;
    t.separator_ = t.symbols_;
  } else if (name == "recall") {
    // keys 0..15, values 16..25, SEP 26: k1 v1 ... k8 v8 q SEP v(q)
    t.pairs_ = 8;
    t.min_pairs_ = 8;
    t.num_keys_ = 16;
    t.symbols_ = 10;
    t.input_len_ = 2 * t.pairs_ + 1;
    t.answer_len_ = 1;
    t.separator_ = t.num_keys_ + t.symbols_;
  } else {
    throw std::invalid_argument("unknown task '" + name + "' (expected sort, reverse or recall)");
  }
  return t;
}

Example SequenceTask::generate(Generator& gen) const {
  Example ex;
  if (name_ == "recall") {
    // Distinct keys: a partial Fisher-Yates shuffle of 0..num_keys-1.
    std::vector<std::int64_t> keys(static_cast<std::size_t>(num_keys_));
    std::iota(keys.begin(), keys.end(), 0);
    for (std::size_t i = 0; i < pairs_; ++i) {
      std::size_t j = i + std::size_t(gen.integer(keys.size() - i));
      std::swap(keys[i], keys[j]);
    }
    for (std::size_t i = 0; i < pairs_; ++i) {
      ex.input.push_back(keys[i]);
      ex.input.push_back(num_keys_ + std::int64_t(gen.integer(std::uint64_t(symbols_))));
    }
    ex.input.push_back(keys[gen.integer(pairs_)]);
  } else {
    for (std::size_t i = 0; i < input_len_; ++i) {
      ex.input.push_back(std::int64_t(gen.integer(std::uint64_t(symbols_))));
    }
  }
  ex.answer = solve(ex.input);
  return ex;
}

std::vector<std::int64_t> SequenceTask::solve(const std::vector<std::int64_t>& input) const {
  if (name_ == "sort") {
    std::vector<std::int64_t> out = input;
    std::sort(out.begin(), out.end());
    return out;
  }
  if (name_ == "reverse") return {input.rbegin(), input.rend()};
  // recall: the value that follows the query key's first (only) occurrence
  std::int64_t query = input.back();
  for (std::size_t i = 0; i + 1 < input.size() - 1; i += 2) {
    if (input[i] == query) return {input[i + 1]};
  }
  throw std::invalid_argument("recall: the query key is not among the pairs");
}

bool SequenceTask::is_held_out(const std::vector<std::int64_t>& input) const {
  return hash_tokens(input) % kHoldoutBuckets == 0;
}

Example SequenceTask::sample_train(Generator& gen) const {
  for (;;) {
    Example ex = name_ == "recall" && min_pairs_ < pairs_ ? generate_recall_mixed(gen) : generate(gen);
    if (!is_held_out(ex.input)) return ex;
  }
}

Example SequenceTask::sample_eval(Generator& gen) const {
  for (;;) {
    Example ex = generate(gen);
    if (is_held_out(ex.input)) return ex;
  }
}

std::vector<std::int64_t> SequenceTask::sequence(const Example& ex) const {
  std::vector<std::int64_t> seq = ex.input;
  seq.push_back(separator_);
  seq.insert(seq.end(), ex.answer.begin(), ex.answer.end());
  return seq;
}

Batch SequenceTask::make_batch(const std::vector<Example>& examples) const {
  const std::size_t B = examples.size(), T = context();
  Batch batch;
  batch.tokens = Indices::from_shape({B, T});
  batch.targets = Indices::from_shape({B, T});
  for (std::size_t b = 0; b < B; ++b) {
    std::vector<std::int64_t> seq = sequence(examples[b]);
    for (std::size_t t = 0; t < T; ++t) {
      batch.tokens(b, t) = seq[t];
      // Position t predicts seq[t + 1]; the answer occupies seq[input_len + 1 ...].
      batch.targets(b, t) = t >= input_len_ ? seq[t + 1] : kIgnore;
    }
  }
  return batch;
}

Batch SequenceTask::train_batch(std::size_t batch, Generator& gen) const {
  std::vector<Example> examples;
  examples.reserve(batch);
  for (std::size_t b = 0; b < batch; ++b) examples.push_back(sample_train(gen));
  return make_train_batch(examples);
}

Batch SequenceTask::train_batch(std::size_t batch, Generator& gen, std::size_t step) const {
  std::vector<Example> examples;
  examples.reserve(batch);
  for (std::size_t b = 0; b < batch; ++b) examples.push_back(sample_train(gen, step));
  return make_train_batch(examples);
}

std::vector<TokenRange> SequenceTask::token_ranges() const {
  if (name_ == "recall")
    return {{"key", 0, num_keys_ - 1},
            {"value", num_keys_, num_keys_ + symbols_ - 1},
            {"separator", separator_, separator_}};
  return {{"symbol", 0, symbols_ - 1}, {"separator", separator_, separator_}};
}

std::string SequenceTask::layout() const {
  std::string ids;
  for (const TokenRange& r : token_ranges())
    ids += (ids.empty() ? "" : ", ") + r.role + (r.first == r.last ? " " + std::to_string(r.first)
                                                 : "s " + std::to_string(r.first) + ".." +
                                                       std::to_string(r.last));
  const std::string input = name_ == "recall" ? std::to_string(pairs_) + " (key, value) pairs "
                                                "then a query key"
                                              : std::to_string(input_len_) + " symbols";
  const std::string answer = name_ == "sort"      ? "the symbols sorted ascending"
                             : name_ == "reverse" ? "the symbols reversed"
                                                  : "the query key's value";
  return name_ + ": " + ids + "; a sequence is " + input + ", SEP, " + answer + " (" +
         std::to_string(input_len_ + 1 + answer_len_) + " tokens; the model reads the first " +
         std::to_string(context()) + ")";
}

std::string SequenceTask::format(const std::vector<std::int64_t>& tokens) const {
  std::ostringstream out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i) out << ' ';
    std::int64_t t = tokens[i];
    if (t == separator_) {
      out << '|';
    } else if (name_ == "recall") {
      // keys print as letters a..p, values as digits 0..9
      if (t < num_keys_) out << char('a' + t);
      else out << (t - num_keys_);
    } else {
      out << t;
    }
  }
  return out.str();
}

}  // namespace tapegrad::tasks
