#include "tasks/text_task.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "platform/file_io.hpp"
#include "text/utf8.hpp"

namespace tapegrad::tasks {

TextTask TextTask::from_file(const std::string& path, std::size_t context) {
  return from_string(read_text_file(path, "text file " + path), context);
}

TextTask TextTask::from_string(const std::string& utf8, std::size_t context) {
  return from_string(utf8, context, TextCoder::characters_of(utf8));
}

std::size_t TextTask::held_out_start(const std::string& utf8) {
  std::size_t start = utf8.size() - utf8.size() / 10;
  while (start < utf8.size() && (static_cast<unsigned char>(utf8[start]) & 0xc0) == 0x80) ++start;
  return start;
}

TextTask TextTask::from_string(const std::string& utf8, std::size_t context, TextCoder coder) {
  TextTask t = vocabulary_only(std::move(coder), context);
  const std::size_t split = held_out_start(utf8);
  t.train_ = t.encode(utf8.substr(0, split));
  t.train_bytes_ = split;
  t.eval_bytes_ = utf8.size() - split;
  t.eval_ = t.encode(utf8.substr(split));
  const std::size_t tokens = t.train_.size() + t.eval_.size();
  if (tokens < 10 * (context + 1) || t.train_.size() <= context) {
    throw std::runtime_error("the text has " + std::to_string(tokens) + " tokens (" +
                             std::to_string(t.train_.size()) + " in its first 90%); context " +
                             std::to_string(context) + " needs at least " +
                             std::to_string(10 * (context + 1)));
  }
  return t;
}

TextTask TextTask::vocabulary_only(TextCoder coder, std::size_t context) {
  TextTask t;
  t.context_ = context;
  t.coder_ = std::move(coder);
  return t;
}

Batch TextTask::train_batch(std::size_t batch, Generator& gen) const {
  const std::size_t T = context_;
  Batch out;
  out.tokens = Indices::from_shape({batch, T});
  out.targets = Indices::from_shape({batch, T});
  for (std::size_t b = 0; b < batch; ++b) {
    std::size_t start = std::size_t(gen.integer(train_.size() - T));
    for (std::size_t t = 0; t < T; ++t) {
      out.tokens(b, t) = train_[start + t];
      out.targets(b, t) = train_[start + t + 1];
    }
  }
  return out;
}

std::vector<Batch> TextTask::eval_batches(std::size_t batch, std::size_t max_windows) const {
  const std::size_t T = context_;
  std::size_t windows = eval_.size() > T ? (eval_.size() - 1) / T : 0;
  windows = std::min(windows, max_windows);
  std::vector<Batch> out;
  for (std::size_t w0 = 0; w0 < windows; w0 += batch) {
    std::size_t B = std::min(batch, windows - w0);
    Batch b;
    b.tokens = Indices::from_shape({B, T});
    b.targets = Indices::from_shape({B, T});
    for (std::size_t i = 0; i < B; ++i) {
      std::size_t start = (w0 + i) * T;
      for (std::size_t t = 0; t < T; ++t) {
        b.tokens(i, t) = eval_[start + t];
        b.targets(i, t) = eval_[start + t + 1];
      }
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::size_t TextTask::target_bytes(const std::vector<Batch>& batches) const {
  std::size_t bytes = 0;
  for (const Batch& b : batches)
    for (std::int64_t t : b.targets)
      if (t != kIgnore) bytes += coder_.token_bytes(t);
  return bytes;
}

double bits_per_byte(double mean_loss, std::size_t tokens, std::size_t bytes) {
  if (bytes == 0) return std::nan("");
  return mean_loss * double(tokens) / (double(bytes) * std::log(2.0));
}

std::string text_warning(const std::string& bytes) {
  std::size_t invalid = 0;
  const std::vector<std::uint32_t> cps = text::decode_utf8(bytes, &invalid);
  std::size_t control = 0;
  for (std::uint32_t c : cps) {
    const bool whitespace = c == '\t' || c == '\n' || c == '\r' || c == '\f';
    if ((c < 0x20 && !whitespace) || c == 0x7f || (c >= 0x80 && c < 0xa0)) ++control;
  }
  std::string why;
  if (invalid > 0)
    why = std::to_string(invalid) + " of " + std::to_string(bytes.size()) +
          " bytes are not valid UTF-8 (read as U+FFFD)";
  if (control * 20 > cps.size())
    why += (why.empty() ? "" : "; ") + std::to_string(control) + " of " +
           std::to_string(cps.size()) + " characters are control characters";
  return why.empty() ? why : "this does not look like text: " + why;
}

}  // namespace tapegrad::tasks
