// The model's parts the saturation study relies on: the learned per-head temperature, the
// QK-norm gains' initial value, the kept scores and head ablation. Each is checked against
// an independent computation, and each check is shown to fail on the trap it guards.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/gradcheck.hpp"
#include "autograd/tape.hpp"
#include "helpers.hpp"
#include "nn/config.hpp"
#include "nn/transformer.hpp"

using namespace tapegrad;
using tapegrad::test::random_tokens;

namespace {

TransformerConfig small(std::size_t layers = 2, std::size_t heads = 2) {
  TransformerConfig c;
  c.vocab = 7;
  c.context = 6;
  c.d_model = 8;
  c.heads = heads;
  c.layers = layers;
  c.seed = 5;
  return c;
}

double max_gap(const Tensor<double>& a, const Tensor<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a.data()[i] - b.data()[i]));
  return m;
}

}  // namespace

TEST_CASE("attention temperature: unscaled + temperature 1/sqrt(d_head) is the scaled model at init", "[saturation][model]") {
  TransformerConfig scaled = small(), tempered = small(), unscaled = small();
  tempered.attention_scale = 1.0;
  tempered.learned_temperature = true;
  unscaled.attention_scale = 1.0;
  Transformer<double> a(scaled), b(tempered), c(unscaled);
  const Indices tokens = random_tokens(2, 6, 7, 3);
  NoGradGuard no_grad;
  CHECK(max_gap(a.forward(tokens), b.forward(tokens)) < 1e-12);
  // the trap: without the temperature the unscaled model's logits differ
  CHECK(max_gap(a.forward(tokens), c.forward(tokens)) > 1e-6);
  // one scalar per head and layer, each 1/sqrt(d_head) = 1/2
  const Tensor<double>& t = b.blocks()[0].attention().temperature();
  REQUIRE(t.shape() == Shape{2, 1});
  CHECK(t.data()[0] == Approx(0.5));
  CHECK(b.parameter_count() == count_parameters(tempered).total());
  CHECK(count_parameters(tempered).temperature == 2 * 2);
}

TEST_CASE("attention temperature: its gradient passes gradcheck and training can change it", "[saturation][model][gradcheck]") {
  TransformerConfig c = small(1, 2);
  c.learned_temperature = true;
  c.attention_scale = 1.0;
  Transformer<double> model(c);
  const Indices tokens = random_tokens(2, 5, 7, 11), targets = random_tokens(2, 5, 7, 12);
  const Tensor<double> t = model.blocks()[0].attention().temperature();
  TensorFunction<double> f = [&](const std::vector<Tensor<double>>&) { return model.loss(tokens, targets); };
  tapegrad::test::require_gradcheck<double>(f, {t});
  model.loss(tokens, targets).backward();
  REQUIRE(t.has_grad());
  CHECK(std::abs(t.grad().data()[0]) > 0);
}

TEST_CASE("QK-norm gain: the initial value reaches both gains and sets the score spread", "[saturation][model]") {
  TransformerConfig c = small(1, 1);
  c.d_model = 64;
  c.qk_norm = true;
  c.attention_scale = 1.0;
  c.qk_norm_gain = std::pow(64.0, -0.25);
  Transformer<double> model(c);
  std::size_t gains = 0;
  for (const auto& p : model.named_parameters())
    if (p.name.find("_norm.weight") != std::string::npos) {
      ++gains;
      for (std::size_t i = 0; i < p.tensor.size(); ++i) CHECK(p.tensor.data()[i] == Approx(c.qk_norm_gain));
    }
  CHECK(gains == 2);
  // The scores are gain^2 times q^.k^ of unit-RMS heads: with gain 64^(-1/4) and
  // independent directions their spread is about 1, against sqrt(64) = 8 at gain 1.
  auto spread = [](Transformer<double>& m) {
    NoGradGuard no_grad;
    const CachedRun<double> run = run_with_cache(m, random_tokens(8, 6, 7, 4), {"blocks.0.attn.scores"});
    const Tensor<double>& s = run.cache["blocks.0.attn.scores"];
    double sum = 0, sq = 0;
    std::size_t n = 0;
    for (std::size_t i = 0; i < s.size(); ++i)
      if (std::isfinite(s.data()[i])) {
        sum += s.data()[i];
        sq += s.data()[i] * s.data()[i];
        ++n;
      }
    return std::sqrt(sq / double(n) - (sum / double(n)) * (sum / double(n)));
  };
  TransformerConfig unit = c;
  unit.qk_norm_gain = 1.0;
  Transformer<double> at_one(unit);
  const double small_spread = spread(model), big_spread = spread(at_one);
  CHECK(big_spread / small_spread == Approx(8.0).epsilon(1e-9));  // exactly gain^2 apart
  CHECK(small_spread > 0.4);
  CHECK(small_spread < 2.5);
}

TEST_CASE("cached scores: what the softmax saw, -inf where the causal mask hides a key", "[saturation][model]") {
  Transformer<double> model(small(1, 2));
  NoGradGuard no_grad;
  const CachedRun<double> run = run_with_cache(model, random_tokens(1, 6, 7, 9),
                                               {"blocks.0.attn.scores", "blocks.0.attn.pattern"});
  const Tensor<double>& s = run.cache["blocks.0.attn.scores"];
  const Tensor<double>& w = run.cache["blocks.0.attn.pattern"];
  REQUIRE(s.shape() == Shape{1, 2, 6, 6});
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t i = 0; i < 6; ++i) {
      const double* row = s.data() + (h * 6 + i) * 6;
      const double* wr = w.data() + (h * 6 + i) * 6;
      double z = 0;
      for (std::size_t j = 0; j <= i; ++j) z += std::exp(row[j]);
      for (std::size_t j = 0; j < 6; ++j) {
        if (j > i) {
          CHECK(std::isinf(row[j]));
          CHECK(wr[j] == 0);
        } else {
          CHECK(wr[j] == Approx(std::exp(row[j]) / z).epsilon(1e-12));
        }
      }
    }
}

TEST_CASE("head ablation: zeroing a head's output equals zeroing its rows of Wo", "[saturation][model]") {
  const TransformerConfig c = small(2, 2);
  Transformer<double> ablated(c), by_hand(c);
  const Indices tokens = random_tokens(2, 6, 7, 13);
  NoGradGuard no_grad;
  const Tensor<double> intact = by_hand.forward(tokens);
  ablated.ablate_head(1, 0);
  // by hand: head 0 of layer 1 owns rows 0..d_head-1 of that layer's Wo (d_head 4)
  Tensor<double> Wo = by_hand.blocks()[1].attention().Wo();
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t col = 0; col < 8; ++col) Wo.value().data()[r * 8 + col] = 0;
  const Tensor<double> a = ablated.forward(tokens), b = by_hand.forward(tokens);
  CHECK(max_gap(a, b) < 1e-12);
  CHECK(max_gap(a, intact) > 1e-6);  // the ablation changed something
  ablated.clear_head_masks();
  CHECK(max_gap(ablated.forward(tokens), intact) < 1e-12);
  tapegrad::test::require_shape_error([&] { ablated.ablate_head(2, 0); },
                                      {"Transformer::set_head_mask", "layer 2", "2 layers"});
  tapegrad::test::require_shape_error([&] { ablated.ablate_head(0, 2); },
                                      {"Transformer::ablate_head", "head 2", "2 heads"});
  tapegrad::test::require_shape_error(
      [&] { ablated.set_head_mask(0, {true, false, true}); },
      {"MultiHeadAttention::set_head_mask", "3 entries", "2 heads"});
}
