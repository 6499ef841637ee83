#pragma once
// Process memory policy. glibc hands every large free block straight back to the kernel
// (mmap threshold, heap trimming), so the next tensor of that size faults its pages in
// again: on these virtual machines about 12 us per 4 KiB page, which made libtorch's MHA
// backward 5-18x slower than with reused memory. tapegrad therefore asks glibc, once at
// start-up, to keep freed memory in the process (mmap_max = 0, no trimming): every step
// after the first reuses warm pages. It is the effect of
// GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=... without asking the
// user to set it. Peak RSS is unchanged; memory is returned when the process ends.
//
// It is skipped when GLIBC_TUNABLES already sets malloc options or TAPEGRAD_MALLOC_REUSE=0.
#include <optional>
#include <string>

namespace tapegrad {

// Applies (enable) or restores glibc's defaults (disable). Returns true if applied.
bool set_memory_reuse(bool enable);
bool memory_reuse_enabled();

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
