#include "tasks/batch.hpp"

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

}  // namespace tapegrad::tasks
