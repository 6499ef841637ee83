// nn/transformer with the gpt2 preset's parts: shapes and errors, causality, gradcheck of the
// loss, determinism, and agreement with the same model written in PyTorch
// (tests/make_transformer_gpt2_fixtures.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/io/npz.hpp"
#include "nn/optim.hpp"
#include "nn/transformer.hpp"
#include "ops/cross_entropy.hpp"
#include "test_paths.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

TransformerConfig small_config(std::uint64_t seed = 1) {
  TransformerConfig c;
  c.vocab = 7;
  c.context = 6;
  c.d_model = 8;
  c.heads = 2;
  c.layers = 2;
  c.mlp_ratio = 2;
  c.seed = seed;
  return c;
}

double sample_std(const Array<double>& a) {
  double s = 0, s2 = 0;
  for (double v : a) s += v, s2 += v * v;
  const double n = static_cast<double>(a.size()), mean = s / n;
  return std::sqrt(s2 / n - mean * mean);
}

// max |got - want| / max |want|: the error relative to the tensor's scale
double rel_error(const Array<double>& got, const xt::xarray<double>& want) {
  REQUIRE(shape_str(Shape(got.shape().begin(), got.shape().end())) == shape_str(Shape(want.shape().begin(), want.shape().end())));
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got.data()[i] - want.data()[i]));
    scale = std::max(scale, std::abs(want.data()[i]));
  }
  return diff / scale;
}

const std::string kFixtures = std::string(TAPEGRAD_FIXTURES_DIR) + "/transformer_gpt2/";

const xt::xarray<double>& expected(const std::vector<NpzEntry>& e, const std::string& name) {
  const NpzEntry* entry = find_npz_entry(e, name);
  INFO("fixture entry " << name);
  REQUIRE(entry != nullptr);
  return entry->as<double>();
}

}  // namespace

TEST_CASE("Transformer maps tokens (B T) to logits (B T V)", "[transformer][gpt2]") {
  Transformer<float> model(small_config());
  CHECK(model(random_tokens(3, 6, 7, 1)).shape() == Shape{3, 6, 7});
  CHECK(model(random_tokens(2, 1, 7, 2)).shape() == Shape{2, 1, 7});
  Tensor<float> loss = model.loss(random_tokens(2, 4, 7, 3), random_tokens(2, 4, 7, 4));
  CHECK(loss.shape() == Shape{});
  // near-uniform predictions at GPT-2 init: loss close to log(vocab)
  CHECK(loss.item() == Approx(std::log(7.0)).epsilon(0.05));
}

TEST_CASE("Transformer rejects bad tokens lengths targets and configs", "[transformer][gpt2]") {
  Transformer<float> model(small_config());
  require_shape_error([&] { model(random_tokens(1, 7, 7, 1)); }, {"Transformer", "T=7", "context of 6"});
  Indices bad = {{0, 1, 7}};
  require_shape_error([&] { model(bad); }, {"Transformer", "token 7", "[0, 7)"});
  Indices negative = {{0, -1}};
  require_shape_error([&] { model(negative); }, {"Transformer", "token -1"});
  Indices flat = {1, 2, 3};
  require_shape_error([&] { model(flat); }, {"Transformer", "(B, T)", "(3)"});
  require_shape_error([&] { model.loss(random_tokens(2, 3, 7, 1), random_tokens(2, 4, 7, 1)); },
                      {"Transformer::loss", "(2,4)", "(2,3)"});
  TransformerConfig c = small_config();
  c.heads = 3;
  require_shape_error([&] { Transformer<float>{c}; }, {"config", "d_model=8", "heads=3"});
  c = small_config();
  c.vocab = 0;
  require_shape_error([&] { Transformer<float>{c}; }, {"config", "vocab=0"});
  c = small_config();
  c.attention_scale = -1.0;
  require_shape_error([&] { Transformer<float>{c}; }, {"config", "attention_scale", "-1"});
}

TEST_CASE("Transformer is causal: later tokens do not change earlier logits", "[transformer][gpt2]") {
  Transformer<double> model(small_config());
  Indices a = random_tokens(1, 6, 7, 5), b = a;
  b(0, 4) = (a(0, 4) + 1) % 7;
  b(0, 5) = (a(0, 5) + 3) % 7;
  const Array<double> la = model(a).value(), lb = model(b).value();
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t v = 0; v < 7; ++v) CHECK(std::abs(la(0, t, v) - lb(0, t, v)) <= 1e-12);
  CHECK(std::abs(la(0, 4, 0) - lb(0, 4, 0)) > 1e-9);
}

