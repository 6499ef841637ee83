#include "memory_budget.hpp"

#include <fmt/format.h>

#include <atomic>

#include "platform/format_bytes.hpp"
#include "autograd/memory.hpp"

namespace tapegrad::python {
namespace {

std::atomic<std::uint64_t> max_memory{0};  // 0: no bound of the caller's

}  // namespace

MemoryBudget memory_budget() {
  MemoryBudget b{1e300, "no known limit"};
  if (const std::optional<AvailableMemory> a = available_memory()) b = {a->bytes, a->source};
  const std::uint64_t m = max_memory.load();
  if (m && double(m) < b.bytes) b = {double(m), "set_max_memory"};
  return b;
}

void set_max_memory(std::optional<std::uint64_t> bytes) { max_memory = bytes.value_or(0); }

void require_memory(const std::string& op, const std::string& what, double needed,
                    const std::string& detail) {
  const MemoryBudget b = memory_budget();
  if (needed > b.bytes)
    throw OutOfMemory(fmt::format("{}: {} {} {}, more than the {} available ({})", op, what,
                                  format_bytes(needed), detail, format_bytes(b.bytes), b.source));
}

}  // namespace tapegrad::python
