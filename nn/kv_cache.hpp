#pragma once
// The KV cache: the keys and values of every position a layer has already read, so that a
// new token costs one query against them instead of a forward over the whole prefix.
//
// One KVCache per layer holds kv_heads heads (grouped-query attention shares them; they are
// never repeated per query head), in storage allocated once for the requested number of
// positions: (B, capacity, kv_heads*head_dim) for keys, the same for values. A sliding-
// window layer needs only the last `window` keys, so its capacity is min(window, positions)
// and position p lives in slot p % capacity: a ring buffer, flat in memory however long the
// generation runs. A full-attention cache refuses to grow past its capacity.
//
// The cache stores the model's own type, or (float32 models, KVDtype::bf16) bf16 numbers:
// keys and values rounded to nearest even as they are appended, half the memory per token,
// read back widened to float32 by the decode kernel and by keys() / values().
//
// The cache is an argument, not a mode the model is switched into: MultiHeadAttention::forward
// and Transformer::forward take one, training passes none, so no state left over from one
// generation can change what the next forward computes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/tensor.hpp"
#include "nn/config.hpp"  // KVDtype
#include "ops/attention_decode.hpp"  // KVRing

namespace tapegrad {

template <class T>
class KVCache {
 public:
  // Storage for `positions` positions of batch B (window 0: full attention), zero-filled.
  // ShapeError "KVCache: ..." for a zero size, or bf16 storage for a double model.
  KVCache(std::size_t batch, std::size_t kv_heads, std::size_t head_dim, std::size_t v_head_dim,
          std::size_t positions, std::size_t window = 0, KVDtype dtype = KVDtype::model);
  // The cache of a layer whose attention is `layer` (a LayerPlan's: kv_heads and head_dim
  // resolved), keys and values of head_dim each, its window the spec's.
  KVCache(std::size_t batch, const AttentionSpec& layer, std::size_t positions,
          KVDtype dtype = KVDtype::model);

  std::size_t length() const { return length_; }  // positions appended: the next one's position
  std::size_t capacity() const { return capacity_; }
  std::size_t count() const { return length_ < capacity_ ? length_ : capacity_; }  // held
  std::size_t window() const { return window_; }
  std::size_t first_position() const { return length_ - count(); }  // oldest held
  KVRing ring() const { return {capacity_, count(), first_position() % capacity_}; }
  KVDtype dtype() const { return dtype_; }
  std::size_t bytes() const;

  // Appends k (B, Tn, kv_heads*head_dim) and v (B, Tn, kv_heads*v_head_dim), the positions
  // length() .. length() + Tn - 1 (a window cache keeps the last `capacity` of them), rounded
  // to bf16 by a bf16 cache.
  // ShapeError "KVCache: ..." on a shape mismatch or when a full-attention cache would
  // overflow (a full-attention query needs every key before it).
  void append(const Tensor<T>& k, const Tensor<T>& v);
  // The held keys / values (B, count, width), oldest first: a contiguous run of positions,
  // which is what attention()'s bottom-right mask expects of its keys. A copy.
  Tensor<T> keys() const;
  Tensor<T> values() const;
  // One query per batch item, q (B, 1, heads*head_dim), the newest held position's, against
  // the held keys and values read in place: attention_decode (ops/attention_decode.hpp).
  // ShapeError when the spec looks further back than a window cache holds.
  Tensor<T> decode(const Tensor<T>& q, const AttentionSpec& spec) const;
  // The storage itself, slot order (see ring()): a cache of the model's type only
  // (ShapeError for a bf16 cache, whose storage is not a Tensor<T>).
  const Tensor<T>& key_store() const { return wide_store(k_, "key_store"); }
  const Tensor<T>& value_store() const { return wide_store(v_, "value_store"); }
  void reset() { length_ = 0; }

 private:
  const Tensor<T>& wide_store(const Tensor<T>& wide, const char* name) const;
  template <class Stored>
  Tensor<T> linear(const Stored* store, std::size_t width) const;
  template <class Stored>
  void write(const Tensor<T>& rows, Stored* store, std::size_t width) const;

  std::size_t batch_, capacity_, window_, length_ = 0, k_width_, v_width_;
  KVDtype dtype_;
  Tensor<T> k_, v_;                      // KVDtype::model
  // KVDtype::bf16: the bits of bf16 numbers, shared by copies as a Tensor's storage is
  std::shared_ptr<std::vector<std::uint16_t>> k16_, v16_;
};

// One cache per layer of a Transformer, sized from the layer's plan (its attention's
// kv_heads, head_dim and window); for `positions` positions of batch B.
template <class T>
class KVCacheSet {
 public:
  KVCacheSet(const TransformerConfig& config, std::size_t batch, std::size_t positions,
             KVDtype dtype = KVDtype::model);
  std::size_t length() const { return layers_.front().length(); }
  std::size_t bytes() const;
  std::size_t size() const { return layers_.size(); }
  KVCache<T>& operator[](std::size_t i) { return layers_[i]; }
  const KVCache<T>& operator[](std::size_t i) const { return layers_[i]; }
  void reset();

 private:
  std::vector<KVCache<T>> layers_;
};

extern template class KVCache<float>;
extern template class KVCache<double>;
extern template class KVCacheSet<float>;
extern template class KVCacheSet<double>;

}  // namespace tapegrad
