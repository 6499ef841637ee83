#pragma once
// What a Tensor handle points to. Only ops and the engine include this header.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

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
class Tape;

// Where an op output's gradient would come from; a leaf has none (see Tape::backward).
enum class History : std::uint8_t {
  leaf,          // made by the user, or by an op that recorded nothing
  recorded,      // its node is on `tape`
  freed,         // a backward without retain_graph released its node
  cleared,       // Tape::clear() dropped its node
  thread_ended,  // its node was on the tape of a thread that has ended
};

template <class T>
struct TensorImpl {
  // By rvalue reference: each move of an xarray copies its shape and strides, which in a
  // chain of small ops costs as much as the arithmetic.
  explicit TensorImpl(Array<T>&& v, bool requires = false)
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
  History history = History::leaf;
  const char* op = nullptr;       // the op that made it, for an op output
  const Tape<T>* tape = nullptr;  // the tape holding its node, while recorded
  std::uint64_t reached = 0;      // the last backward (Tape's epoch) that depends on it

  // In-place edits. A node keeps the version of each value it saved; Tensor::value()
  // hands out a writable value and bumps the version. Most such calls only read (a
  // non-const handle picks the non-const overload), so while a node still holds the
  // current version a copy is kept, and a backward that finds another version compares:
  // only a value that really changed is an error. Outside a live graph a bump is all.
  //
  // Threads (docs/RELIABILITY.md, "Threads"): a leaf (a parameter) may be read, saved by
  // nodes and given gradients by several threads' tapes at once, so everything here that
  // such a leaf's users change is atomic or under `mutex`: the version, the save counts,
  // the snapshots and, in the backward, a leaf's gradient. An op output belongs to the one
  // thread whose tape recorded it.
  std::atomic<std::uint32_t> version{0};
  // Live nodes holding it as an input, and saves ever (as input or output).
  std::atomic<std::uint32_t> saved_by{0};
  std::atomic<std::uint32_t> saves{0};
  std::atomic<bool> has_snapshots{false};  // `snapshots` is not empty: read without the lock
  mutable std::mutex mutex;      // guards saves_seen, snapshots, and a leaf's grad
  std::uint32_t saves_seen = 0;  // `saves` at the last bump
  std::vector<std::pair<std::uint32_t, Array<T>>> snapshots;  // (version, value then)

  void bump_version() {
    std::lock_guard<std::mutex> lock(mutex);
    const std::uint32_t s = saves.load(std::memory_order_relaxed);
    const bool saved = saved_by.load(std::memory_order_relaxed) > 0 || history == History::recorded;
    const std::uint32_t v = version.load(std::memory_order_relaxed);
    if (saved && s != saves_seen) {
      snapshots.emplace_back(v, value);
      has_snapshots.store(true, std::memory_order_relaxed);
    }
    saves_seen = s;
    version.store(v + 1, std::memory_order_release);
  }
  // Whether the value differs from what it was at version v (v not the current one).
  bool changed_since(std::uint32_t v) const {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [version_then, then] : snapshots)
      if (version_then == v)
        return !(std::equal(then.shape().begin(), then.shape().end(), value.shape().begin(),
                            value.shape().end()) &&
                 std::memcmp(then.data(), value.data(), value.size() * sizeof(T)) == 0);
    return true;
  }
  // Nothing holds a saved version any more: the copies can go. Called as every saved
  // input is released, so the common case (no copies) takes no lock.
  void drop_snapshots_if_unsaved() {
    if (!has_snapshots.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mutex);
    if (!snapshots.empty() && saved_by.load(std::memory_order_relaxed) == 0 &&
        history != History::recorded) {
      snapshots.clear();
      has_snapshots.store(false, std::memory_order_relaxed);
    }
  }
  void forget_history(History why) {
    history = why;
    tape = nullptr;
    drop_snapshots_if_unsaved();
  }

  Shape shape() const { return Shape(value.shape().begin(), value.shape().end()); }

  inline static std::atomic<long> live{0};
};

template <class T>
inline Shape shape_of(const Array<T>& a) {
  return Shape(a.shape().begin(), a.shape().end());
}

// An array of `shape` filled with zeros (without instantiating xtensor's builders).
template <class T>
Array<T> zeros_array(const Shape& shape) {
  Array<T> a = Array<T>::from_shape(shape);
  a.fill(T(0));
  return a;
}

}  // namespace tapegrad
