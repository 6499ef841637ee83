// Gradient accumulation (apps/train/training.hpp's accumulate_gradients, the trainer's
// --grad-accum): a batch run as N micro-batches leaves the gradient of the whole batch's
// mean loss, in float64 to rounding, also when the micro-batches hold different numbers of
// loss positions; one micro-batch is the plain training loss's backward, bit for bit.
#ifdef TAPEGRAD_WITH_EXAMPLES
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "apps/train/training.hpp"
#include "helpers.hpp"
#include "tapegrad_nn.hpp"

using namespace tapegrad;

namespace {

TransformerConfig tiny(const std::string& arch) {
  TransformerConfig c = preset(arch);
  c.vocab = 13;
  c.context = 7;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 2;
  finish_preset(arch, c);
  c.seed = 9;
  return c;
}

// 8 sequences whose loss positions differ in number: sequence b ignores its first b targets
tasks::Batch uneven_batch(const TransformerConfig& c) {
  tasks::Batch b{test::random_tokens(8, c.context, c.vocab, 1), test::random_tokens(8, c.context, c.vocab, 2)};
  for (std::size_t s = 0; s < 8; ++s)
    for (std::size_t t = 0; t < std::min(s, c.context); ++t) b.targets(s, t) = tasks::kIgnore;
  return b;
}

template <class T>
struct Step {
  train::AccumulatedLosses losses;
  std::vector<Array<T>> grads;
};

template <class T>
Step<T> accumulated(const TransformerConfig& c, const tasks::Batch& batch, std::size_t n) {
  Transformer<T> model(c);
  Step<T> s{train::accumulate_gradients(model, batch, n), {}};
  for (const Tensor<T>& p : model.parameters()) s.grads.push_back(p.grad());
  return s;
}

double max_relative(const Array<double>& a, const Array<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a.data()[i] - b.data()[i]));
    scale = std::max(scale, std::abs(b.data()[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace

TEST_CASE("grad accumulation: N micro-batches give the whole batch's gradient in float64",
          "[grad_accum]") {
  for (const std::string arch : {"gpt2", "llama"}) {
    INFO(arch);
    const TransformerConfig c = tiny(arch);
    const tasks::Batch batch = uneven_batch(c);
    const Step<double> whole = accumulated<double>(c, batch, 1);
    for (std::size_t n : {2, 4, 8}) {
      INFO("micro-batches " << n);
      const Step<double> parts = accumulated<double>(c, batch, n);
      CHECK(parts.losses.lm == Approx(whole.losses.lm).epsilon(1e-14));
      REQUIRE(parts.grads.size() == whole.grads.size());
      for (std::size_t i = 0; i < parts.grads.size(); ++i) {
        INFO("parameter " << i);
        CHECK(max_relative(parts.grads[i], whole.grads[i]) < 1e-12);
      }
    }
    // weighting each micro-batch equally instead (the mean of the micro-batch means) is a
    // different gradient here: the test above can tell them apart
    Transformer<double> model(c);
    for (std::size_t m = 0; m < 4; ++m) {
      tasks::Batch slice{Indices::from_shape({2, c.context}), Indices::from_shape({2, c.context})};
      std::copy_n(batch.tokens.data() + m * 2 * c.context, 2 * c.context, slice.tokens.data());
      std::copy_n(batch.targets.data() + m * 2 * c.context, 2 * c.context, slice.targets.data());
      (model.loss(slice.tokens, slice.targets) * 0.25).backward();
    }
    CHECK(max_relative(model.parameters()[0].grad(), whole.grads[0]) > 1e-6);
  }
}

TEST_CASE("grad accumulation: one micro-batch is the training loss's backward bit for bit",
          "[grad_accum]") {
  const TransformerConfig c = tiny("gpt2");
  const tasks::Batch batch = uneven_batch(c);
  const Step<float> one = accumulated<float>(c, batch, 1);
  Transformer<float> model(c);
  Tensor<float> loss = model.training_loss(batch.tokens, batch.targets, tasks::kIgnore).total;
  CHECK(one.losses.lm == double(loss.item()));
  loss.backward();
  const auto params = model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    CHECK(std::memcmp(params[i].grad().data(), one.grads[i].data(), one.grads[i].size() * sizeof(float)) == 0);
}

TEST_CASE("grad accumulation: a count that does not divide the batch is refused", "[grad_accum]") {
  const TransformerConfig c = tiny("gpt2");
  Transformer<float> model(c);
  CHECK_THROWS_WITH(train::accumulate_gradients(model, uneven_batch(c), 3),
                    Catch::Contains("--grad-accum 3") && Catch::Contains("8 sequences"));
}
#endif
