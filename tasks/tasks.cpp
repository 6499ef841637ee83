#include "tasks/tasks.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <xtensor/xadapt.hpp>

#include "nn/io/file_io.hpp"
#include "text/utf8.hpp"

namespace tapegrad::tasks {

std::uint64_t hash_tokens(const std::vector<std::int64_t>& tokens) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a offset basis
  for (std::int64_t t : tokens) {
    auto u = static_cast<std::uint64_t>(t);
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (u >> (8 * byte)) & 0xffu;
      h *= 0x100000001b3ULL;  // FNV prime
    }
  }
  // splitmix64 finaliser: FNV's low bits are weak, and the bucket is h % 16.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

// ---------------------------------------------------------------------------------------
// Sequence tasks

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

Example SequenceTask::sample_train(Generator& gen) const {
  for (;;) {
    Example ex = name_ == "recall" && min_pairs_ < pairs_ ? generate_recall_mixed(gen) : generate(gen);
    if (!is_held_out(ex.input)) return ex;
  }
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

// ---------------------------------------------------------------------------------------
// Repeat (induction) task

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

// ---------------------------------------------------------------------------------------
// Text that does not look like text

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

// ---------------------------------------------------------------------------------------
// Text

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

std::vector<NpzEntry> text_coder_entries(const TextCoder& coder) {
  std::vector<std::int64_t> values;
  if (const text::BpeTokenizer* bpe = coder.tokenizer()) {
    const std::string file = bpe->to_text();
    for (char c : file) values.push_back(static_cast<unsigned char>(c));
  } else {
    values.assign(coder.characters().begin(), coder.characters().end());
  }
  const std::vector<std::size_t> shape = {values.size()};
  return {NpzEntry(coder.is_bpe() ? kTokenizerKey : kVocabKey,
                   xt::xarray<std::int64_t>(xt::adapt(values, shape)))};
}

std::optional<TextCoder> text_coder_from_entries(const std::vector<NpzEntry>& entries,
                                                 const std::string& source) {
  for (const NpzEntry& e : entries) {
    if (e.name == kVocabKey) {
      std::vector<std::uint32_t> vocab;
      for (std::int64_t cp : e.as<std::int64_t>()) {
        if (cp < 0 || cp > 0x10ffff)
          throw std::runtime_error(source + ": the text vocabulary holds " + std::to_string(cp) +
                                   ", not a code point");
        vocab.push_back(std::uint32_t(cp));
      }
      return TextCoder::characters(std::move(vocab));
    }
    if (e.name == kTokenizerKey) {
      std::string file;
      for (std::int64_t byte : e.as<std::int64_t>()) {
        if (byte < 0 || byte > 255)
          throw std::runtime_error(source + ": the tokenizer entry holds " + std::to_string(byte) +
                                   ", not a byte");
        file += char(byte);
      }
      return TextCoder::bpe(text::BpeTokenizer::from_text(file, source + " (its tokenizer)"));
    }
  }
  return std::nullopt;
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

}  // namespace tapegrad::tasks
