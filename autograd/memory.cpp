#include "autograd/memory.hpp"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

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

}  // namespace tapegrad
