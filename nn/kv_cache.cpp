#include "nn/kv_cache.hpp"

#include <algorithm>
#include <type_traits>

#include "ops/precision.hpp"  // to_bf16, from_bf16

namespace tapegrad {

namespace {

std::size_t checked_capacity(std::size_t batch, std::size_t kv_heads, std::size_t head_dim,
                             std::size_t positions, std::size_t window) {
  if (batch == 0 || kv_heads == 0 || head_dim == 0 || positions == 0)
    fail("KVCache", "batch={}, kv_heads={}, head_dim={} and positions={} must all be positive",
         batch, kv_heads, head_dim, positions);
  return window ? std::min(window, positions) : positions;
}

template <class T>
KVDtype checked_dtype(KVDtype dtype) {
  if (dtype == KVDtype::bf16 && !std::is_same_v<T, float>)
    fail("KVCache", "bf16 storage is for float32 models (this model computes in float64)");
  return dtype;
}

// A row element as the cache stores it, and back.
template <class T>
void to_stored(T x, T& slot) { slot = x; }
template <class T>
void to_stored(T x, std::uint16_t& slot) { slot = to_bf16(float(x)); }
template <class T>
T from_stored(T x) { return x; }
template <class T>
T from_stored(std::uint16_t x) { return T(from_bf16(x)); }

}  // namespace

template <class T>
KVCache<T>::KVCache(std::size_t batch, std::size_t kv_heads, std::size_t head_dim,
                    std::size_t v_head_dim, std::size_t positions, std::size_t window,
                    KVDtype dtype)
    : batch_(batch),
      capacity_(checked_capacity(batch, kv_heads, head_dim, positions, window)),
      window_(window),
      k_width_(kv_heads * head_dim),
      v_width_(kv_heads * v_head_dim),
      dtype_(checked_dtype<T>(dtype)) {
  if (dtype_ == KVDtype::model) {
    k_ = Tensor<T>::zeros({batch_, capacity_, k_width_});
    v_ = Tensor<T>::zeros({batch_, capacity_, v_width_});
  } else {
    k16_ = std::make_shared<std::vector<std::uint16_t>>(batch_ * capacity_ * k_width_, 0);
    v16_ = std::make_shared<std::vector<std::uint16_t>>(batch_ * capacity_ * v_width_, 0);
  }
}

template <class T>
KVCache<T>::KVCache(std::size_t batch, const AttentionSpec& layer, std::size_t positions,
                    KVDtype dtype)
    : KVCache(batch, layer.kv_heads, layer.head_dim, layer.head_dim, positions, layer.window,
              dtype) {}

template <class T>
std::size_t KVCache<T>::bytes() const {
  if (dtype_ == KVDtype::bf16) return (k16_->size() + v16_->size()) * sizeof(std::uint16_t);
  return (k_.size() + v_.size()) * sizeof(T);
}

// rows (B, Tn, width): row t of batch item b goes to slot (length + t) % capacity.
template <class T>
template <class Stored>
void KVCache<T>::write(const Tensor<T>& rows, Stored* store_data, std::size_t width) const {
  const std::size_t Tn = rows.shape()[1];
  for (std::size_t b = 0; b < batch_; ++b)
    for (std::size_t t = 0; t < Tn; ++t) {
      const T* src = rows.data() + (b * Tn + t) * width;
      Stored* dst = store_data + (b * capacity_ + (length_ + t) % capacity_) * width;
      for (std::size_t c = 0; c < width; ++c) to_stored(src[c], dst[c]);
    }
}

template <class T>
void KVCache<T>::append(const Tensor<T>& k, const Tensor<T>& v) {
  if (k.dim() != 3 || v.dim() != 3 || k.shape()[0] != batch_ || v.shape()[0] != batch_ ||
      k.shape()[2] != k_width_ || v.shape()[2] != v_width_ || k.shape()[1] != v.shape()[1])
    fail("KVCache", "append takes k (B, Tn, {}) and v (B, Tn, {}) with B={}, got k {} and v {}",
         k_width_, v_width_, batch_, k.shape_string(), v.shape_string());
  const std::size_t Tn = k.shape()[1];
  if (!window_ && length_ + Tn > capacity_)
    fail("KVCache", "appending {} positions to the {} held would exceed the capacity of {} "
         "(full attention keeps every key; allocate more positions)", Tn, length_, capacity_);
  if (dtype_ == KVDtype::model) {
    write(k, k_.value().data(), k_width_);
    write(v, v_.value().data(), v_width_);
  } else {
    write(k, k16_->data(), k_width_);
    write(v, v16_->data(), v_width_);
  }
  length_ += Tn;
}

// store (B, capacity, width) -> (B, count, width), slot (first + j) % capacity to row j
template <class T>
template <class Stored>
Tensor<T> KVCache<T>::linear(const Stored* store_data, std::size_t width) const {
  const std::size_t n = count(), first = ring().first_slot;
  Tensor<T> out = Tensor<T>::zeros({batch_, n, width});
  T* o = out.value().data();
  for (std::size_t b = 0; b < batch_; ++b)
    for (std::size_t j = 0; j < n; ++j) {
      const Stored* src = store_data + (b * capacity_ + (first + j) % capacity_) * width;
      T* dst = o + (b * n + j) * width;
      for (std::size_t c = 0; c < width; ++c) dst[c] = from_stored<T>(src[c]);
    }
  return out;
}

template <class T>
Tensor<T> KVCache<T>::keys() const {
  return dtype_ == KVDtype::model ? linear(k_.data(), k_width_) : linear(k16_->data(), k_width_);
}

template <class T>
Tensor<T> KVCache<T>::values() const {
  return dtype_ == KVDtype::model ? linear(v_.data(), v_width_) : linear(v16_->data(), v_width_);
}

template <class T>
Tensor<T> KVCache<T>::decode(const Tensor<T>& q, const AttentionSpec& spec) const {
  if (window_ != 0 && (spec.window == 0 || spec.window > window_))
    fail("KVCache", "the attention's window={} reaches further back than this cache's window={} "
         "holds (0: every earlier key); build the cache from the same layer's spec",
         spec.window, window_);
  if constexpr (std::is_same_v<T, float>) {
    if (dtype_ == KVDtype::bf16)
      return attention_decode(q, Bf16Store{k16_->data(), {batch_, capacity_, k_width_}},
                              Bf16Store{v16_->data(), {batch_, capacity_, v_width_}}, ring(), spec);
  }
  return attention_decode(q, k_, v_, ring(), spec);
}

template <class T>
const Tensor<T>& KVCache<T>::wide_store(const Tensor<T>& wide, const char* name) const {
  if (dtype_ != KVDtype::model)
    fail("KVCache", "{}() is a Tensor of the model's type; this cache stores bf16 (read it "
         "through decode(), keys() or values())", name);
  return wide;
}

template <class T>
KVCacheSet<T>::KVCacheSet(const TransformerConfig& c, std::size_t batch, std::size_t positions,
                          KVDtype dtype) {
  c.validate();
  layers_.reserve(c.layers);
  for (std::size_t i = 0; i < c.layers; ++i)
    layers_.emplace_back(batch, c.layer_plan(i).attention, positions, dtype);
}

template <class T>
std::size_t KVCacheSet<T>::bytes() const {
  std::size_t total = 0;
  for (const KVCache<T>& layer : layers_) total += layer.bytes();
  return total;
}

template <class T>
void KVCacheSet<T>::reset() {
  for (KVCache<T>& layer : layers_) layer.reset();
}

template class KVCache<float>;
template class KVCache<double>;
template class KVCacheSet<float>;
template class KVCacheSet<double>;

}  // namespace tapegrad
