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

// A chunk's tokens as a doubly linked list, so that a merge is O(1): a merged-away token
// is -1 and unlinked.
struct TokenChain {
  std::vector<std::int32_t> tokens, next, prev;

  explicit TokenChain(std::string_view chunk)
      : tokens(chunk.size()), next(chunk.size()), prev(chunk.size()) {
    const auto n = std::int32_t(chunk.size());
    for (std::int32_t i = 0; i < n; ++i) {
      tokens[i] = static_cast<unsigned char>(chunk[i]);
      next[i] = i + 1 < n ? i + 1 : -1;
      prev[i] = i - 1;
    }
  }
  std::int32_t size() const { return std::int32_t(tokens.size()); }
  // The pair starting at p, if p is a live token with a right neighbour.
  bool has_pair(std::int32_t p) const { return p >= 0 && tokens[p] >= 0 && next[p] >= 0; }
  std::uint64_t pair_at(std::int32_t p) const { return pair_key(tokens[p], tokens[next[p]]); }
  // Merges the pair at p into `merge.id` unless it is no longer `merge`'s pair (p or its
  // neighbour merged since it was queued): compared without a hash lookup.
  bool merge_at(std::int32_t p, const BpeMerge& merge) {
    const std::int32_t q = next[p];
    if (tokens[p] != merge.first || q < 0 || tokens[q] != merge.second) return false;
    tokens[p] = merge.id;
    tokens[q] = -1;
    next[p] = next[q];
    if (next[p] >= 0) prev[next[p]] = p;
    return true;
  }
  void append_to(std::vector<std::int32_t>& out) const {
    for (std::int32_t t : tokens)
      if (t >= 0) out.push_back(t);
  }
};

// The merge rank of the pair at p, or -1 when there is none or no merge makes it.
std::int32_t rank_of_pair(const std::unordered_map<std::uint64_t, std::int32_t>& ranks,
                          const TokenChain& chain, std::int32_t p) {
  if (!chain.has_pair(p)) return -1;
  const auto found = ranks.find(chain.pair_at(p));
  return found == ranks.end() ? -1 : found->second;
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
  TokenChain chain(chunk);
  std::vector<std::vector<std::int32_t>> positions_of_rank(merges_.size());
  auto offer = [&](std::int32_t p) {
    if (const std::int32_t rank = rank_of_pair(merge_rank_, chain, p); rank >= 0)
      positions_of_rank[rank].push_back(p);
  };
  for (std::int32_t i = 0; i + 1 < chain.size(); ++i) offer(i);
  for (std::size_t rank = 0; rank < merges_.size(); ++rank) {
    const std::vector<std::int32_t> positions = std::move(positions_of_rank[rank]);
    for (std::int32_t p : positions) {  // offer() only adds to higher ranks
      if (!chain.merge_at(p, merges_[rank])) continue;
      offer(chain.prev[p]);
      offer(p);
    }
  }
  chain.append_to(out);
}

void BpeTokenizer::encode_chunk(std::string_view chunk, std::vector<std::int32_t>& out) const {
  // Past this length one heap over the chunk costs more than a list per merge.
  if (chunk.size() >= (std::size_t(1) << 16)) return encode_long_chunk(chunk, out);
  TokenChain chain(chunk);
  using Candidate = std::pair<std::int32_t, std::int32_t>;  // (rank, left position)
  using MinHeap = std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>>;
  // The first candidates heapified at once (linear), not pushed one by one.
  std::vector<Candidate> initial;
  for (std::int32_t i = 0; i + 1 < chain.size(); ++i)
    if (const std::int32_t rank = rank_of_pair(merge_rank_, chain, i); rank >= 0) initial.push_back({rank, i});
  MinHeap candidates(std::greater<Candidate>(), std::move(initial));
  auto offer = [&](std::int32_t p) {
    if (const std::int32_t rank = rank_of_pair(merge_rank_, chain, p); rank >= 0) candidates.push({rank, p});
  };
  while (!candidates.empty()) {
    const auto [rank, p] = candidates.top();
    candidates.pop();
    if (!chain.merge_at(p, merges_[rank])) continue;
    offer(chain.prev[p]);
    offer(p);
  }
  chain.append_to(out);
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
