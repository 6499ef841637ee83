#pragma once
// What a Tensor handle points to. Only ops and the engine include this header.
#include <atomic>

#include <xtensor/xarray.hpp>

#include "autograd/tensor.hpp"

namespace tapegrad {

// An array of no elements. It allocates nothing (xtensor does not ask the allocator for
// zero elements), unlike a default-constructed Array, which is 0-d: one element. Copied
// from one made once: half the time of building its shape and strides again.
template <class T>
Array<T> no_elements() {
  static const Array<T> empty = Array<T>::from_shape({0});
  return empty;
}

template <class T>
struct TensorImpl {
  explicit TensorImpl(Array<T> v, bool requires = false)
      : value(std::move(v)), requires_grad(requires) {
    live.fetch_add(1, std::memory_order_relaxed);
  }
  ~TensorImpl() { live.fetch_sub(1, std::memory_order_relaxed); }
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  Array<T> value;
  Array<T> grad = no_elements<T>();  // meaningful only when has_grad
  bool has_grad = false;
  bool requires_grad = false;
  bool is_leaf = true;        // false for op outputs recorded on the tape
  bool retains_grad = false;  // keep a non-leaf's gradient after backward

  Shape shape() const { return Shape(value.shape().begin(), value.shape().end()); }

  inline static std::atomic<long> live{0};
};

template <class T>
inline Shape shape_of(const Array<T>& a) {
  return Shape(a.shape().begin(), a.shape().end());
}

}  // namespace tapegrad
