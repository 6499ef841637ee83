#pragma once
// Process memory policy. glibc hands every large free block straight back to the kernel
// (mmap threshold, heap trimming), so the next tensor of that size faults its pages in
// again: on these virtual machines about 12 us per 4 KiB page, which made libtorch's MHA
// backward 5-18x slower than with reused memory. tapegrad therefore asks glibc, once at
// start-up, to keep freed memory in the process (mmap_max = 0, no trimming): every step
// after the first reuses warm pages. It is the effect of
// GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=... without asking the
// user to set it. Peak RSS is unchanged.
//
// It is skipped when GLIBC_TUNABLES already sets malloc options or TAPEGRAD_MALLOC_REUSE=0.
//
// What a long-lived process (Python) frees for good, a deleted model or optimiser, is
// handed back with trim_after_freeing(): glibc's malloc_trim releases the heap's free
// pages, costing a page fault per 4 KiB for whatever is allocated there again. A training
// step's own churn is never trimmed, which keeps the reuse above.
#include <cstddef>
#include <optional>
#include <string>

namespace tapegrad {

// Applies (enable) or restores glibc's defaults (disable). Returns true if applied.
bool set_memory_reuse(bool enable);
bool memory_reuse_enabled();

// Hands the free memory of the heap back to the system (malloc_trim) when `freed_bytes`
// were just released for good and are at least kTrimAfterFreeingBytes; returns whether it
// trimmed. Below that the cost of faulting the pages in again outweighs what returns.
inline constexpr double kTrimAfterFreeingBytes = 32.0 * 1024 * 1024;
bool trim_after_freeing(double freed_bytes);
// The same whatever was freed (tapegrad.release_memory()).
void trim_free_memory();

// The bytes of tensor storage (every Array's, autograd/allocator.hpp) allocated and not yet
// freed, as malloc's usable sizes, and the most there have been since the last reset: what
// a step's activations and gradients cost, without the noise of the resident set (which
// glibc's reuse of freed memory keeps at its peak). Counted as every tensor is allocated and
// freed, on every thread.
std::size_t tensor_bytes_in_use();
std::size_t peak_tensor_bytes();
void reset_peak_tensor_bytes();  // the peak becomes what is in use now

// What this process may still allocate, the one probe the programs' --max-memory default
// and Python's MemoryError checks share: the lowest of /proc/meminfo's MemAvailable and,
// for the process's memory cgroup and each cgroup above it, its limit less its usage
// (v2: memory.max, memory.current; v1: memory.limit_in_bytes, memory.usage_in_bytes), page
// cache the kernel can drop (inactive_file in memory.stat) not counted as used. nullopt
// when none of these can be read. `root` is where /proc and /sys are found: "/" but in tests.
struct AvailableMemory {
  double bytes = 0;
  std::string source;  // "MemAvailable" or "room under the cgroup's memory limit"
};
std::optional<AvailableMemory> available_memory(const std::string& root = "/");

}  // namespace tapegrad
