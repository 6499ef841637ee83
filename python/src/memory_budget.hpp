#pragma once
// What the Python module may still allocate, and the MemoryError when something would not
// fit: checked before a model, an optimiser's state or a tensor of a given shape is
// allocated, so that Python raises with the sizes instead of the kernel killing the
// process half-way (Linux overcommits: a large model's many small allocations all succeed
// until the pages are touched).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace tapegrad::python {

// Translated to Python's MemoryError (bind_errors).
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MemoryBudget {
  double bytes;
  std::string source;  // available_memory()'s source or "set_max_memory"
};

// The lower of what autograd/memory's available_memory() finds (MemAvailable, the room
// under the cgroups' limits) and the bound of set_max_memory.
MemoryBudget memory_budget();
// tapegrad.set_max_memory(bytes): a bound of the caller's below what the machine has;
// nullopt lifts it.
void set_max_memory(std::optional<std::uint64_t> bytes);

// OutOfMemory "{op}: {what} {needed} {detail}, more than the M <unit> available (source)"
// when `needed` bytes exceed the budget, e.g. "zeros: shape (1024,1024) needs 4 MiB in
// float32, more than the 1 MiB available (set_max_memory)".
void require_memory(const std::string& op, const std::string& what, double needed,
                    const std::string& detail);

}  // namespace tapegrad::python