TEST_CASE("Transformer loss gradcheck with respect to every parameter", "[transformer][gpt2]") {
  for (NormKind norm : {NormKind::layer_norm, NormKind::rms_norm}) {
    TransformerConfig c = small_config();
    c.norm = norm;
    c.attention_init = AttentionInit::variance_preserving;  // larger scores: a harder check
    Transformer<double> model(c);
    const Indices tokens = random_tokens(2, 5, 7, 6);
    Indices targets = random_tokens(2, 5, 7, 7);
    targets(1, 2) = -100;
    GradcheckOptions options;
    options.max_elements = 6;
    require_gradcheck<double>(
        [&](const std::vector<Tensor<double>>&) { return model.loss(tokens, targets); },
        model.parameters(), options);
  }
}

TEST_CASE("Transformer initialisation: GPT-2 std residual scaling and variance-preserving attention", "[transformer][gpt2]") {
  TransformerConfig c;
  c.vocab = 64;
  c.context = 64;
  c.d_model = 128;
  c.heads = 4;
  c.layers = 8;
  c.seed = 3;
  Transformer<double> gpt2(c);
  auto std_of = [](const Transformer<double>& m, const char* name) {
    return sample_std(m.parameter(name).value());
  };
  CHECK(std_of(gpt2, "tok_emb.weight") == Approx(0.02).epsilon(0.05));
  CHECK(std_of(gpt2, "blocks.0.attn.Wq") == Approx(0.02).epsilon(0.05));
  CHECK(std_of(gpt2, "blocks.3.mlp.fc.weight") == Approx(0.02).epsilon(0.05));
  // residual projections: 0.02 / sqrt(2 * 8) = 0.005
  CHECK(std_of(gpt2, "blocks.0.attn.Wo") == Approx(0.005).epsilon(0.05));
  CHECK(std_of(gpt2, "blocks.7.mlp.proj.weight") == Approx(0.005).epsilon(0.05));
  CHECK(gpt2.parameter("norm_f.weight").value()(5) == 1.0);
  CHECK(gpt2.parameter("blocks.2.mlp.fc.bias").value()(5) == 0.0);

  c.attention_init = AttentionInit::variance_preserving;
  Transformer<double> vp(c);
  // variance 1/d_model: std 1/sqrt(128)
  CHECK(std_of(vp, "blocks.1.attn.Wk") == Approx(1.0 / std::sqrt(128.0)).epsilon(0.05));
  CHECK(std_of(vp, "blocks.1.attn.Wo") == Approx(0.005).epsilon(0.05));
  CHECK(std_of(vp, "head.weight") == Approx(0.02).epsilon(0.05));
}

TEST_CASE("Transformer same seed gives bitwise identical training and another seed differs", "[transformer][gpt2]") {
  auto train = [](std::uint64_t seed, std::vector<float>& losses) {
    Transformer<float> model(small_config(seed));
    AdamW<float> opt(model.parameters(), {3e-3, 0.9, 0.999, 1e-8, 0.1});
    for (int step = 0; step < 3; ++step) {
      const Indices x = random_tokens(4, 6, 7, 100 + step), y = random_tokens(4, 6, 7, 200 + step);
      opt.zero_grad();
      Tensor<float> loss = model.loss(x, y);
      losses.push_back(loss.item());
      loss.backward();
      clip_grad_norm(model.parameters(), 1.0);
      opt.step();
    }
    return model;
  };
  std::vector<float> l1, l2, l3;
  Transformer<float> a = train(42, l1), b = train(42, l2), c = train(43, l3);
  REQUIRE(l1.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(std::memcmp(&l1[i], &l2[i], sizeof(float)) == 0);
  CHECK(l1[2] < l1[0]);  // it learns something even in three steps
  const auto& pa = a.named_parameters();
  const auto& pb = b.named_parameters();
  const auto& pc = c.named_parameters();
  bool all_equal = true, any_differs = false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    all_equal &= std::memcmp(pa[i].tensor.data(), pb[i].tensor.data(),
                             pa[i].tensor.size() * sizeof(float)) == 0;
    any_differs |= std::memcmp(pa[i].tensor.data(), pc[i].tensor.data(),
                               pa[i].tensor.size() * sizeof(float)) != 0;
  }
  CHECK(all_equal);
  CHECK(any_differs);
  CHECK(l1[0] != l3[0]);
}

TEST_CASE("Transformer shows every block's attention weights to run_with_cache", "[transformer][gpt2]") {
  Transformer<float> model(small_config());
  const CachedRun<float> run = run_with_cache(model, random_tokens(2, 5, 7, 8),
                                              {"blocks.0.attn.pattern", "blocks.1.attn.pattern"});
  REQUIRE(model.blocks().size() == 2);
  for (const char* name : {"blocks.0.attn.pattern", "blocks.1.attn.pattern"})
    CHECK(run.cache[name].shape() == Shape{2, 2, 5, 5});
}

