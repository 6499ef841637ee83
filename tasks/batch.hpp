#pragma once
// What every task hands the trainer, and the rule that keeps evaluation inputs out of
// training: a batch of inputs and next-token targets (kIgnore where a position carries no
// loss), and the hash whose bucket says whether an input is held out.
#include <cstdint>
#include <vector>

#include "ops/embedding.hpp"  // Indices

namespace tapegrad::tasks {

constexpr std::int64_t kIgnore = -100;          // target of a position without loss
constexpr std::uint64_t kHoldoutBuckets = 16;   // 1 input in 16 is reserved for evaluation

struct Batch {
  Indices tokens;   // (B, T) model input
  Indices targets;  // (B, T) next tokens, kIgnore where there is no loss
};

// 64-bit FNV-1a over the tokens, finished with a splitmix64 mix (stable across runs).
std::uint64_t hash_tokens(const std::vector<std::int64_t>& tokens);

}  // namespace tapegrad::tasks
