// minbpe's training loop with incremental pair counts.
//
// Identical chunks are stored once, with their multiplicity as weight, concatenated in the
// order of their first occurrence; a position in that concatenation orders pairs exactly as
// their first occurrences in the text do (a chunk's first instance lies wholly before the
// first instance of any chunk first seen later). Each position holds a token (or -1 once it
// was merged into its left neighbour) in a doubly linked list per chunk. Per pair: its
// weighted count and the positions where it occurs, ascending. A pair's positions are all
// added in one pass (the first count, or the merge that created its newest id) and only go
// stale afterwards, so the first valid position is found by advancing a head index. A pair
// loses an occurrence only by losing count (and only pairs with the newest id gain any), so
// a queue entry whose count is still the pair's count also has its current first position:
// entries are discarded on a count mismatch alone (lazy deletion).
#include <queue>
#include <stdexcept>
#include <unordered_map>

#include "text/bpe_tokenizer.hpp"

namespace tapegrad::text {
namespace {

struct PairStats {
  std::int64_t count = 0;
  std::vector<std::int32_t> positions;  // left token's position, ascending; some stale
  std::size_t head = 0;                 // positions[0, head) are known stale
};

struct QueueEntry {
  std::int64_t count;
  std::int32_t first_position;  // the pair's first occurrence when the entry was pushed
  std::uint64_t key;
  // std::priority_queue pops the largest: higher count, then earlier occurrence.
  bool operator<(const QueueEntry& other) const {
    if (count != other.count) return count < other.count;
    return first_position > other.first_position;
  }
};

class IncrementalTrainer {
 public:
  explicit IncrementalTrainer(const std::vector<std::string_view>& chunks) {
    std::unordered_map<std::string_view, std::size_t> chunk_index;
    std::vector<std::string_view> unique;
    std::vector<std::int64_t> weight_of_unique;
    for (std::string_view chunk : chunks) {
      auto [it, inserted] = chunk_index.emplace(chunk, unique.size());
      if (inserted) {
        unique.push_back(chunk);
        weight_of_unique.push_back(0);
      }
      ++weight_of_unique[it->second];
    }
    for (std::size_t c = 0; c < unique.size(); ++c) append_chunk(unique[c], weight_of_unique[c]);
    for (auto& [key, stats] : pairs_) queue_.push({stats.count, stats.positions.front(), key});
  }

  std::vector<BpeMerge> run(int merge_count) {
    std::vector<BpeMerge> merges;
    for (int m = 0; m < merge_count; ++m) {
      std::optional<std::uint64_t> best = pop_best();
      if (!best) break;  // every chunk is a single token: nothing left to merge
      auto first = std::int32_t(*best >> 32), second = std::int32_t(*best & 0xffffffffu);
      std::int32_t id = 256 + m;
      merges.push_back({first, second, id});
      apply_merge(*best, first, second, id);
    }
    return merges;
  }

 private:
  void append_chunk(std::string_view chunk, std::int64_t weight) {
    if (tokens_.size() + chunk.size() > std::size_t(INT32_MAX))
      throw std::invalid_argument("train_bpe_merges: the distinct chunks exceed 2 GiB");
    auto start = std::int32_t(tokens_.size());
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      auto p = std::int32_t(start + i);
      tokens_.push_back(static_cast<unsigned char>(chunk[i]));
      prev_.push_back(i == 0 ? -1 : p - 1);
      next_.push_back(i + 1 == chunk.size() ? -1 : p + 1);
      weight_.push_back(weight);
      if (i > 0) add_occurrence(pair_key(tokens_[p - 1], tokens_[p]), p - 1, weight);
    }
  }

  void add_occurrence(std::uint64_t key, std::int32_t position, std::int64_t weight) {
    PairStats& stats = pairs_[key];
    stats.count += weight;
    stats.positions.push_back(position);
    touched_.push_back(key);
  }

  void remove_occurrence(std::uint64_t key, std::int64_t weight) {
    pairs_[key].count -= weight;
    touched_.push_back(key);
  }

  bool occurs_at(std::uint64_t key, std::int32_t p) const {
    return tokens_[p] >= 0 && next_[p] >= 0 && pair_key(tokens_[p], tokens_[next_[p]]) == key;
  }

  std::int32_t first_occurrence(std::uint64_t key) {
    PairStats& stats = pairs_[key];
    while (stats.head < stats.positions.size() && !occurs_at(key, stats.positions[stats.head]))
      ++stats.head;
    return stats.positions[stats.head];  // count > 0, so one is valid
  }

  std::optional<std::uint64_t> pop_best() {
    while (!queue_.empty()) {
      QueueEntry top = queue_.top();
      queue_.pop();
      auto found = pairs_.find(top.key);
      if (found == pairs_.end() || found->second.count != top.count || top.count <= 0) continue;
      return top.key;
    }
    return std::nullopt;
  }

  // Merges every occurrence of (first, second), left to right, and updates the counts of
  // the pairs around each: (x, first) and (second, y) lose one, (x, id) and (id, y) gain one.
  void apply_merge(std::uint64_t key, std::int32_t first, std::int32_t second, std::int32_t id) {
    std::vector<std::int32_t> positions = std::move(pairs_[key].positions);
    touched_.clear();
    for (std::int32_t p : positions) {
      if (!occurs_at(key, p)) continue;
      std::int32_t q = next_[p], x = prev_[p], y = next_[q];
      std::int64_t w = weight_[p];
      remove_occurrence(key, w);
      if (x >= 0) remove_occurrence(pair_key(tokens_[x], first), w);
      if (y >= 0) remove_occurrence(pair_key(second, tokens_[y]), w);
      tokens_[p] = id;
      tokens_[q] = -1;
      next_[p] = y;
      if (y >= 0) prev_[y] = p;
      if (x >= 0) add_occurrence(pair_key(tokens_[x], id), x, w);
      if (y >= 0) add_occurrence(pair_key(id, tokens_[y]), p, w);
    }
    pairs_.erase(key);
    for (std::uint64_t touched : touched_) {
      auto found = pairs_.find(touched);
      if (found == pairs_.end() || found->second.count <= 0) continue;
      queue_.push({found->second.count, first_occurrence(touched), touched});
    }
  }

  std::vector<std::int32_t> tokens_, prev_, next_;
  std::vector<std::int64_t> weight_;
  std::unordered_map<std::uint64_t, PairStats> pairs_;
  std::priority_queue<QueueEntry> queue_;
  std::vector<std::uint64_t> touched_;
};

}  // namespace

std::vector<BpeMerge> train_bpe_merges(const std::vector<std::string_view>& chunks,
                                       int merge_count) {
  return IncrementalTrainer(chunks).run(merge_count);
}

}  // namespace tapegrad::text
