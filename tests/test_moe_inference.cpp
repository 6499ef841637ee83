// A mixture of experts at inference: capacity (moe_capacity) applies to training forwards
// only, so evaluation, generation and hooks run every token through its chosen experts.
// Then a row's logits do not depend on its batch mates, the one-token decode equals the
// full forward, cached and uncached generation agree, and training still drops.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "nn/config.hpp"
#include "nn/generation.hpp"
#include "nn/kv_cache.hpp"
#include "nn/transformer.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

// Tight enough that a forward of a dozen tokens drops most choices: ceil(0.25 N k / E).
TransformerConfig tight_moe() {
  TransformerConfig c = mixtral_preset();
  c.vocab = 11;
  c.context = 8;
  c.d_model = 16;
  c.heads = 4;
  c.layers = 2;
  c.mlp_hidden = 24;
  c.experts = 4;
  c.moe_capacity = 0.25;
  c.seed = 5;
  return c;
}

double largest_difference(const Array<double>& a, const Array<double>& b) {
  REQUIRE(a.shape() == b.shape());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a.data()[i] - b.data()[i]));
  return worst;
}

}  // namespace

TEST_CASE("moe inference: with a capacity, the one-token decode equals the full forward",
          "[moe][capacity]") {
  const TransformerConfig c = tight_moe();
  Transformer<double> model(c);
  const Indices ids = random_tokens(2, 8, c.vocab, 4);
  NoGradGuard no_grad;
  const Array<double> full = model.forward(ids).value();
  KVCacheSet<double> caches(c, 2, 8);
  double worst = 0;
  for (std::size_t t = 0; t < 8; ++t) {
    Indices step = Indices::from_shape({2, 1});
    for (std::size_t b = 0; b < 2; ++b) step(b, 0) = ids(b, t);
    const Array<double> logits = model.forward(step, caches).value();
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t v = 0; v < c.vocab; ++v)
        worst = std::max(worst, std::abs(logits(b, 0, v) - full(b, t, v)));
  }
  CHECK(worst <= 1e-12);
}

TEST_CASE("moe inference: with a capacity, a sequence's logits do not depend on its batch",
          "[moe][capacity]") {
  const TransformerConfig c = tight_moe();
  Transformer<double> model(c);
  const Indices batch = random_tokens(4, 8, c.vocab, 6);
  Indices alone = Indices::from_shape({1, 8});
  for (std::size_t t = 0; t < 8; ++t) alone(0, t) = batch(0, t);
  const Array<double> together = model.forward(batch).value();
  const Array<double> by_itself = model.forward(alone).value();
  Array<double> first_row = Array<double>::from_shape({1, 8, c.vocab});
  std::copy(together.data(), together.data() + first_row.size(), first_row.data());
  CHECK(largest_difference(first_row, by_itself) <= 1e-12);
}

TEST_CASE("moe inference: with a capacity, cached and uncached generation agree",
          "[moe][capacity][generation]") {
  Transformer<double> model(tight_moe());
  // experts ten times their initial scale dominate the residual stream: a choice dropped in
  // one path and not in the other changes the greedy token
  for (const NamedParameter<double>& p : model.named_parameters())
    if (p.name.find(".moe.experts.") != std::string::npos) {
      Tensor<double> weight = p.tensor;
      weight.value() *= 10.0;
    }
  GenerateOptions o;
  o.max_new_tokens = 4;
  o.sampling.temperature = 0;  // greedy
  std::size_t differing = 0;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const Indices drawn = random_tokens(1, 4, 11, 100 + seed);
    const std::vector<std::int64_t> prompt(drawn.begin(), drawn.end());
    std::vector<std::vector<std::int64_t>> outputs;
    for (const bool use_cache : {true, false}) {
      o.use_cache = use_cache;
      Generator gen(1);
      outputs.push_back(generate(model, prompt, o, gen).tokens);
    }
    differing += outputs[0] != outputs[1];
  }
  CHECK(differing == 0);
}

TEST_CASE("moe inference: training forwards still drop over capacity, evaluation never does",
          "[moe][capacity]") {
  const TransformerConfig c = tight_moe();
  Transformer<double> model(c);
  const Indices tokens = random_tokens(2, 6, c.vocab, 1), targets = random_tokens(2, 6, c.vocab, 2);
  model.training_loss(tokens, targets);
  for (const Block<double>& b : model.blocks()) {
    CHECK(b.moe()->routing().capacity == 2);  // ceil(0.25 * 12 * 2 / 4)
    CHECK(b.moe()->routing().dropped_fraction() > 0);
  }
  model.loss(tokens, targets);
  for (const Block<double>& b : model.blocks()) {
    CHECK(b.moe()->routing().capacity == 0);
    CHECK(b.moe()->routing().dropped == 0);
  }
}
