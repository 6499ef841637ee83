#pragma once
// The training tasks of train_tiny_transformer, generated in code from a seeded Generator.
//
// Sequence tasks (sort, reverse, recall) are laid out for a decoder-only model as
//     input tokens, SEP, answer tokens
// The model reads seq[0 : L-1] and is trained to predict seq[1 : L]; only the positions
// whose target is an answer token carry loss (the others hold kIgnore). Held-out
// evaluation inputs are disjoint from training inputs: an input belongs to the held-out
// side exactly when its hash falls in one bucket of kHoldoutBuckets, and training samples
// are drawn only from the other buckets.
//
// The repeat task (RepeatTask) is induction data: random tokens, then the same tokens again,
// with a target at every position.
//
// The text task is a language model of a UTF-8 file, its tokens the file's characters or
// byte-level BPE tokens (TextCoder): the first 90% of the bytes train, the last 10%
// evaluate, so that models with different tokens are compared on the same text.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"
#include "nn/io/npz.hpp"
#include "ops/embedding.hpp"  // Indices
#include "tasks/text_coder.hpp"

namespace tapegrad::tasks {

// Checkpoint entries the trainer adds (under nn/io/checkpoint's config prefix, which
// load_parameters tolerates): the task name as int64 bytes, and for a text model its
// vocabulary: int64 code points for characters, or the BPE tokenizer's file (docs/TOKENIZER.md)
// as int64 bytes. examples/generate reads them back.
inline const char* const kTaskKey = "__config__.train_task";
inline const char* const kVocabKey = "__config__.text_vocab";
inline const char* const kTokenizerKey = "__config__.text_tokenizer";

// A text model's tokens as checkpoint entries (kVocabKey or kTokenizerKey), and back: none
// when the entries hold neither; std::runtime_error naming `source` when one is malformed.
std::vector<NpzEntry> text_coder_entries(const TextCoder& coder);
std::optional<TextCoder> text_coder_from_entries(const std::vector<NpzEntry>& entries,
                                                 const std::string& source);

constexpr std::int64_t kIgnore = -100;          // target of a position without loss
constexpr std::uint64_t kHoldoutBuckets = 16;   // 1 input in 16 is reserved for evaluation

struct Batch {
  Indices tokens;   // (B, T) model input
  Indices targets;  // (B, T) next tokens, kIgnore where there is no loss
};

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

// 64-bit FNV-1a over the tokens, finished with a splitmix64 mix (stable across runs).
std::uint64_t hash_tokens(const std::vector<std::int64_t>& tokens);

// Language modelling on a UTF-8 file.
class TextTask {
 public:
  // The file's characters as tokens: its distinct code points, sorted (invalid bytes read
  // as U+FFFD). Throws std::runtime_error if the file cannot be read, or is too short for
  // the context (it needs at least 10 * (context + 1) tokens); TextInputError if it is no
  // regular file or larger than kMaxTextBytes (nn/io/file_io.hpp).
  static TextTask from_file(const std::string& path, std::size_t context);
  static TextTask from_string(const std::string& utf8, std::size_t context);
  // The text in `coder`'s tokens (a checkpoint's, for --resume; characters outside a
  // character vocabulary are dropped).
  static TextTask from_string(const std::string& utf8, std::size_t context, TextCoder coder);
  // A task for sampling only: the tokens and no data.
  static TextTask vocabulary_only(TextCoder coder, std::size_t context);

  // The byte where the held-out part starts: 90% of the way, moved forward to the start
  // of a character.
  static std::size_t held_out_start(const std::string& utf8);

  std::size_t vocab_size() const { return coder_.vocab_size(); }
  std::size_t context() const { return context_; }
  const TextCoder& coder() const { return coder_; }
  std::size_t train_tokens() const { return train_.size(); }
  std::size_t eval_tokens() const { return eval_.size(); }
  // The training part's bytes per token: what turns a training loss into bits per byte.
  double train_bytes_per_token() const { return double(train_bytes_) / double(train_.size()); }
  std::size_t eval_bytes() const { return eval_bytes_; }  // the held-out part's

  // Random windows of the training text: tokens (B, T) and every next token.
  Batch train_batch(std::size_t batch, Generator& gen) const;
  // Up to `max_windows` non-overlapping windows of the evaluation text, in order.
  std::vector<Batch> eval_batches(std::size_t batch, std::size_t max_windows) const;
  // The bytes of text the batches' targets stand for, the denominator of bits per byte.
  std::size_t target_bytes(const std::vector<Batch>& batches) const;

  std::vector<std::int64_t> encode(const std::string& utf8) const { return coder_.encode(utf8); }
  std::string decode(const std::vector<std::int64_t>& ids) const { return coder_.decode(ids); }

 private:
  std::size_t context_ = 0;
  TextCoder coder_;
  std::vector<std::int64_t> train_, eval_;
  std::size_t train_bytes_ = 0, eval_bytes_ = 0;
};

// Bits per byte: a mean loss in nats over `tokens` targets that stand for `bytes` bytes.
double bits_per_byte(double mean_loss, std::size_t tokens, std::size_t bytes);

// Text training trains on whatever bytes it is given; a binary file (an executable, an
// archive) gives a model of noise without a word. This says why bytes do not look like
// text: some are not valid UTF-8, or more than 1 character in 20 is a control character
// (ordinary text has none but tab, newline, carriage return and form feed). Empty when
// they look like text. A warning, not a refusal: the caller decides.
std::string text_warning(const std::string& bytes);

}  // namespace tapegrad::tasks
