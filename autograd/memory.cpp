#include "autograd/memory.hpp"

#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "autograd/allocator.hpp"

namespace tapegrad {

namespace {
bool g_enabled = false;

bool user_chose_otherwise() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc.")) return true;
  const char* opt_out = std::getenv("TAPEGRAD_MALLOC_REUSE");
  return opt_out && std::strcmp(opt_out, "0") == 0;
}

struct ApplyAtStartup {
  ApplyAtStartup() {
    if (!user_chose_otherwise()) set_memory_reuse(true);
  }
} g_apply_at_startup;
}  // namespace

bool set_memory_reuse(bool enable) {
  if (enable) {
    // large blocks come from the heap, not from fresh mmaps, and the heap is never trimmed
    g_enabled = mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 &&
                mallopt(M_TOP_PAD, 64 << 20) == 1;
  } else {
    mallopt(M_MMAP_MAX, 65536);  // glibc's defaults
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    mallopt(M_TOP_PAD, 0);
    g_enabled = false;
  }
  return g_enabled;
}

bool memory_reuse_enabled() { return g_enabled; }

namespace {
// What a request for zero bytes gets (an array resized or assigned down to no elements)
// instead of a malloc of the alignment padding alone.
alignas(kTensorAlignment) unsigned char g_empty_storage[kTensorAlignment];
}  // namespace

// The block from malloc is over-allocated by kTensorAlignment bytes; the aligned pointer
// handed out lies 1 to kTensorAlignment bytes into it, and the byte just before it holds
// that distance.
void* allocate_tensor_storage(std::size_t bytes) {
  static_assert(kTensorAlignment <= 255 && (kTensorAlignment & (kTensorAlignment - 1)) == 0);
  if (bytes == 0) return g_empty_storage;
  if (bytes > std::size_t(-1) - kTensorAlignment) throw std::bad_alloc();
  auto* raw = static_cast<unsigned char*>(std::malloc(bytes + kTensorAlignment));
  if (!raw) throw std::bad_alloc();
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(raw);
  const std::size_t offset = kTensorAlignment - (address & (kTensorAlignment - 1));
  unsigned char* aligned = raw + offset;
  aligned[-1] = static_cast<unsigned char>(offset);
  return aligned;
}

void free_tensor_storage(void* p) noexcept {
  if (!p || p == g_empty_storage) return;
  auto* aligned = static_cast<unsigned char*>(p);
  std::free(aligned - aligned[-1]);
}

}  // namespace tapegrad
