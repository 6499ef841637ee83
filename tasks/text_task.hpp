#pragma once
// The text task: a language model of a UTF-8 file, its tokens the file's characters or
// byte-level BPE tokens (TextCoder). The first 90% of the bytes train, the last 10%
// evaluate, so that models with different tokens are compared on the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"  // Generator
#include "tasks/batch.hpp"
#include "tasks/text_coder.hpp"

namespace tapegrad::tasks {

// Language modelling on a UTF-8 file.
class TextTask {
 public:
  // The file's characters as tokens: its distinct code points, sorted (invalid bytes read
  // as U+FFFD). Throws std::runtime_error if the file cannot be read, or is too short for
  // the context (it needs at least 10 * (context + 1) tokens); TextInputError if it is no
  // regular file or larger than kMaxTextBytes (platform/file_io.hpp).
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
