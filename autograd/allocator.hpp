#pragma once
// The allocator behind every tensor's storage (Array<T>).
//
// Tensors want 64-byte aligned storage (whole cache lines, full SIMD registers), and the
// usual way to get it, posix_memalign (xsimd's aligned_allocator), defeats glibc's reuse of
// freed memory: glibc serves an aligned request of n bytes by carving an n-byte chunk out
// of a larger one, so the n-byte chunk freed by the last training step is too small for
// the same request in the next step unless it merges with a neighbour. Any small block
// allocated after it prevents that, the heap grows by a fresh block and every page of it
// is faulted in again (about 12 us per 4 KiB page on these machines: 100 ms per step for
// a 128 MiB score tensor). Plain malloc of n + 64 bytes, aligned by hand, is served from
// the chunk the previous step freed, with its pages already mapped.
#include <cstddef>
#include <new>

namespace tapegrad {

inline constexpr std::size_t kTensorAlignment = 64;

// `bytes` of storage aligned to kTensorAlignment; throws std::bad_alloc when out of memory.
// Zero bytes cost no malloc: every such request gets the same aligned placeholder.
void* allocate_tensor_storage(std::size_t bytes);
// Frees what allocate_tensor_storage returned (null is allowed).
void free_tensor_storage(void* p) noexcept;

template <class T>
struct TensorAllocator {
  using value_type = T;

  TensorAllocator() noexcept = default;
  template <class U>
  TensorAllocator(const TensorAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > (std::size_t(-1) - kTensorAlignment) / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(allocate_tensor_storage(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t) noexcept { free_tensor_storage(p); }

  template <class U>
  bool operator==(const TensorAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const TensorAllocator<U>&) const noexcept { return false; }
};

}  // namespace tapegrad
