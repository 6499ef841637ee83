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

namespace tapegrad::kernels {

struct DecodeLayout {
  std::size_t B = 0, H = 0, KV = 0, dh = 0, dv = 0;
  std::size_t capacity = 0, count = 0, first_slot = 0;  // the ring, see above
  std::size_t window = 0;                               // 0: every held key is visible
  std::size_t group() const { return H / KV; }
  std::size_t k_ld() const { return KV * dh; }  // row widths of the cache's k and v
  std::size_t v_ld() const { return KV * dv; }
  // The query is the newest held position (count - 1): it sees held keys [lo(), count).
  std::size_t lo() const { return window && count > window ? count - window : 0; }
};

// q (B, H*dh) -> y (B, H*dv): y_bh = softmax(scale * q_bh . k_j) @ v_j over the visible
// held keys j of kv head h / group; k (B, capacity, KV*dh), v (B, capacity, KV*dv).
template <class T>
void attention_decode(const DecodeLayout& L, const T* q, const T* k, const T* v, T scale, T* y);

}  // namespace tapegrad::kernels