TEST_CASE("Transformer agrees with PyTorch: logits loss and every gradient", "[transformer][gpt2]") {
  // weights.npz is written by numpy.savez (make_transformer_gpt2_fixtures.py), config included.
  Transformer<double> model = load_checkpoint<double>(kFixtures + "weights.npz");
  const TransformerConfig& c = model.config();
  CHECK(c.vocab == 11);
  CHECK(c.context == 8);
  CHECK(c.d_model == 16);
  CHECK(c.heads == 2);
  CHECK(c.layers == 2);
  CHECK_FALSE(c.attention_scale.has_value());
  const std::vector<NpzEntry> batch = load_npz(kFixtures + "batch.npz");
  const Indices tokens = find_npz_entry(batch, "tokens")->as<std::int64_t>();
  const Indices targets = find_npz_entry(batch, "targets")->as<std::int64_t>();
  const std::vector<NpzEntry> want = load_npz(kFixtures + "expected.npz");

  Tensor<double> logits = model(tokens);
  Tensor<double> loss = cross_entropy(logits, targets);
  CHECK(rel_error(logits.value(), expected(want, "logits")) <= 1e-9);
  CHECK(std::abs(loss.item() - expected(want, "loss")()) / expected(want, "loss")() <= 1e-9);
  loss.backward();
  double worst = 0;
  for (const auto& p : model.named_parameters()) {
    INFO("gradient of " << p.name);
    const double e = rel_error(p.tensor.grad(), expected(want, "grad." + p.name));
    CHECK(e <= 1e-9);
    worst = std::max(worst, e);
  }
  CHECK(worst <= 1e-9);
}

TEST_CASE("Transformer agrees with PyTorch unscaled and with RMSNorm", "[transformer][gpt2]") {
  const std::vector<NpzEntry> batch = load_npz(kFixtures + "batch.npz");
  const Indices tokens = find_npz_entry(batch, "tokens")->as<std::int64_t>();
  const std::vector<NpzEntry> want = load_npz(kFixtures + "expected.npz");
  const TransformerConfig base = read_checkpoint_config(kFixtures + "weights.npz");

  TransformerConfig unscaled = base;
  unscaled.attention_scale = 1.0;
  Transformer<double> u(unscaled);
  load_parameters(kFixtures + "weights.npz", u);
  CHECK(rel_error(u(tokens).value(), expected(want, "logits_unscaled")) <= 1e-9);
  // and the scale matters: the default-scaled logits differ from these
  CHECK(rel_error(u(tokens).value(), expected(want, "logits")) > 1e-3);

  TransformerConfig rms = base;
  rms.norm = NormKind::rms_norm;
  Transformer<double> r(rms);
  const std::vector<NpzEntry> weights = load_npz(kFixtures + "weights.npz");
  for (const auto& p : r.named_parameters()) {
    Tensor<double> t = p.tensor;
    t.value() = expected(weights, p.name);
  }
  CHECK(rel_error(r(tokens).value(), expected(want, "logits_rms")) <= 1e-9);
}

TEST_CASE("Transformer two AdamW steps agree with torch.optim.AdamW", "[transformer][gpt2]") {
  Transformer<double> model = load_checkpoint<double>(kFixtures + "weights.npz");
  const std::vector<NpzEntry> batch = load_npz(kFixtures + "batch.npz");
  const Indices tokens = find_npz_entry(batch, "tokens")->as<std::int64_t>();
  const Indices targets = find_npz_entry(batch, "targets")->as<std::int64_t>();
  const std::vector<NpzEntry> want = load_npz(kFixtures + "expected.npz");
  const xt::xarray<double>& s = expected(want, "adamw_settings");  // lr, beta1, beta2, eps, wd
  const xt::xarray<double>& losses = expected(want, "adamw_losses");
  AdamW<double> opt(model.parameters(), {s(0), s(1), s(2), s(3), s(4)});
  for (std::size_t step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor<double> loss = model.loss(tokens, targets);
    INFO("loss after " << step << " AdamW steps: " << loss.item() << " vs torch " << losses(step));
    CHECK(std::abs(loss.item() - losses(step)) / losses(step) <= 1e-9);
    if (step < 2) {
      loss.backward();
      opt.step();
    }
  }
  CHECK(losses(2) < losses(0) - 0.5);  // the steps are large enough to matter
}
