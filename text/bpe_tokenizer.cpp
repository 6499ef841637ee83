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

  TokenChain(std::string_view chunk, const std::array<std::int32_t, 256>& byte_ids)
      : tokens(chunk.size()), next(chunk.size()), prev(chunk.size()) {
    const auto n = std::int32_t(chunk.size());
    for (std::int32_t i = 0; i < n; ++i) {
      tokens[i] = byte_ids[static_cast<unsigned char>(chunk[i])];
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
                           std::vector<std::string> special_tokens) {
  check_special_tokens(special_tokens);
  v_.mode = mode;
  v_.pattern = std::move(pattern);
  v_.tokens.reserve(256 + merges.size() + special_tokens.size());
  for (int b = 0; b < 256; ++b) {
    v_.tokens.emplace_back(1, char(b));
    v_.byte_ids[b] = b;
  }
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const BpeMerge& merge = merges[i];
    auto id = std::int32_t(256 + i);
    if (merge.id != id || merge.first < 0 || merge.second < 0 || merge.first >= id ||
        merge.second >= id)
      throw std::invalid_argument("BpeTokenizer: merge " + std::to_string(i) + " (" +
                                  std::to_string(merge.first) + ", " + std::to_string(merge.second) +
                                  ") -> " + std::to_string(merge.id) +
                                  " must make id " + std::to_string(id) + " from smaller ids");
    v_.tokens.push_back(v_.tokens[merge.first] + v_.tokens[merge.second]);
  }
  v_.merges = std::move(merges);
  for (std::string& token : special_tokens) {
    v_.tokens.push_back(token);
    v_.added.push_back({std::move(token), std::int32_t(v_.tokens.size() - 1)});
  }
  check_and_index();
}

BpeTokenizer::BpeTokenizer(BpeVocabulary vocabulary) : v_(std::move(vocabulary)) {
  check_and_index();
}

// Every id names its bytes once: the byte tokens are their byte, a merge's result is its
// parts' bytes, an added token's bytes are its content.
void BpeTokenizer::check_and_index() {
  const auto n = std::int32_t(v_.tokens.size());
  auto check_id = [&](std::int32_t id, const std::string& what) {
    if (id < 0 || id >= n)
      throw std::invalid_argument("BpeTokenizer: " + what + " has id " + std::to_string(id) +
                                  ", outside the vocabulary [0, " + std::to_string(n) + ")");
  };
  for (int b = 0; b < 256; ++b) {
    check_id(v_.byte_ids[b], "byte " + std::to_string(b));
    if (v_.tokens[v_.byte_ids[b]] != std::string(1, char(b)))
      throw std::invalid_argument("BpeTokenizer: byte " + std::to_string(b) + "'s id " +
                                  std::to_string(v_.byte_ids[b]) + " is not that one byte");
  }
  for (std::size_t i = 0; i < v_.merges.size(); ++i) {
    const BpeMerge& merge = v_.merges[i];
    const std::string what = "merge " + std::to_string(i);
    check_id(merge.first, what + "'s first part");
    check_id(merge.second, what + "'s second part");
    check_id(merge.id, what);
    if (v_.tokens[merge.id] != v_.tokens[merge.first] + v_.tokens[merge.second])
      throw std::invalid_argument("BpeTokenizer: " + what + " (" + std::to_string(merge.first) +
                                  ", " + std::to_string(merge.second) + ") -> " +
                                  std::to_string(merge.id) + " does not make its parts' bytes");
    if (!merge_rank_.emplace(pair_key(merge.first, merge.second), std::int32_t(i)).second)
      throw std::invalid_argument("BpeTokenizer: merge " + std::to_string(i) + " repeats pair (" +
                                  std::to_string(merge.first) + ", " +
                                  std::to_string(merge.second) + ")");
  }
  for (std::size_t s = 0; s < v_.added.size(); ++s) {
    const AddedToken& token = v_.added[s];
    if (token.content.empty()) throw std::invalid_argument("BpeTokenizer: an added token is empty");
    check_id(token.id, "added token '" + token.content + "'");
    if (v_.tokens[token.id] != token.content)
      throw std::invalid_argument("BpeTokenizer: added token '" + token.content + "' has id " +
                                  std::to_string(token.id) + ", a different token's");
    for (std::size_t t = 0; t < s; ++t)
      if (v_.added[t].content == token.content)
        throw std::invalid_argument("BpeTokenizer: added token '" + token.content + "' given twice");
  }
  for (std::int32_t id : v_.prefix_ids) check_id(id, "a token added before the text");
  for (std::int32_t id : v_.suffix_ids) check_id(id, "a token added after the text");
  if (v_.mode == BpeMode::regex) splitter_.emplace(v_.pattern);
  if (v_.ignore_merges) {
    std::vector<bool> outside(v_.tokens.size(), false);
    for (const AddedToken& token : v_.added) outside[token.id] = !token.in_vocabulary;
    for (std::int32_t id = 0; id < n; ++id)
      if (!outside[id]) whole_token_.emplace(v_.tokens[id], id);
  }
}

