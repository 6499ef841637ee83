#pragma once
// One-query attention over a KV cache: the decode step. With a single query row there is
// nothing to tile and no (Tq, Tk) buffer to build; each kv head is one small product
// (its group of query heads) @ (its cached keys)^T, a softmax over the visible keys, and
// the weights @ the cached values, all read in place from the cache's storage.
//
// The cache is a ring: position first_position + j of the `count` held positions sits in
// slot (first_slot + j) % capacity. Once a window cache has wrapped, slot order is not
// position order, so the kernel walks the held keys oldest first, as at most two
// contiguous runs of slots, and the window is applied to positions, never to slots.
#include <cstddef>
#include <cstdint>

#include "ops/kernels/attention.hpp"  // HeadLayout

namespace tapegrad::kernels {

// The layout of one query row (Tq = 1, q_offset = Tk - 1) against Tk = count held keys,
// whose rule says which of them the query sees and how their scores change; the ring says
// where they are stored.
struct DecodeLayout : HeadLayout {
  std::size_t capacity = 0, first_slot = 0;  // the ring, see above
  std::size_t count() const { return Tk; }
};

// q (B, H*dh) -> y (B, H*dv): y_bh = softmax(the rule's scores from scale * q_bh . k_j) @ v_j
// over the visible held keys j of kv head h / group; k (B, capacity, KV*dh), v (B, capacity, KV*dv).
// The stores hold T, or (T = float) the bits of bf16 numbers, widened to float32 as they are
// read: the same arithmetic on half the bytes.
template <class T, class Stored>
void attention_decode(const DecodeLayout& L, const T* q, const Stored* k, const Stored* v, T scale,
                      T* y);

}  // namespace tapegrad::kernels
