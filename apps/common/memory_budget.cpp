#include "apps/common/memory_budget.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "apps/common/run_options.hpp"
#include "platform/format_bytes.hpp"
#include "nn/parameter_plan.hpp"
#include "nn/transformer.hpp"  // automatic_head_chunk_rows
#include "tasks/evaluate.hpp"    // kEvalLogitsBytes

namespace tapegrad::apps {

namespace {

constexpr double kFloat = 4;  // every program here runs its models in float32

// Values one block keeps per position for its backward pass (the training forward's, as
// tests/test_memory_estimate.cpp measures them): the residual stream, the norms' inputs and
// outputs, attention's output and its projection (7 x d_model), q, k, v and their rotated
// copies, the attention probabilities against every key (heads x keys), and the
// feed-forward's hidden values (3 x hidden: up, activation or gate, product). Linear's
// bias is added in place, so no product is kept twice.
double block_values_per_position(const TransformerConfig& c, double keys) {
  const double D = double(c.d_model), H = double(c.heads), KV = double(c.resolved_kv_heads());
  const double dh = double(c.resolved_head_dim()), F = double(c.resolved_mlp_hidden());
  return 7 * D + 2 * (H + 2 * KV) * dh + H * keys + 3 * F;
}

// A training step's tensors beyond the parameters and their gradients, for `positions`
// positions of `keys` keys. The forward keeps every block's values, and the backward frees
// each block's once its gradients are made, so the peak is the forward's plus one block's
// gradients beside it; with checkpoint_activations the forward keeps each block's input
// (d_model values) and the backward runs one block again, with its gradients. The head:
// the final norm and its input (4 d_model), and the logits and their gradient (2 vocab),
// unless the loss takes the head in chunks of rows (nn/transformer.hpp's
// automatic_head_chunk_rows): then one chunk's logits and their gradient.
double training_activation_bytes(const TransformerConfig& c, double positions, double keys) {
  const double a = block_values_per_position(c, keys), L = double(c.layers);
  const double D = double(c.d_model), V = double(c.vocab);
  const double blocks = c.checkpoint_activations ? L * D + 2 * a : (L + 1) * a;
  const std::size_t chunk =
      positions < 0x1p60
          ? automatic_head_chunk_rows(std::size_t(positions), c.vocab, std::size_t(kFloat))
          : 0;
  const double head = chunk > 0 ? 2 * double(chunk) * V : positions * 2 * V;
  // The backward ends at the embedding, whose lookup's gradient (vocab x d_model) is made
  // beside the gradient the head gave it and what is left of the first block's: at a small
  // batch that is the step's peak.
  const double embedding = V * D + positions * (a + 4 * D);
  return std::max(positions * (blocks + 4 * D) + head, embedding) * kFloat;
}

// A forward without gradients frees each block's values as the next block starts: at its
// peak it holds the residual stream and a norm's output (2 d_model) beside the largest of
// attention's q, k, v and scores against `keys` keys with their softmax, a feed-forward's
// hidden values (3 x hidden; a gated kind's 4: gate, up, activation, product) and the
// logits (vocab), whose loss reads them row by row.
double forward_activation_bytes(const TransformerConfig& c, double positions, double keys) {
  const double H = double(c.heads), KV = double(c.resolved_kv_heads());
  const double attention = (H + 2 * KV) * double(c.resolved_head_dim()) + 2 * H * keys;
  const double hidden = (c.mlp == MlpKind::gelu ? 3 : 4) * double(c.resolved_mlp_hidden());
  const double widest = std::max({attention, hidden, double(c.vocab)});
  return positions * (widest + 2 * double(c.d_model)) * kFloat;
}

// The sequences of one evaluation forward: the batch, split as tasks::evaluate splits it
// so that its logits fit in tasks::kEvalLogitsBytes (one sequence at least).
double evaluated_sequences(const TransformerConfig& c, std::size_t eval_batch, double tokens) {
  const double per_sequence = std::max(tokens * double(c.vocab) * kFloat, 1.0);
  const double fit = std::max(1.0, std::floor(double(tasks::kEvalLogitsBytes) / per_sequence));
  return std::min(double(eval_batch), fit);
}

}  // namespace

double MemoryNeed::total() const {
  double sum = 0;
  for (const auto& part : parts) sum += part.second;
  return sum;
}

std::string MemoryNeed::describe() const {
  std::string s = format_bytes(total()) + " (";
  for (std::size_t i = 0; i < parts.size(); ++i)
    s += (i ? ", " : "") + parts[i].first + " " + format_bytes(parts[i].second);
  return s + ")";
}

double parameter_count(const TransformerConfig& c) {
  // the plan's total in long double: 64-bit counts of sizes near the fields' limits (2^24
  // each, experts included) would wrap
  return double(ParameterPlan(c).scalars());
}

MemoryNeed training_memory(const TransformerConfig& c, std::size_t batch, std::size_t tokens,
                           std::size_t eval_batch, bool training_checkpoints) {
  const double P = parameter_count(c) * kFloat;
  MemoryNeed need;
  need.add("parameters", P);
  need.add("gradients", P);
  need.add("AdamW moments", 2 * P);
  const double T = double(tokens);
  const double activations =
      std::max(training_activation_bytes(c, double(batch) * T, T),
               forward_activation_bytes(c, evaluated_sequences(c, eval_batch, T) * T, T));
  need.add("activations", activations);
  // Files are written between steps, when no activations are alive: only what a write
  // needs beyond them counts.
  const double writes = (training_checkpoints ? kCheckpointWriteCopies : kModelWriteCopies) * P;
  need.add("file writes", std::max(0.0, writes - activations));
  need.add("program", kProgramBytes);
  return need;
}

MemoryNeed inference_memory(const TransformerConfig& c, std::size_t batch, std::size_t tokens,
                            std::size_t cached_positions, std::size_t cache_value_bytes) {
  const double positions = double(batch) * double(tokens);
  const double keys = double(std::max(tokens, cached_positions));
  MemoryNeed need;
  need.add("parameters", parameter_count(c) * kFloat);
  if (cached_positions > 0)
    need.add("KV cache", double(batch) * double(cached_positions) *
                             double(kv_cache_bytes_per_token(c, cache_value_bytes)));
  need.add("activations", forward_activation_bytes(c, positions, keys));
  need.add("program", kProgramBytes);
  return need;
}

std::optional<double> parse_size(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  for (char& ch : unit) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();       // "GB" = "G"
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();       // "GiB" = "G"
  static const std::string units = "KMGTP";
  double scale = 1;
  if (unit == "B") unit.clear();
  if (!unit.empty()) {
    const std::size_t power = units.find(unit);
    if (unit.size() != 1 || power == std::string::npos) return std::nullopt;
    scale = std::pow(1024.0, double(power + 1));
  }
  if (!std::isfinite(value) || value <= 0) return std::nullopt;
  return value * scale;
}

void add_max_memory_option(CLI::App& app, std::optional<double>& bytes, const std::string& group) {
  CLI::Option* option = app.add_option_function<std::string>(
         "--max-memory",
         [&bytes](const std::string& text) { bytes = parse_size(text); },
         "refuse (exit 2) a configuration whose estimated memory exceeds this, e.g. 512M, 4G "
         "(default: the memory available: MemAvailable, or less under a cgroup's memory limit)")
      ->check(CLI::Validator(
          [](std::string& text) {
            return parse_size(text) ? std::string()
                                    : "value " + text + " is not a size in bytes (e.g. 512M, 4G)";
          },
          "SIZE"));
  // an empty group would hide the option, and CLI11 leaves a hidden option's name out of
  // its errors
  if (!group.empty()) option->group(group);
}

void check_memory(const MemoryNeed& need, const std::optional<double>& max_memory,
                  const std::string& what) {
  std::optional<AvailableMemory> limit = available_memory();
  if (max_memory) limit = AvailableMemory{*max_memory, "--max-memory"};
  if (!limit || need.total() <= limit->bytes) return;
  throw UsageError("out of memory: " + what + " needs about " + need.describe() +
                   ", more than the " + format_bytes(limit->bytes) + " of " + limit->source +
                   (max_memory ? std::string() : " (--max-memory overrides the limit)"));
}

std::string out_of_memory_message() {
  return "out of memory: an allocation failed (std::bad_alloc); use a smaller model, batch or "
         "context, or free memory";
}

}  // namespace tapegrad::apps
