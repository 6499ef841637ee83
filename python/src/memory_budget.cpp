#include "memory_budget.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>

namespace tapegrad::python {
namespace {

std::atomic<std::uint64_t> max_memory{0};  // 0: no bound of the caller's

// The number after `key` in /proc/meminfo (kB), in bytes.
std::optional<double> meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  double kib = 0;
  std::string unit;
  while (in >> name >> kib >> unit)
    if (name == key + ":") return kib * 1024;
  return std::nullopt;
}

std::optional<double> number_in(const std::string& path) {
  std::ifstream in(path);
  double v = 0;
  if (in >> v) return v;  // "max" (cgroup v2, no limit) does not parse
  return std::nullopt;
}

// The cgroup's limit less its usage; none when there is no limit. Containers mount their
// own cgroup at the root of /sys/fs/cgroup.
std::optional<double> cgroup_room() {
  for (auto [limit, usage] :
       {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        std::pair{"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                  "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const std::optional<double> l = number_in(limit), u = number_in(usage);
    if (l && u && *l < 0x1p60) return std::max(0.0, *l - *u);  // v1 says "no limit" with ~2^63
  }
  return std::nullopt;
}

}  // namespace

MemoryBudget memory_budget() {
  MemoryBudget b{1e300, "no known limit"};
  auto lower = [&](std::optional<double> bytes, const char* source) {
    if (bytes && *bytes < b.bytes) b = {*bytes, source};
  };
  lower(meminfo_bytes("MemAvailable"), "MemAvailable");
  lower(cgroup_room(), "the cgroup's limit");
  if (const std::uint64_t m = max_memory.load()) lower(double(m), "set_max_memory");
  return b;
}

void set_max_memory(std::optional<std::uint64_t> bytes) { max_memory = bytes.value_or(0); }

std::string bytes_text(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::size_t u = 0;
  while (bytes >= 1024 && u + 1 < std::size(units)) {
    bytes /= 1024;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f} B", bytes);
  return fmt::format("{:.3g} {}", bytes, units[u]);
}

void require_memory(const std::string& op, const std::string& what, double needed,
                    const std::string& detail) {
  const MemoryBudget b = memory_budget();
  if (needed > b.bytes)
    throw OutOfMemory(fmt::format("{}: {} {} {}, more than the {} available ({})", op, what,
                                  bytes_text(needed), detail, bytes_text(b.bytes), b.source));
}

}  // namespace tapegrad::python
