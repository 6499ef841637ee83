#pragma once
// The sequence tasks (sort, reverse, recall), laid out for a decoder-only model as
//     input tokens, SEP, answer tokens
// The model reads seq[0 : L-1] and is trained to predict seq[1 : L]; only the positions
// whose target is an answer token carry loss (the others hold kIgnore). Held-out
// evaluation inputs are disjoint from training inputs: an input belongs to the held-out
// side exactly when its hash falls in one bucket of kHoldoutBuckets, and training samples
// are drawn only from the other buckets. Recall's training options (curriculum, dense
// loss, chained inputs) are in tasks/recall_curriculum.cpp.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"  // Generator
#include "tasks/batch.hpp"

namespace tapegrad::tasks {

struct Example {
  std::vector<std::int64_t> input;
  std::vector<std::int64_t> answer;
};

// A run of token ids with one role in a task's vocabulary: ids first..last, inclusive.
struct TokenRange {
  std::string role;  // "symbol", "key", "value" or "separator"
  std::int64_t first, last;
};

class SequenceTask {
 public:
  // name: "sort" (8 tokens over 10 symbols -> the same tokens sorted ascending),
  // "reverse" (12 tokens over 10 symbols -> reversed), "recall" (8 key-value pairs with
  // distinct keys, then a query key taken from them -> its value). Throws
  // std::invalid_argument for any other name.
  static SequenceTask make(const std::string& name);
  static bool known(const std::string& name);
  static std::vector<std::string> names() { return {"sort", "reverse", "recall"}; }

  const std::string& name() const { return name_; }
  std::size_t input_len() const { return input_len_; }
  std::size_t answer_len() const { return answer_len_; }
  std::int64_t separator() const { return separator_; }
  std::size_t vocab_size() const { return std::size_t(separator_) + 1; }
  // The token layout, what a caller needs to build the model's input by hand:
  //   sort, reverse: symbols 0..9, SEP 10; sort reads 8 symbols, reverse 12, and the
  //                  answer is as many symbols;
  //   recall:        keys 0..15, values 16..25, SEP 26; the input is 8 (key, value)
  //                  pairs then a query key (17 tokens), the answer its value.
  // A full sequence is input, SEP, answer (sequence()); the model reads all of it but the
  // last token. token_ranges() lists the ranges in id order, covering 0..vocab_size()-1;
  // layout() says the same in one line.
  std::vector<TokenRange> token_ranges() const;
  std::string layout() const;
  // The model's input length: input + SEP + answer, minus the last token (never read).
  std::size_t context() const { return input_len_ + answer_len_; }

  // A uniformly random example, held out or not.
  Example generate(Generator& gen) const;
  // The correct answer for an input (sorted, reversed, or the queried value).
  std::vector<std::int64_t> solve(const std::vector<std::int64_t>& input) const;
  // True when the input is reserved for evaluation (its hash picks bucket 0).
  bool is_held_out(const std::vector<std::int64_t>& input) const;
  // rejection-samples a non-held-out input from the training distribution (generate(),
  // or for recall with a curriculum, generate_recall_mixed())
  Example sample_train(Generator& gen) const;
  Example sample_eval(Generator& gen) const;   // rejection-samples a held-out input

  std::vector<std::int64_t> sequence(const Example& ex) const;  // input, SEP, answer
  // tokens[b] = seq[0 : L-1]; targets[b][t] = seq[t+1] on answer positions, else kIgnore.
  Batch make_batch(const std::vector<Example>& examples) const;
  // Training inputs from sample_train(gen) (no chained inputs, no growing curriculum),
  // with the training targets of make_train_batch.
  Batch train_batch(std::size_t batch, Generator& gen) const;
  // The training batch of optimiser step `step` (0-based), what the trainer uses: for
  // recall the inputs come from sample_train(gen, step) (growing curriculum, chained
  // inputs) and carry make_train_batch's extra targets.
  Batch train_batch(std::size_t batch, Generator& gen, std::size_t step) const;
  // The first position of tokens whose target is answer[0] (= input_len).
  std::size_t first_answer_position() const { return input_len_; }

  std::string format(const std::vector<std::int64_t>& tokens) const;  // "3 1 4 1 5"

