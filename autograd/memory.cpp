#include "autograd/memory.hpp"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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

void trim_free_memory() { malloc_trim(0); }

bool trim_after_freeing(double freed_bytes) {
  if (freed_bytes < kTrimAfterFreeingBytes) return false;
  trim_free_memory();
  return true;
}

namespace {

// The number after `key` in a file of "key value" lines (/proc/meminfo in kB, memory.stat
// in bytes), times `unit`.
std::optional<double> field_in(const std::filesystem::path& file, const std::string& key,
                               double unit) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name;
    double value = 0;
    if (words >> name >> value && (name == key || name == key + ":")) return value * unit;
  }
  return std::nullopt;
}

// The first word of a file as a number: nothing for "max" (cgroup v2 without a limit) or
// no file.
std::optional<double> number_in(const std::filesystem::path& file) {
  std::ifstream in(file);
  double v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

// The memory cgroup of this process as /proc/self/cgroup names it: its path under the
// mount, and whether it is v1's (a line "N:...memory...:/path") or v2's ("0::/path").
struct OwnCgroup {
  std::string path = "/";
  bool v1 = false;
};
OwnCgroup own_cgroup(const std::filesystem::path& root) {
  std::ifstream in(root / "proc/self/cgroup");
  std::string line;
  OwnCgroup found;
  while (std::getline(in, line)) {
    const std::size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    if (controllers.find(",memory,") != std::string::npos) return {line.substr(b + 1), true};
    if (controllers == ",,") found = {line.substr(b + 1), false};
  }
  return found;
}

// One cgroup's limit less its usage; nothing without a limit. v1 says "no limit" with a
// number near 2^63.
std::optional<double> cgroup_room(const std::filesystem::path& dir, bool v1) {
  const auto limit = number_in(dir / (v1 ? "memory.limit_in_bytes" : "memory.max"));
  const auto usage = number_in(dir / (v1 ? "memory.usage_in_bytes" : "memory.current"));
  if (!limit || !usage || *limit >= 0x1p60) return std::nullopt;
  const double droppable =
      field_in(dir / "memory.stat", v1 ? "total_inactive_file" : "inactive_file", 1).value_or(0);
  return std::max(0.0, *limit - std::max(0.0, *usage - droppable));
}

// The lowest room of the process's cgroup and those above it. In a container the mount's
// root is the container's own cgroup while /proc/self/cgroup may name the host's path:
// folders that do not exist are passed over.
std::optional<double> lowest_cgroup_room(const std::filesystem::path& root) {
  const OwnCgroup own = own_cgroup(root);
  const std::filesystem::path mount = root / (own.v1 ? "sys/fs/cgroup/memory" : "sys/fs/cgroup");
  std::optional<double> lowest;
  std::filesystem::path relative = std::filesystem::path(own.path).relative_path();
  while (true) {
    const auto room = cgroup_room(mount / relative, own.v1);
    if (room && (!lowest || *room < *lowest)) lowest = room;
    if (relative.empty()) break;
    relative = relative.parent_path();
  }
  return lowest;
}

}  // namespace

std::optional<AvailableMemory> available_memory(const std::string& root) {
  std::optional<AvailableMemory> best;
  if (const auto a = field_in(std::filesystem::path(root) / "proc/meminfo", "MemAvailable", 1024))
    best = AvailableMemory{*a, "MemAvailable"};
  if (const auto c = lowest_cgroup_room(root); c && (!best || *c < best->bytes))
    best = AvailableMemory{*c, "room under the cgroup's memory limit"};
  return best;
}

namespace {
// What a request for zero bytes gets (an array resized or assigned down to no elements)
// instead of a malloc of the alignment padding alone.
alignas(kTensorAlignment) unsigned char g_empty_storage[kTensorAlignment];

// Tensor storage in use (malloc's usable sizes: what the blocks really take) and its peak.
std::atomic<std::int64_t> g_tensor_bytes{0}, g_peak_tensor_bytes{0};
void count_tensor_bytes(std::int64_t change) {
  const std::int64_t now = g_tensor_bytes.fetch_add(change, std::memory_order_relaxed) + change;
  if (change <= 0) return;
  std::int64_t peak = g_peak_tensor_bytes.load(std::memory_order_relaxed);
  while (now > peak && !g_peak_tensor_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}
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
  count_tensor_bytes(static_cast<std::int64_t>(malloc_usable_size(raw)));
  const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(raw);
  const std::size_t offset = kTensorAlignment - (address & (kTensorAlignment - 1));
  unsigned char* aligned = raw + offset;
  aligned[-1] = static_cast<unsigned char>(offset);
  return aligned;
}

void free_tensor_storage(void* p) noexcept {
  if (!p || p == g_empty_storage) return;
  auto* aligned = static_cast<unsigned char*>(p);
  unsigned char* raw = aligned - aligned[-1];
  count_tensor_bytes(-static_cast<std::int64_t>(malloc_usable_size(raw)));
  std::free(raw);
}

std::size_t tensor_bytes_in_use() {
  return static_cast<std::size_t>(std::max<std::int64_t>(0, g_tensor_bytes.load(std::memory_order_relaxed)));
}
std::size_t peak_tensor_bytes() {
  return static_cast<std::size_t>(std::max<std::int64_t>(0, g_peak_tensor_bytes.load(std::memory_order_relaxed)));
}
void reset_peak_tensor_bytes() {
  g_peak_tensor_bytes.store(g_tensor_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace tapegrad
