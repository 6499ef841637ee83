#include "text/bpe_tokenizer.hpp"

#include <queue>
#include <stdexcept>

#include "text/utf8.hpp"

namespace tapegrad::text {

BpeMode parse_bpe_mode(std::string_view name) {
  if (name == "basic") return BpeMode::basic;
  if (name == "regex") return BpeMode::regex;
  throw std::invalid_argument("BPE mode must be basic or regex, not '" + std::string(name) + "'");
}

const char* bpe_mode_name(BpeMode mode) { return mode == BpeMode::basic ? "basic" : "regex"; }

namespace {

void check_special_tokens(const std::vector<std::string>& special_tokens) {
  for (std::size_t i = 0; i < special_tokens.size(); ++i) {
    const std::string& token = special_tokens[i];
    if (token.empty()) throw std::invalid_argument("BpeTokenizer: a special token is empty");
    if (token.find('\n') != std::string::npos || token.find('\r') != std::string::npos)
      throw std::invalid_argument("BpeTokenizer: special token '" + token + "' holds a line break");
    for (std::size_t j = 0; j < i; ++j)
      if (special_tokens[j] == token)
        throw std::invalid_argument("BpeTokenizer: special token '" + token + "' given twice");
  }
}

// Tokens p and next[p] of a doubly linked list over a chunk become one token `id` at p;
// the right one is marked -1 and unlinked.
void merge_into_left(std::int32_t p, std::int32_t id, std::vector<std::int32_t>& tokens,
                     std::vector<std::int32_t>& next, std::vector<std::int32_t>& prev) {
  const std::int32_t q = next[p];
  tokens[p] = id;
  tokens[q] = -1;
  next[p] = next[q];
  if (next[p] >= 0) prev[next[p]] = p;
}

}  // namespace

BpeTokenizer BpeTokenizer::train(std::string_view text, int vocab_size, BpeMode mode,
                                 const std::vector<std::string>& special_tokens,
                                 std::string pattern) {
  check_special_tokens(special_tokens);
  int merge_count = vocab_size - 256 - int(special_tokens.size());
  if (merge_count < 0)
    throw std::invalid_argument("BpeTokenizer::train: vocab_size " + std::to_string(vocab_size) +
                                " is below 256 bytes + " + std::to_string(special_tokens.size()) +
                                " special tokens");
  std::vector<std::string_view> chunks;
  if (mode == BpeMode::regex) chunks = RegexSplitter(pattern).split(text);
  else if (!text.empty()) chunks.push_back(text);
  if (mode == BpeMode::basic) pattern.clear();
  return BpeTokenizer(mode, std::move(pattern), train_bpe_merges(chunks, merge_count),
                      special_tokens);
}

BpeTokenizer::BpeTokenizer(BpeMode mode, std::string pattern, std::vector<BpeMerge> merges,
                           std::vector<std::string> special_tokens)
    : mode_(mode), pattern_(std::move(pattern)), merges_(std::move(merges)),
      special_tokens_(std::move(special_tokens)) {
  check_special_tokens(special_tokens_);
  if (mode_ == BpeMode::regex) splitter_.emplace(pattern_);
  vocab_.reserve(256 + merges_.size());
  for (int b = 0; b < 256; ++b) vocab_.emplace_back(1, char(b));
  for (std::size_t i = 0; i < merges_.size(); ++i) {
    const BpeMerge& merge = merges_[i];
    auto id = std::int32_t(256 + i);
    if (merge.id != id || merge.first < 0 || merge.second < 0 || merge.first >= id ||
        merge.second >= id)
      throw std::invalid_argument("BpeTokenizer: merge " + std::to_string(i) + " (" +
                                  std::to_string(merge.first) + ", " + std::to_string(merge.second) +
                                  ") -> " + std::to_string(merge.id) +
                                  " must make id " + std::to_string(id) + " from smaller ids");
    if (!merge_rank_.emplace(pair_key(merge.first, merge.second), std::int32_t(i)).second)
      throw std::invalid_argument("BpeTokenizer: merge " + std::to_string(i) + " repeats pair (" +
                                  std::to_string(merge.first) + ", " +
                                  std::to_string(merge.second) + ")");
    vocab_.push_back(vocab_[merge.first] + vocab_[merge.second]);
  }
}

std::int32_t BpeTokenizer::vocab_size() const {
  return std::int32_t(vocab_.size() + special_tokens_.size());
}

std::int32_t BpeTokenizer::special_id(std::size_t index) const {
  return std::int32_t(vocab_.size() + index);
}

const std::string& BpeTokenizer::token_bytes(std::int32_t id) const {
  if (id >= 0 && std::size_t(id) < vocab_.size()) return vocab_[id];
  if (id >= 0 && id < vocab_size()) return special_tokens_[id - vocab_.size()];
  throw std::out_of_range("BpeTokenizer: token id " + std::to_string(id) + " is outside [0, " +
                          std::to_string(vocab_size()) + ")");
}

// Merges by rank, lowest first, ties left to right: the same result as minbpe's "merge every
// occurrence of the lowest-ranked pair, then look again", since a merge only creates pairs
// of a higher rank than its own.
// A long chunk (basic mode's whole text) merges rank by rank: one list of positions per
// merge instead of one heap over the text. A rank's positions are all added in one pass (the
// one that made its newest id), in ascending order, so each list is visited left to right,
// as the heap would; only its stale entries are skipped.
void BpeTokenizer::encode_long_chunk(std::string_view chunk, std::vector<std::int32_t>& out) const {
  const auto n = std::int32_t(chunk.size());
  std::vector<std::int32_t> tokens(n), next(n), prev(n);
  for (std::int32_t i = 0; i < n; ++i) {
    tokens[i] = static_cast<unsigned char>(chunk[i]);
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  std::vector<std::vector<std::int32_t>> positions_of_rank(merges_.size());
  auto offer = [&](std::int32_t p) {
    if (p < 0 || tokens[p] < 0 || next[p] < 0) return;
    auto found = merge_rank_.find(pair_key(tokens[p], tokens[next[p]]));
    if (found != merge_rank_.end()) positions_of_rank[found->second].push_back(p);
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) offer(i);
  for (std::size_t rank = 0; rank < merges_.size(); ++rank) {
    const BpeMerge& merge = merges_[rank];
    std::vector<std::int32_t> positions = std::move(positions_of_rank[rank]);
    for (std::int32_t p : positions) {  // offer() only adds to higher ranks
      std::int32_t q = next[p];
      if (tokens[p] != merge.first || q < 0 || tokens[q] != merge.second) continue;
      merge_into_left(p, merge.id, tokens, next, prev);
      offer(prev[p]);
      offer(p);
    }
  }
  for (std::int32_t i = 0; i < n; ++i)
    if (tokens[i] >= 0) out.push_back(tokens[i]);
}

void BpeTokenizer::encode_chunk(std::string_view chunk, std::vector<std::int32_t>& out) const {
  // Past this length one heap over the chunk costs more than a list per merge.
  if (chunk.size() >= (std::size_t(1) << 16)) return encode_long_chunk(chunk, out);
  const auto n = std::int32_t(chunk.size());
  std::vector<std::int32_t> tokens(n), next(n), prev(n);
  for (std::int32_t i = 0; i < n; ++i) {
    tokens[i] = static_cast<unsigned char>(chunk[i]);
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  using Candidate = std::pair<std::int32_t, std::int32_t>;  // (rank, left position)
  using MinHeap = std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>>;
  auto rank_at = [&](std::int32_t p) -> std::int32_t {
    if (p < 0 || tokens[p] < 0 || next[p] < 0) return -1;
    auto found = merge_rank_.find(pair_key(tokens[p], tokens[next[p]]));
    return found == merge_rank_.end() ? -1 : found->second;
  };
  // The first candidates heapified at once (linear), not pushed one by one.
  std::vector<Candidate> initial;
  for (std::int32_t i = 0; i + 1 < n; ++i)
    if (std::int32_t rank = rank_at(i); rank >= 0) initial.push_back({rank, i});
  MinHeap candidates(std::greater<Candidate>(), std::move(initial));
  auto offer = [&](std::int32_t p) {
    if (std::int32_t rank = rank_at(p); rank >= 0) candidates.push({rank, p});
  };
  while (!candidates.empty()) {
    auto [rank, p] = candidates.top();
    candidates.pop();
    std::int32_t q = next[p];
    const BpeMerge& merge = merges_[rank];
    // Stale when p or its neighbour merged since: compared without a hash lookup.
    if (tokens[p] != merge.first || q < 0 || tokens[q] != merge.second) continue;
    merge_into_left(p, merge.id, tokens, next, prev);
    offer(prev[p]);
    offer(p);
  }
  for (std::int32_t i = 0; i < n; ++i)
    if (tokens[i] >= 0) out.push_back(tokens[i]);
}

std::vector<std::int32_t> BpeTokenizer::encode_ordinary(std::string_view text) const {
  std::vector<std::int32_t> ids;
  if (!splitter_) {
    encode_chunk(text, ids);
    return ids;
  }
  // Words repeat: each distinct chunk is encoded once.
  std::unordered_map<std::string_view, std::vector<std::int32_t>> cache;
  for (std::string_view chunk : splitter_->split(text)) {
    auto [it, inserted] = cache.try_emplace(chunk);
    if (inserted) encode_chunk(chunk, it->second);
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }
  return ids;
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text, SpecialTokens specials) const {
  if (specials == SpecialTokens::as_text || special_tokens_.empty()) return encode_ordinary(text);
  std::vector<std::int32_t> ids;
  std::size_t start = 0;
  while (start <= text.size()) {
    // The earliest special token from here; at one position the longest.
    std::size_t best_at = std::string_view::npos, best = 0;
    for (std::size_t s = 0; s < special_tokens_.size(); ++s) {
      std::size_t at = text.find(special_tokens_[s], start);
      if (at == std::string_view::npos) continue;
      if (at < best_at || (at == best_at && special_tokens_[s].size() > special_tokens_[best].size())) {
        best_at = at;
        best = s;
      }
    }
    std::size_t end = best_at == std::string_view::npos ? text.size() : best_at;
    std::vector<std::int32_t> part = encode_ordinary(text.substr(start, end - start));
    ids.insert(ids.end(), part.begin(), part.end());
    if (best_at == std::string_view::npos) break;
    ids.push_back(special_id(best));
    start = best_at + special_tokens_[best].size();
  }
  return ids;
}

std::string BpeTokenizer::decode_bytes(const std::vector<std::int32_t>& ids) const {
  std::string bytes;
  for (std::int32_t id : ids) bytes += token_bytes(id);
  return bytes;
}

std::string BpeTokenizer::decode(const std::vector<std::int32_t>& ids) const {
  return replace_invalid_utf8(decode_bytes(ids));
}

}  // namespace tapegrad::text
