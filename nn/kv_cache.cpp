#include "nn/kv_cache.hpp"

#include <algorithm>

namespace tapegrad {

namespace {

std::size_t checked_capacity(std::size_t batch, std::size_t kv_heads, std::size_t head_dim,
                             std::size_t positions, std::size_t window) {
  if (batch == 0 || kv_heads == 0 || head_dim == 0 || positions == 0)
    fail("KVCache", "batch={}, kv_heads={}, head_dim={} and positions={} must all be positive",
         batch, kv_heads, head_dim, positions);
  return window ? std::min(window, positions) : positions;
}

}  // namespace

template <class T>
KVCache<T>::KVCache(std::size_t batch, std::size_t kv_heads, std::size_t head_dim,
                    std::size_t v_head_dim, std::size_t positions, std::size_t window)
    : capacity_(checked_capacity(batch, kv_heads, head_dim, positions, window)),
      window_(window),
      k_(Tensor<T>::zeros({batch, capacity_, kv_heads * head_dim})),
      v_(Tensor<T>::zeros({batch, capacity_, kv_heads * v_head_dim})) {}

// k (B, Tn, kw), v (B, Tn, vw): row t of batch item b goes to slot (length + t) % capacity.
template <class T>
void KVCache<T>::append(const Tensor<T>& k, const Tensor<T>& v) {
  const Shape ks = k_.shape(), vs = v_.shape();
  if (k.dim() != 3 || v.dim() != 3 || k.shape()[0] != ks[0] || v.shape()[0] != ks[0] ||
      k.shape()[2] != ks[2] || v.shape()[2] != vs[2] || k.shape()[1] != v.shape()[1])
    fail("KVCache", "append takes k (B, Tn, {}) and v (B, Tn, {}) with B={}, got k {} and v {}",
         ks[2], vs[2], ks[0], k.shape_string(), v.shape_string());
  const std::size_t B = ks[0], Tn = k.shape()[1];
  if (!window_ && length_ + Tn > capacity_)
    fail("KVCache", "appending {} positions to the {} held would exceed the capacity of {} "
         "(full attention keeps every key; allocate more positions)", Tn, length_, capacity_);
  T* kd = k_.value().data();
  T* vd = v_.value().data();
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < Tn; ++t) {
      const std::size_t slot = (length_ + t) % capacity_;
      std::copy_n(k.data() + (b * Tn + t) * ks[2], ks[2], kd + (b * capacity_ + slot) * ks[2]);
      std::copy_n(v.data() + (b * Tn + t) * vs[2], vs[2], vd + (b * capacity_ + slot) * vs[2]);
    }
  length_ += Tn;
}

// store (B, capacity, w) -> (B, count, w), slot (first + j) % capacity to row j
template <class T>
Tensor<T> KVCache<T>::linear(const Tensor<T>& store) const {
  const Shape s = store.shape();
  const std::size_t n = count(), first = ring().first_slot;
  Tensor<T> out = Tensor<T>::zeros({s[0], n, s[2]});
  T* o = out.value().data();
  for (std::size_t b = 0; b < s[0]; ++b)
    for (std::size_t j = 0; j < n; ++j)
      std::copy_n(store.data() + (b * capacity_ + (first + j) % capacity_) * s[2], s[2],
                  o + (b * n + j) * s[2]);
  return out;
}

template <class T>
KVCacheSet<T>::KVCacheSet(const TransformerConfig& c, std::size_t batch, std::size_t positions) {
  c.validate();
  const std::size_t dh = c.resolved_head_dim();
  layers_.reserve(c.layers);
  for (std::size_t i = 0; i < c.layers; ++i)
    layers_.emplace_back(batch, c.resolved_kv_heads(), dh, dh, positions, c.window);
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
