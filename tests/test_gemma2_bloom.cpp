// The gemma2 and bloom presets whole (their parts one by one are in test_layers,
// test_transformer, test_kv_cache and tests/python/test_torch_model_parts.py): every
// attention path gives the composed path's logits and gradients; a KV cache that rings the
// global layers too (as every layer's cache did before window_pattern) decodes other logits
// past the window; bf16 products train both; a checkpoint holds every value bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/kv_cache.hpp"
#include "nn/optim.hpp"
#include "nn/transformer.hpp"
#include "platform/execution.hpp"
#include "ops/reduce.hpp"
#include "temp_files.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

// gemma2: window 8 = context/2 on layers 0 and 2, layers 1 and 3 global, kv_heads 2.
TransformerConfig small(const std::string& name) {
  TransformerConfig c = preset(name);
  c.vocab = 11;
  c.context = 16;
  c.d_model = 16;
  c.heads = 4;
  c.layers = 4;
  c.seed = 21;
  finish_preset(name, c);
  return c;
}

const char* const kPresets[] = {"gemma2", "bloom"};

// Norm gains (gemma's w) and biases moved off their starting values 1 (0) and 0, where a
// part that left one out would still agree.
template <class T>
void spread_norms_and_biases(const Transformer<T>& model, std::uint64_t seed) {
  spread_attention_biases(model, seed);
  for (const auto& p : model.named_parameters()) {
    if (p.name.find("norm") == std::string::npos) continue;
    Tensor<T> t = p.tensor;
    const double centre = model.config().norm == NormKind::gemma ? 0.0 : 1.0;
    t.value() = random<T>(t.shape(), seed++, false, centre - 0.5, centre + 0.5).value();
  }
}

template <class T>
Transformer<T> spread_model(const TransformerConfig& c) {
  Transformer<T> model(c);
  spread_norms_and_biases(model, 5);
  return model;
}

template <class T>
double max_abs(const Array<T>& a) {
  double m = 0;
  for (T v : a) m = std::max(m, std::abs(double(v)));
  return m;
}

// max |a - b| / max |b|
template <class T>
double relative_error(const Array<T>& a, const Array<T>& b) {
  REQUIRE(a.shape() == b.shape());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(double(a.data()[i]) - double(b.data()[i])));
  return m / std::max(max_abs(b), 1e-300);
}

struct Run {
  Array<double> logits;
  std::vector<Array<double>> grads;
};

Run run_on_path(const TransformerConfig& c, AttentionPath path, const Indices& tokens,
                const Indices& targets) {
  Transformer<double> model = spread_model<double>(c);
  model.set_attention_path(path);
  Run r;
  r.logits = model.forward(tokens).value();
  model.loss(tokens, targets).backward();
  for (const auto& p : model.named_parameters()) r.grads.push_back(p.tensor.grad());
  Tape<double>::active().clear();
  return r;
}

Indices row(const Indices& tokens, std::size_t begin, std::size_t end) {
  Indices t = Indices::from_shape({std::size_t(1), end - begin});
  for (std::size_t i = begin; i < end; ++i) t(0, i - begin) = tokens(0, i);
  return t;
}

// Decodes tokens (1, N) one at a time through caches: the worst row's max error relative
// to that row of full (1, N, V).
double decode_error(Transformer<double>& model, KVCacheSet<double>& caches, const Indices& tokens,
                    const Array<double>& full) {
  const std::size_t V = model.config().vocab, N = tokens.shape()[1];
  double worst = 0;
  for (std::size_t t = 0; t < N; ++t) {
    const Array<double> got = model.forward(row(tokens, t, t + 1), caches).value();
    double err = 0, scale = 0;
    for (std::size_t v = 0; v < V; ++v) {
      err = std::max(err, std::abs(got.data()[v] - full.data()[t * V + v]));
      scale = std::max(scale, std::abs(full.data()[t * V + v]));
    }
    worst = std::max(worst, err / scale);
  }
  return worst;
}

}  // namespace