bool BpeTokenizer::is_minbpe() const {
  const std::size_t merge_count = v_.merges.size();
  if (v_.tokens.size() != 256 + merge_count + v_.added.size() || v_.ignore_merges ||
      v_.add_prefix_space || !v_.prefix_ids.empty() || !v_.suffix_ids.empty() ||
      (v_.mode == BpeMode::basic && !v_.pattern.empty()))
    return false;
  for (int b = 0; b < 256; ++b)
    if (v_.byte_ids[b] != b) return false;
  for (std::size_t i = 0; i < merge_count; ++i) {
    const BpeMerge& merge = v_.merges[i];
    const auto id = std::int32_t(256 + i);
    if (merge.id != id || merge.first >= id || merge.second >= id) return false;
  }
  for (std::size_t s = 0; s < v_.added.size(); ++s) {
    const AddedToken& token = v_.added[s];
    if (token.id != std::int32_t(256 + merge_count + s) || !token.special || token.normalized ||
        token.content.find_first_of("\r\n") != std::string::npos)
      return false;
  }
  return true;
}

std::vector<std::string> BpeTokenizer::special_tokens() const {
  std::vector<std::string> contents;
  for (const AddedToken& token : v_.added) contents.push_back(token.content);
  return contents;
}

std::int32_t BpeTokenizer::vocab_size() const { return std::int32_t(v_.tokens.size()); }

const std::string& BpeTokenizer::token_bytes(std::int32_t id) const {
  if (id >= 0 && id < vocab_size()) return v_.tokens[id];
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
  TokenChain chain(chunk, v_.byte_ids);
  std::vector<std::vector<std::int32_t>> positions_of_rank(v_.merges.size());
  auto offer = [&](std::int32_t p) {
    if (const std::int32_t rank = rank_of_pair(merge_rank_, chain, p); rank >= 0)
      positions_of_rank[rank].push_back(p);
  };
  for (std::int32_t i = 0; i + 1 < chain.size(); ++i) offer(i);
  for (std::size_t rank = 0; rank < v_.merges.size(); ++rank) {
    const std::vector<std::int32_t> positions = std::move(positions_of_rank[rank]);
    for (std::int32_t p : positions) {  // offer() only adds to higher ranks
      if (!chain.merge_at(p, v_.merges[rank])) continue;
      offer(chain.prev[p]);
      offer(p);
    }
  }
  chain.append_to(out);
}

void BpeTokenizer::encode_chunk(std::string_view chunk, std::vector<std::int32_t>& out) const {
  if (v_.ignore_merges) {
    if (const auto whole = whole_token_.find(std::string(chunk)); whole != whole_token_.end())
      return out.push_back(whole->second);
  }
  // Past this length one heap over the chunk costs more than a list per merge.
  if (chunk.size() >= (std::size_t(1) << 16)) return encode_long_chunk(chunk, out);
  TokenChain chain(chunk, v_.byte_ids);
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
    if (!chain.merge_at(p, v_.merges[rank])) continue;
    offer(chain.prev[p]);
    offer(p);
  }
  chain.append_to(out);
}

std::vector<std::int32_t> BpeTokenizer::encode_ordinary(std::string_view text) const {
  std::vector<std::int32_t> ids;
  std::string prefixed;
  if (v_.add_prefix_space && !text.empty() && text[0] != ' ') {
    prefixed = " " + std::string(text);
    text = prefixed;
  }
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

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text, SpecialTokens specials,
                                               bool add_special_tokens) const {
  std::vector<std::int32_t> ids = encode_added(text, specials, false);
  if (!add_special_tokens) return ids;
  ids.insert(ids.begin(), v_.prefix_ids.begin(), v_.prefix_ids.end());
  ids.insert(ids.end(), v_.suffix_ids.begin(), v_.suffix_ids.end());
  return ids;
}

// The added tokens of one pass (the normalized ones or the others) cut the text, leftmost
// match first and at one position the longest; the first pass hands the text between its
// matches to the second, the second to the split and the merges.
std::vector<std::int32_t> BpeTokenizer::encode_added(std::string_view text, SpecialTokens specials,
                                                     bool normalized_pass) const {
  std::vector<const AddedToken*> pass;
  for (const AddedToken& token : v_.added)
    if (token.normalized == normalized_pass && (specials == SpecialTokens::allowed || !token.special))
      pass.push_back(&token);
  auto encode_between = [&](std::string_view part) {
    return normalized_pass ? encode_ordinary(part) : encode_added(part, specials, true);
  };
  if (pass.empty()) return encode_between(text);
  std::vector<std::int32_t> ids;
  // Each token's next occurrence at or after `start`, found again only once passed.
  std::vector<std::size_t> next_at(pass.size(), 0);
  std::vector<bool> searched(pass.size(), false);
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t best_at = std::string_view::npos, best = 0;
    for (std::size_t s = 0; s < pass.size(); ++s) {
      if (!searched[s] || (next_at[s] != std::string_view::npos && next_at[s] < start)) {
        next_at[s] = text.find(pass[s]->content, start);
        searched[s] = true;
      }
      const std::size_t at = next_at[s];
      if (at == std::string_view::npos) continue;
      if (at < best_at || (at == best_at && pass[s]->content.size() > pass[best]->content.size())) {
        best_at = at;
        best = s;
      }
    }
    const std::size_t end = best_at == std::string_view::npos ? text.size() : best_at;
    if (end > start) {
      std::vector<std::int32_t> part = encode_between(text.substr(start, end - start));
      ids.insert(ids.end(), part.begin(), part.end());
    }
    if (best_at == std::string_view::npos) break;
    ids.push_back(pass[best]->id);
    start = best_at + pass[best]->content.size();
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