  // recall only: training inputs hold n distinct pairs, n uniform in [min_pairs, 8], each
  // shown at least once and the 8 slots filled with repeats in random order. Fewer
  // distractors give the key-matching attention a gradient long before it works on 8
  // distinct pairs, which shortens the plateau (see docs/TRAINING.md). The evaluation
  // inputs always hold 8 distinct pairs, so they stay disjoint from any repeated-pair
  // training input. min_pairs = 8 (the default) trains on the evaluation distribution.
  void set_recall_min_pairs(std::size_t min_pairs);
  std::size_t recall_min_pairs() const { return min_pairs_; }
  Example generate_recall_mixed(Generator& gen) const;
  // recall only: exactly n distinct pairs (1 <= n <= 8) in the 8 slots, each shown at
  // least once, the other slots repeats of them (a repeated key keeps its value), in
  // random order; the query is one of the n keys, uniformly.
  Example generate_recall_pairs(Generator& gen, std::size_t n) const;

  // recall only: a growing curriculum. Over the first grow_steps optimiser steps the
  // largest number of distinct pairs in a training input rises in equal stages from
  // recall_min_pairs() to 8: at step s it is min_pairs + s / stage, stage =
  // grow_steps / (9 - min_pairs) (at least 1), capped at 8, and 8 from grow_steps on.
  // Each training input holds n distinct pairs, n uniform in [min_pairs,
  // recall_max_pairs(step)]. grow_steps = 0 (the default): 8 from the first step.
  void set_recall_grow_steps(std::size_t grow_steps);
  std::size_t recall_grow_steps() const { return grow_steps_; }
  std::size_t recall_max_pairs(std::size_t step) const;
  // A training input for step `step`: a chained input with probability
  // recall_chain_fraction(), otherwise n distinct pairs as above; rejection-sampled
  // outside the held-out bucket.
  Example sample_train(Generator& gen, std::size_t step) const;

  // recall only: dense loss. A training input also carries a target at every repeated
  // key: the position holding the key's second (third, ...) occurrence is trained to
  // predict the value that follows it, which is the key's value from its first occurrence
  // (associative recall from inside the sequence). The query is such a repeat, so its
  // position (the last input token, followed by SEP in the sequence) is trained to
  // predict the answer as well. Evaluation batches (make_batch) never carry these
  // targets.
  void set_recall_dense(bool dense);
  bool recall_dense() const { return dense_; }
  // recall only: chained training inputs. A fraction of the training inputs (chosen per
  // input with probability `fraction`) have keys that follow one fixed order: key j + 1 =
  // (key j + kRecallChainStep) mod 16, from a random first key, with random values and a
  // query among the keys as usual (they are ordinary 8-distinct-pair recall inputs). On
  // such an input each value position but the last also carries a target: the next key,
  // which is a function of the key just before that value. Learning it needs only one
  // attention layer (look at the previous token), so it grows the previous-token head
  // that the recall circuit needs at every value position (see docs/TRAINING.md).
  static constexpr std::int64_t kRecallChainStep = 5;
  void set_recall_chain_fraction(double fraction);
  double recall_chain_fraction() const { return chain_fraction_; }
  Example generate_recall_chain(Generator& gen) const;
  // True when the 8 keys of a recall input follow the chain order.
  bool is_recall_chain(const std::vector<std::int64_t>& input) const;
  // make_batch, plus the dense recall targets when recall_dense() is on and the next-key
  // targets of chained inputs when recall_chain_fraction() > 0.
  Batch make_train_batch(const std::vector<Example>& examples) const;

 private:
  std::string name_;
  std::size_t input_len_ = 0, answer_len_ = 0;
  std::int64_t symbols_ = 0;      // sort/reverse: symbols 0..symbols-1
  std::int64_t num_keys_ = 0;     // recall: keys 0..num_keys-1, values num_keys..+symbols
  std::size_t pairs_ = 0;
  std::size_t min_pairs_ = 0;
  std::size_t grow_steps_ = 0;
  bool dense_ = false;
  double chain_fraction_ = 0;
  std::int64_t separator_ = 0;
};

}  // namespace tapegrad::tasks
