// Memory that does not grow: after every Transformer training step (forward, backward, gradient
// clipping, AdamW) the number of live tensors and the tape's length are back where they
// were after the first step. A leaked node, a tensor captured by its own backward (a
// reference cycle) or an intermediate kept alive by the tape would raise the count by at
// least one per step. (Peak RSS over 1,000 steps: tools/rss_growth; leaks of raw memory:
// the LeakSanitizer run of scripts/test.sh.)
#include <cstdint>

#include "helpers.hpp"
#include "nn/optim.hpp"
#include "nn/transformer.hpp"
#include "ops/cross_entropy.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

TransformerConfig memory_config() {
  TransformerConfig c;
  c.vocab = 11;
  c.context = 8;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 2;
  c.mlp_ratio = 2;
  c.seed = 5;
  return c;
}

Indices tokens(std::size_t B, std::size_t T, std::size_t vocab, Generator& gen) {
  Indices t = Indices::from_shape({B, T});
  for (auto& v : t) v = static_cast<std::int64_t>(gen.integer(vocab));
  return t;
}

// What a step leaves behind.
struct Footprint {
  long tensors = 0;
  std::size_t tape = 0;
};
Footprint footprint() { return {live_tensors<float>(), Tape<float>::active().size()}; }

template <class Step>
void require_flat(Step step, int steps, const char* what) {
  step(0);  // the first step allocates the optimiser's state and gradients
  const Footprint base = footprint();
  CHECK(base.tape == 0);
  int grew = 0, first_bad = -1;
  Footprint worst = base;
  for (int i = 1; i <= steps; ++i) {
    step(i);
    const Footprint now = footprint();
    if (now.tensors != base.tensors || now.tape != base.tape) {
      if (grew++ == 0) first_bad = i;
      if (now.tensors > worst.tensors) worst = now;
    }
  }
  INFO(what << ": after step 0, " << base.tensors << " live tensors and " << base.tape
            << " tape nodes; " << grew << " later steps differ, the first at step " << first_bad
            << " (up to " << worst.tensors << " tensors, " << worst.tape << " nodes)");
  CHECK(grew == 0);
}

}  // namespace

TEST_CASE("memory: Transformer training steps return live tensors and the tape to the same count", "[memory_growth]") {
  Transformer<float> model(memory_config());
  AdamW<float> opt(model.parameters(), {3e-3, 0.9, 0.999, 1e-8, 0.1});
  Generator gen(17);
  const long before = live_tensors<float>();
  require_flat([&](int) {
    opt.zero_grad();
    Tensor<float> loss = model.loss(tokens(4, 8, 11, gen), tokens(4, 8, 11, gen));
    loss.backward();
    clip_grad_norm(model.parameters(), 1.0);
    opt.step();
  }, 200, "train step");
  // The steps themselves hold nothing: the parameters are all that is alive.
  CHECK(live_tensors<float>() == before);
}

TEST_CASE("memory: attention weights cached for inspection and evaluation under NoGradGuard do not accumulate", "[memory_growth]") {
  Transformer<float> model(memory_config());
  AdamW<float> opt(model.parameters());
  Generator gen(18);
  const std::vector<std::string> pattern{"blocks.0.attn.pattern"};
  require_flat([&](int step) {
    opt.zero_grad();
    // each step's cache, with the pattern's gradient, goes when the step ends
    const CachedRun<float> run = run_with_cache(model, tokens(2, 8, 11, gen), pattern, true);
    Tensor<float> loss = cross_entropy(run.logits, tokens(2, 8, 11, gen));
    loss.backward();
    opt.step();
    if (step % 5 == 0) {
      NoGradGuard no_grad;
      const CachedRun<float> eval = run_with_cache(model, tokens(3, 5, 11, gen), pattern);
      CHECK(eval.cache[pattern[0]].shape() == Shape{3, 2, 5, 5});
      CHECK(Tape<float>::active().size() == 0);
    }
  }, 60, "train + eval step");
}

TEST_CASE("memory: a forward that throws half way leaves nothing behind after the next step", "[memory_growth]") {
  Transformer<float> model(memory_config());
  AdamW<float> opt(model.parameters());
  Generator gen(19);
  require_flat([&](int step) {
    if (step % 3 == 1) {
      // a target id out of range is found by cross_entropy, after the whole forward has
      // put its nodes on the tape; they stay there until the next backward clears it
      Indices bad_targets = tokens(4, 8, 11, gen);
      bad_targets(3, 7) = 11;
      CHECK_THROWS_AS(model.loss(tokens(4, 8, 11, gen), bad_targets), ShapeError);
      CHECK(Tape<float>::active().size() > 0);
    }
    opt.zero_grad();
    Tensor<float> loss = model.loss(tokens(4, 8, 11, gen), tokens(4, 8, 11, gen));
    loss.backward();
    opt.step();
  }, 60, "steps after a failed forward");
}

TEST_CASE("memory: tensor bytes in use count every tensor's storage and the peak since a reset",
          "[memory]") {
  const std::size_t before = tensor_bytes_in_use();
  reset_peak_tensor_bytes();
  CHECK(peak_tensor_bytes() == before);
  {
    Tensor<float> a = Tensor<float>::zeros({1000, 250});  // 1,000,000 bytes
    CHECK(tensor_bytes_in_use() >= before + 1000000);
    CHECK(tensor_bytes_in_use() < before + 1000000 + 4096);
  }
  CHECK(tensor_bytes_in_use() == before);
  CHECK(peak_tensor_bytes() >= before + 1000000);
  reset_peak_tensor_bytes();
  CHECK(peak_tensor_bytes() == before);
}