TEST_CASE("gemma2 and bloom: composed fused and flash attention give the same logits and "
          "gradients", "[gemma2][bloom][attention]") {
  const Indices tokens = random_tokens(2, 16, 11, 3), targets = random_tokens(2, 16, 11, 4);
  for (const char* name : kPresets) {
    const TransformerConfig c = small(name);
    const Run composed = run_on_path(c, AttentionPath::composed, tokens, targets);
    for (AttentionPath path : {AttentionPath::fused, AttentionPath::flash}) {
      INFO(name << (path == AttentionPath::fused ? " fused" : " flash"));
      const Run other = run_on_path(c, path, tokens, targets);
      CHECK(relative_error(other.logits, composed.logits) <= 1e-12);
      REQUIRE(other.grads.size() == composed.grads.size());
      for (std::size_t i = 0; i < other.grads.size(); ++i) {
        INFO("parameter " << i);
        // bk without RoPE (bloom) shifts whole rows of scores: a gradient of round-off only
        if (max_abs(composed.grads[i]) < 1e-12) CHECK(max_abs(other.grads[i]) < 1e-12);
        else CHECK(relative_error(other.grads[i], composed.grads[i]) <= 1e-11);
      }
    }
  }
}

TEST_CASE("gemma2: a KV cache ringing the global layers too is refused before it decodes "
          "other logits past the window", "[gemma2][kv_cache]") {
  const TransformerConfig c = small("gemma2");
  Transformer<double> model = spread_model<double>(c);
  const Indices tokens = random_tokens(1, c.context, c.vocab, 8);
  NoGradGuard no_grad;
  const Array<double> full = model.forward(tokens).value();
  KVCacheSet<double> right(c, 1, c.context);
  CHECK(decode_error(model, right, tokens, full) <= 1e-12);
  // the trap: each layer's cache a ring of `window` keys, the global layers' included
  TransformerConfig every_layer = c;
  every_layer.window_pattern = 0;
  KVCacheSet<double> wrong(every_layer, 1, c.context);
  CHECK_THROWS_WITH(decode_error(model, wrong, tokens, full),
                    Catch::Contains("KVCache: the attention's window=0 reaches further back "
                                    "than this cache's window=8"));
}

TEST_CASE("gemma2 and bloom: bf16 products train, near float32's steps and not equal to them",
          "[gemma2][bloom][bf16]") {
  const Indices tokens = random_tokens(4, 16, 11, 5), targets = random_tokens(4, 16, 11, 6);
  for (const char* name : kPresets) {
    INFO(name);
    const auto losses = [&](MatmulPrecision precision) {
      Transformer<float> model = spread_model<float>(small(name));
      AdamW<float> opt(model.parameters(), {1e-2});
      MatmulPrecisionGuard guard(precision);
      std::vector<double> out;
      for (int step = 0; step < 40; ++step) {
        opt.zero_grad();
        Tensor<float> loss = model.loss(tokens, targets);
        out.push_back(loss.item());
        loss.backward();
        opt.step();
      }
      return out;
    };
    const std::vector<double> bf16 = losses(MatmulPrecision::bf16), f32 = losses(MatmulPrecision::f32);
    for (double l : bf16) REQUIRE(std::isfinite(l));
    INFO("bf16 " << bf16.front() << " -> " << bf16.back() << ", f32 " << f32.front() << " -> "
                 << f32.back());
    // the same model's loss, to bf16's 8 bits; the steps then part ways, as in any two runs
    CHECK(std::abs(bf16.front() - f32.front()) <= 1e-2 * f32.front());
    CHECK(bf16.front() != f32.front());  // the products were rounded
    CHECK(bf16.back() < 0.8 * bf16.front());  // and it learns the batch as float32 does
    CHECK(f32.back() < 0.8 * f32.front());
  }
}

TEST_CASE("gemma2 and bloom: a checkpoint round trip restores every value bit for bit",
          "[gemma2][bloom][checkpoint]") {
  TempDir dir;
  for (const char* name : kPresets) {
    INFO(name);
    const TransformerConfig c = small(name);
    Transformer<float> model = spread_model<float>(c);
    const std::string path = dir.file(std::string(name) + ".npz");
    save_checkpoint(path, model);
    Transformer<float> back = load_checkpoint<float>(path);
    CHECK(back.config() == c);
    CHECK(same_parameters(model, back));
    TransformerConfig other = c;
    other.seed = 99;
    Transformer<float> into(other);
    CHECK_FALSE(same_parameters(model, into));
    load_checkpoint(path, into);
    CHECK(same_parameters(model, into));
    const Indices tokens = random_tokens(2, 16, 11, 7);
    NoGradGuard no_grad;
    CHECK(relative_error(back.forward(tokens).value(), model.forward(tokens).value()) == 0.0);
  }
}
