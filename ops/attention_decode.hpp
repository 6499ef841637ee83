#pragma once
// The one-token decode path of the attention specification (ops/attention_spec.hpp): one
// query per batch item against the keys and values a cache holds, read in place from the
// cache's storage (ops/kernels/attention_decode.hpp). It implements the same AttentionSpec
// as attention(), checked by the same check_attention_spec, and is tested equal to it.
// Inference only: it records nothing on the tape.
#include <cstddef>
#include <cstdint>

#include "autograd/tensor.hpp"
#include "ops/attention_spec.hpp"

namespace tapegrad {

// Where the held positions sit in a cache's storage of `capacity` slots: the oldest of the
// `count` held positions is in slot first_slot, the next in (first_slot + 1) % capacity...
// A cache that has not wrapped has first_slot 0 and position order = slot order.
struct KVRing {
  std::size_t capacity = 0, count = 0, first_slot = 0;
};

// q (B, 1, heads*head_dim); k_store (B, capacity, kv_heads*head_dim), v_store
// (B, capacity, kv_heads*v_head_dim) holding ring.count positions, the query's own key
// the newest of them -> (B, 1, heads*v_head_dim). The spec is checked on q and the held
// keys' logical shapes (B, count, width) by check_attention_spec, so a causal or window
// spec sees exactly the mask attention() would apply to the last row. Throws ShapeError
// "attention_decode: ..." for Tq != 1, a ring that does not fit its storage, or a call
// that would need a gradient (grad mode on and an input requiring one).
template <class T>
Tensor<T> attention_decode(const Tensor<T>& q, const Tensor<T>& k_store, const Tensor<T>& v_store,
                           const KVRing& ring, const AttentionSpec& spec);

// Stores of bf16 numbers (their bits, as kernels::to_bf16 rounds them) of the shapes above,
// read widened to float32: the same result as float32 stores holding the same rounded values.
struct Bf16Store {
  const std::uint16_t* data = nullptr;
  Shape shape;
};
Tensor<float> attention_decode(const Tensor<float>& q, const Bf16Store& k_store,
                               const Bf16Store& v_store, const KVRing& ring,
                               const AttentionSpec& spec);

}  // namespace tapegrad
