// The trainer's memory estimate (apps/common/memory_budget) against the tensor storage a
// run holds at its peak (autograd/memory's counters): the model, two of the trainer's own
// steps (the loss, its backward, clipping and AdamW, whose moments the first step makes) and
// an evaluation as the trainer runs it. The estimate's tensor parts (parameters, gradients,
// AdamW's moments, activations) must hold the peak and stay within 1.5 times it, at a toy
// shape and at GPT-2 small's width, heads and vocabulary with fewer layers, plain and
// checkpointed, with the head whole and in chunks.
#if defined(TAPEGRAD_WITH_EXAMPLES)
#include <catch2/catch.hpp>
#include <string>

#include "platform/format_bytes.hpp"
#include "autograd/memory.hpp"
#include "apps/common/memory_budget.hpp"
#include "apps/train/training.hpp"
#include "tasks/evaluate.hpp"

using namespace tapegrad;

namespace {

tasks::Batch random_batch(std::size_t batch, std::size_t tokens, std::size_t vocab, Generator& gen) {
  tasks::Batch b{Indices::from_shape({batch, tokens}), Indices::from_shape({batch, tokens})};
  for (auto& v : b.tokens) v = std::int64_t(gen.integer(vocab));
  for (auto& v : b.targets) v = std::int64_t(gen.integer(vocab));
  return b;
}

// The most tensor storage alive at once, beyond what was before.
double measured_peak(const TransformerConfig& c, std::size_t batch, std::size_t tokens,
                     std::size_t eval_batch) {
  const double before = double(tensor_bytes_in_use());
  reset_peak_tensor_bytes();
  {
    Transformer<float> model(c);
    const train::Settings settings;
    train::Optimizers optimizers(model, settings);
    Generator gen(5);
    // a short first step makes AdamW's moments, so that the measured step has them beside it
    for (const std::size_t n : {std::size_t(2), tokens})
      train::train_step(model, optimizers, random_batch(n == tokens ? batch : 1, n, c.vocab, gen),
                        1e-3, 1.0, nullptr, nullptr, 1);
    tasks::evaluate(model, {random_batch(eval_batch, tokens, c.vocab, gen)});
  }
  return double(peak_tensor_bytes()) - before;
}

// The estimate's parts that are tensors (not the checkpoint's copies, the held-out token ids
// or the program).
double estimated_tensors(const TransformerConfig& c, std::size_t batch, std::size_t tokens,
                         std::size_t eval_batch) {
  double sum = 0;
  for (const auto& [name, bytes] : apps::training_memory(c, batch, tokens, eval_batch).parts)
    if (name == "parameters" || name == "gradients" || name == "AdamW moments" || name == "activations")
      sum += bytes;
  return sum;
}

void check_estimate(const TransformerConfig& c, std::size_t batch, std::size_t tokens,
                    std::size_t eval_batch) {
  const double measured = measured_peak(c, batch, tokens, eval_batch);
  const double estimate = estimated_tensors(c, batch, tokens, eval_batch);
  INFO("estimate " << format_bytes(estimate) << ", measured peak "
                   << format_bytes(measured) << ": " << estimate / measured << "x");
  CHECK(estimate >= measured);
  CHECK(estimate <= 1.5 * measured);
}

TransformerConfig gpt2_width(std::size_t layers, std::size_t context) {
  TransformerConfig c = gpt2_preset();
  c.vocab = 50257;
  c.d_model = 768;
  c.heads = 12;
  c.layers = layers;
  c.context = context;
  c.tie_embeddings = true;
  c.seed = 2;
  return c;
}

}  // namespace

TEST_CASE("memory estimate: a toy model's training step and evaluation", "[memory][train]") {
  TransformerConfig c = gpt2_preset();
  c.vocab = 64;
  c.d_model = 32;
  c.heads = 4;
  c.layers = 2;
  c.context = 32;
  c.seed = 2;
  for (bool checkpointed : {false, true}) {
    INFO("checkpointed " << checkpointed);
    c.checkpoint_activations = checkpointed;
    check_estimate(c, 16, 32, 250);
  }
}

TEST_CASE("memory estimate: GPT-2 small's width and vocabulary, two layers", "[memory][train]") {
  // B2 x T64 plain, the head whole (128 rows); B1 x T320 checkpointed, the head in chunks of
  // 256 rows
  TransformerConfig c = gpt2_width(2, 64);
  check_estimate(c, 2, 64, 1);
  c = gpt2_width(2, 320);
  c.checkpoint_activations = true;
  check_estimate(c, 1, 320, 1);
}

#endif

