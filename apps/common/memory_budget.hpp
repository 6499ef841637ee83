#pragma once
// What a run will need in memory, computed from its configuration before anything is
// allocated, and the limit it is held to: --max-memory when given, else the memory
// available (autograd/memory's available_memory(): MemAvailable, the room under the
// cgroups' limits).
// A configuration whose estimate exceeds the limit is a usage error (exit 2) naming the
// sizes, instead of a process that grows until the kernel kills it.
//
// The estimate errs high: float32 values, the attention scores stored (the fused and flash
// paths store fewer), and a fixed allowance for the program itself. docs/TRAINING.md gives
// the formula and how it compares with the measured peak; tests/test_memory_estimate.cpp
// holds its tensor parts within 1.5 times the tensors a run holds at its peak.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "autograd/memory.hpp"
#include "nn/config.hpp"

namespace tapegrad::apps {

// Named parts in bytes, summed; as doubles, so that a hostile size (2^24 layers of width
// 2^24) cannot overflow the arithmetic.
struct MemoryNeed {
  std::vector<std::pair<std::string, double>> parts;
  void add(const std::string& name, double bytes) { parts.emplace_back(name, bytes); }
  double total() const;
  // "3.1 GiB: parameters 200 MiB, gradients 200 MiB, ..."
  std::string describe() const;
};

// The program's own share: code, libraries, thread stacks and allocator slack.
inline constexpr double kProgramBytes = 96.0 * 1024 * 1024;

// The parameter count of `c`: exact, or an upper bound where the exact count would not fit
// in 64 bits (double: no overflow for any sizes the fields accept).
double parameter_count(const TransformerConfig& c);

// What writing a file costs, in copies of the parameters' bytes: nn/io builds a file whole
// in memory before writing it (the values copied, their .npy bytes, the archive as it
// grows). A model file (model.npz): the parameters; a training checkpoint: the parameters
// and AdamW's two moments, of which the trainer makes two copies more on the way (the
// training state and its entries). Measured at GPT-2 small's size (docs/TRAINING.md,
// "Memory"): about 13 copies at a checkpoint write.
inline constexpr double kModelWriteCopies = 4;
inline constexpr double kCheckpointWriteCopies = 14;

// Training `c` in float32 with AdamW on batches of `batch` sequences of `tokens` positions
// (with gradient accumulation: a micro-batch's), evaluated in batches of `eval_batch`:
// parameters, gradients, the two moments, the larger of a step's activations (kept for
// its backward pass; fewer with c.checkpoint_activations and with a head in chunks) and an
// evaluation batch's, and what writing the model file, or the training checkpoints when
// `training_checkpoints`, needs beyond those activations.
MemoryNeed training_memory(const TransformerConfig& c, std::size_t batch, std::size_t tokens,
                           std::size_t eval_batch, bool training_checkpoints = false);

// Running `c` forward without gradients on `batch` sequences of `tokens` positions, with a
// KV cache of `cached_positions` (0: none) of `cache_value_bytes` each (2: bf16): parameters,
// cache and activations.
MemoryNeed inference_memory(const TransformerConfig& c, std::size_t batch, std::size_t tokens,
                            std::size_t cached_positions, std::size_t cache_value_bytes = 4);

// --max-memory SIZE ("512M", "2G", "1.5GiB", "1000000"), bytes > 0.
void add_max_memory_option(CLI::App& app, std::optional<double>& bytes,
                           const std::string& group = "");
// Parses a size as --max-memory accepts it; nothing for a text that is not one.
std::optional<double> parse_size(const std::string& text);

// UsageError "out of memory: <what> needs about X (parts), more than the Y <source> ..."
// when `need` exceeds --max-memory (when given) or the memory available.
void check_memory(const MemoryNeed& need, const std::optional<double>& max_memory,
                  const std::string& what);

// The one line a program prints when an allocation failed anyway (std::bad_alloc).
std::string out_of_memory_message();

}  // namespace tapegrad::apps
