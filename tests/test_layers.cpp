// nn/layers and nn/block: every module's forward (shape and a value by hand) and its
// gradient with respect to its input and every parameter (gradcheck in double).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "helpers.hpp"
#include "nn/block.hpp"
#include "nn/layers.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

// Sets a parameter's values from a row-major list (the module keeps the same handle).
template <class T>
void set(Tensor<T> p, const std::vector<double>& values) {
  REQUIRE(p.size() == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) p.value().data()[i] = static_cast<T>(values[i]);
}

// The input first, then every parameter of `m`.
template <class T>
std::vector<Tensor<T>> with_parameters(const Tensor<T>& x, const Module<T>& m) {
  std::vector<Tensor<T>> in{x};
  for (const Tensor<T>& p : m.parameters()) in.push_back(p);
  return in;
}

double sample_std(const Array<double>& a) {
  double s = 0, s2 = 0;
  for (double v : a) s += v, s2 += v * v;
  const double n = static_cast<double>(a.size()), mean = s / n;
  return std::sqrt(s2 / n - mean * mean);
}

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Causal multi-head attention written as loops, independent of ops/attention:
// for head h, q_t = x_t Wq[:, h*dh:(h+1)*dh] (same for k, v), out_t = sum_{s<=t} a_ts v_s
// with a_t = softmax_s(scale * q_t . k_s), concatenated over heads, then @ Wo.
Array<double> naive_causal_mha(const Array<double>& x, const Array<double>& Wq,
                               const Array<double>& Wk, const Array<double>& Wv,
                               const Array<double>& Wo, std::size_t H, double scale) {
  const std::size_t B = x.shape()[0], T = x.shape()[1], D = x.shape()[2], dh = D / H;
  auto project = [&](const Array<double>& W) {
    Array<double> y = Array<double>::from_shape({B, T, D});
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t t = 0; t < T; ++t)
        for (std::size_t j = 0; j < D; ++j) {
          double s = 0;
          for (std::size_t i = 0; i < D; ++i) s += x(b, t, i) * W(i, j);
          y(b, t, j) = s;
        }
    return y;
  };
  const Array<double> q = project(Wq), k = project(Wk), v = project(Wv);
  Array<double> merged = Array<double>::from_shape({B, T, D});
  merged.fill(0.0);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t t = 0; t < T; ++t) {
        std::vector<double> a(t + 1);
        double top = -1e300, z = 0;
        for (std::size_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (std::size_t j = 0; j < dh; ++j) dot += q(b, t, h * dh + j) * k(b, s, h * dh + j);
          a[s] = scale * dot;
          top = std::max(top, a[s]);
        }
        for (double& e : a) z += (e = std::exp(e - top));
        for (std::size_t s = 0; s <= t; ++s)
          for (std::size_t j = 0; j < dh; ++j) merged(b, t, h * dh + j) += a[s] / z * v(b, s, h * dh + j);
      }
  Array<double> out = Array<double>::from_shape({B, T, D});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t j = 0; j < D; ++j) {
        double s = 0;
        for (std::size_t i = 0; i < D; ++i) s += merged(b, t, i) * Wo(i, j);
        out(b, t, j) = s;
      }
  return out;
}

}  // namespace

TEST_CASE("Linear computes x @ W + b with W stored (in, out)", "[layers]") {
  Generator gen(1);
  Linear<double> lin(2, 3, true, gen);
  CHECK(lin.named_parameters()[0].name == "weight");
  CHECK(lin.weight().shape() == Shape{2, 3});
  CHECK(lin.bias().shape() == Shape{3});
  CHECK(lin.parameter_count() == 9);
  set(lin.weight(), {1, 2, 3, 4, 5, 6});
  set(lin.bias(), {0.5, -1, 2});
  // [1, -1] @ [[1,2,3],[4,5,6]] = [-3, -3, -3]; + [0.5, -1, 2]
  check_values(lin(make<double>({1, 2}, {1, -1})), {1, 3}, {-2.5, -4, -1});
  // leading axes pass through: (2, 4, 2) -> (2, 4, 3)
  CHECK(lin(random<double>({2, 4, 2}, 3)).shape() == Shape{2, 4, 3});

  Linear<float> plain(4, 5, false, gen);
  CHECK(plain.parameter_count() == 20);
  CHECK_FALSE(plain.has_bias());
  require_shape_error([&] { plain(random<float>({3, 5}, 1)); }, {"Linear", "(3,5)", "in_features=4"});
}

TEST_CASE("Linear initialises weight ~ normal(0, std) from the generator and bias to 0", "[layers]") {
  Generator g1(7), g2(7);
  Linear<double> a(256, 256, true, g1), b(256, 256, true, g2, 0.5);
  CHECK(sample_std(a.weight().value()) == Approx(0.02).epsilon(0.02));
  CHECK(sample_std(b.weight().value()) == Approx(0.5).epsilon(0.02));
  CHECK(xt::amax(xt::abs(a.bias().value()))() == 0.0);
  // the same generator state gives the same draws, scaled by std
  CHECK(b.weight().value()(3, 4) == Approx(a.weight().value()(3, 4) * 25.0).epsilon(1e-12));
}

TEST_CASE("Linear gradcheck with respect to input weight and bias", "[layers]") {
  Generator gen(2);
  Linear<double> lin(4, 3, true, gen, 0.5);
  Tensor<double> x = random<double>({2, 5, 4}, 11);
  require_gradcheck<double>([&](const std::vector<Tensor<double>>& in) { return lin(in[0]); },
                            with_parameters(x, lin));
  Linear<double> nobias(4, 3, false, gen, 0.5);
  require_gradcheck<double>([&](const std::vector<Tensor<double>>& in) { return nobias(in[0]); },
                            with_parameters(x, nobias));
}

TEST_CASE("Embedding looks up rows and scatters their gradient back", "[layers]") {
  Generator gen(3);
  Embedding<double> emb(5, 3, gen, 1.0);
  CHECK(emb.weight().shape() == Shape{5, 3});
  Indices ids = {{4, 0, 4}, {1, 2, 3}};
  Tensor<double> y = emb(ids);
  REQUIRE(y.shape() == Shape{2, 3, 3});
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(y.value()(0, 0, j) == emb.weight().value()(4, j));
    CHECK(y.value()(1, 2, j) == emb.weight().value()(3, j));
  }
  require_gradcheck<double>([&](const std::vector<Tensor<double>>&) { return emb(ids); },
                            emb.parameters());
  Indices bad = {{0, 5}};
  require_shape_error([&] { emb(bad); }, {"embedding", "5"});
}

TEST_CASE("LayerNorm and RMSNorm normalise the last axis with gain and bias", "[layers]") {
  LayerNorm<double> ln(4);
  CHECK(ln.named_parameters().size() == 2);
  CHECK(ln.parameter("weight").shape() == Shape{4});
  // x = [1, 2, 3, 4]: mean 2.5, biased variance 1.25
  const double r = 1.0 / std::sqrt(1.25 + 1e-5);
  check_values(ln(make<double>({1, 4}, {1, 2, 3, 4})), {1, 4},
               {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r});
  set(ln.parameter("weight"), {2, 2, 2, 2});
  set(ln.parameter("bias"), {1, 0, 0, 0});
  check_values(ln(make<double>({1, 4}, {1, 2, 3, 4})), {1, 4},
               {1 - 3 * r, -1 * r, 1 * r, 3 * r});

  RMSNorm<double> rms(2);
  CHECK(rms.named_parameters().size() == 1);
  CHECK(rms.kind() == NormKind::rms_norm);
  // x = [3, 4]: mean of squares 12.5
  const double q = 1.0 / std::sqrt(12.5 + 1e-5);
  check_values(rms(make<double>({2}, {3, 4})), {2}, {3 * q, 4 * q});

  Tensor<double> x = random<double>({2, 3, 4}, 5);
  set(ln.parameter("weight"), {0.5, 1.5, -1.0, 2.0});
  require_gradcheck<double>([&](const std::vector<Tensor<double>>& in) { return ln(in[0]); },
                            with_parameters(x, ln));
  RMSNorm<double> rms4(4);
  set(rms4.parameter("weight"), {0.5, 1.5, -1.0, 2.0});
  require_gradcheck<double>([&](const std::vector<Tensor<double>>& in) { return rms4(in[0]); },
                            with_parameters(x, rms4));
}

TEST_CASE("MLP is proj(gelu(fc(x)))", "[layers]") {
  Generator gen(4);
  MLP<double> mlp(1, 2, gen);
  CHECK(mlp.parameter_count() == (1 * 2 + 2) + (2 * 1 + 1));
  set(mlp.parameter("fc.weight"), {1, -1});
  set(mlp.parameter("fc.bias"), {0, 0});
  set(mlp.parameter("proj.weight"), {1, 1});
  set(mlp.parameter("proj.bias"), {0.25});
  // gelu(0.5) + gelu(-0.5) + 0.25
  check_values(mlp(make<double>({1, 1}, {0.5})), {1, 1}, {gelu_tanh(0.5) + gelu_tanh(-0.5) + 0.25});

  MLP<double> wide(4, 8, gen, 0.5, 0.5);
  Tensor<double> x = random<double>({2, 3, 4}, 6);
  CHECK(wide(x).shape() == Shape{2, 3, 4});
  require_gradcheck<double>([&](const std::vector<Tensor<double>>& in) { return wide(in[0]); },
                            with_parameters(x, wide));
}

TEST_CASE("MultiHeadAttention matches causal attention written as loops", "[layers]") {
  Generator gen(5);
  for (double scale : {0.0, 1.0}) {  // 0: the default 1/sqrt(d_head)
    MultiHeadAttention<double> attn(
        4, 2, gen, 0.7, 0.7, scale == 0.0 ? std::nullopt : std::optional<double>(scale));
    const std::vector<std::string> names{"Wq", "Wk", "Wv", "Wo"};
    for (std::size_t i = 0; i < 4; ++i) CHECK(attn.named_parameters()[i].name == names[i]);
    Tensor<double> x = random<double>({2, 3, 4}, 9);
    Tensor<double> y = attn(x);
    REQUIRE(y.shape() == Shape{2, 3, 4});
    const Array<double> want =
        naive_causal_mha(x.value(), attn.Wq().value(), attn.Wk().value(), attn.Wv().value(),
                         attn.Wo().value(), 2, scale == 0.0 ? 1.0 / std::sqrt(2.0) : scale);
    check_close<double>(y.value(), want, 1e-12);
  }
}

TEST_CASE("MultiHeadAttention shows its weights at the attn.pattern hook point", "[layers]") {
  Generator gen(6);
  MultiHeadAttention<float> attn(8, 2, gen, 0.3, 0.3);
  Hooks<float> hooks;
  hooks.cache({"attn.pattern"});
  attn.set_hooks(&hooks, "");
  {
    NoGradGuard no_grad;
    attn(random<float>({3, 4, 8}, 2));
  }
  attn.set_hooks(nullptr, "");
  const Tensor<float>& w = hooks.activations()["attn.pattern"];
  REQUIRE(w.shape() == Shape{3, 2, 4, 4});
  CHECK_FALSE(w.requires_grad());
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t i = 0; i < 4; ++i) {
        double row = 0;
        for (std::size_t j = 0; j < 4; ++j) {
          row += w.value()(b, h, i, j);
          if (j > i) CHECK(w.value()(b, h, i, j) == 0.0f);
        }
        CHECK(row == Approx(1.0).epsilon(1e-6));
      }
  require_shape_error([&] { MultiHeadAttention<float>(6, 4, gen); },
                      {"MultiHeadAttention", "d_model=6", "heads=4"});
}

TEST_CASE("MultiHeadAttention gradcheck with respect to x and Wq Wk Wv Wo", "[layers]") {
  Generator gen(7);
  for (double scale : {0.0, 1.0}) {
    MultiHeadAttention<double> attn(
        6, 3, gen, 0.5, 0.5, scale == 0.0 ? std::nullopt : std::optional<double>(scale));
    Tensor<double> x = random<double>({2, 4, 6}, 12);
    require_gradcheck<double>([&](const std::vector<Tensor<double>>& in) { return attn(in[0]); },
                              with_parameters(x, attn));
  }
}

TEST_CASE("Block is x + attn(norm1(x)) then + mlp(norm2(x))", "[layers]") {
  Generator gen(8);
  BlockConfig c;
  c.attention.d_model = 4;
  c.attention.spec.heads = 2;
  c.mlp_hidden = 8;
  Block<double> block(c, gen);
  const std::vector<std::string> names{
      "norm1.weight", "norm1.bias", "attn.Wq", "attn.Wk", "attn.Wv", "attn.Wo",
      "norm2.weight", "norm2.bias", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight",
      "mlp.proj.bias"};
  REQUIRE(block.named_parameters().size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) CHECK(block.named_parameters()[i].name == names[i]);

  // Zero output projections: both sub-layers add only the MLP's output bias, so
  // block(x) = x + proj.bias exactly.
  set(block.parameter("attn.Wo"), std::vector<double>(16, 0.0));
  set(block.parameter("mlp.proj.weight"), std::vector<double>(32, 0.0));
  set(block.parameter("mlp.proj.bias"), {1, -2, 3, 0.5});
  Tensor<double> x = random<double>({2, 3, 4}, 13);
  Tensor<double> y = block(x);
  REQUIRE(y.shape() == Shape{2, 3, 4});
  const std::vector<double> bias{1, -2, 3, 0.5};
  for (std::size_t i = 0; i < y.size(); ++i)
    CHECK(y.value().data()[i] == Approx(x.value().data()[i] + bias[i % 4]).epsilon(1e-14));
}

TEST_CASE("Block gradcheck with respect to x and every parameter", "[layers]") {
  for (NormKind norm : {NormKind::layer_norm, NormKind::rms_norm}) {
    Generator gen(9);
    BlockConfig c;
    c.attention.d_model = 6;
    c.attention.spec.heads = 2;
    c.mlp_hidden = 12;
    c.norm = norm;
    c.std = c.attention.qkv_std = c.attention.out_std = 0.5;
    Block<double> block(c, gen);
    Tensor<double> x = random<double>({2, 4, 6}, 14);
    GradcheckOptions options;
    options.max_elements = 12;
    require_gradcheck<double>([&](const std::vector<Tensor<double>>& in) { return block(in[0]); },
                              with_parameters(x, block), options);
  }
}

TEST_CASE("gemma Norm is RMSNorm with gain 1 + w and w starting at 0", "[layers][gemma]") {
  Norm<double> gemma(NormKind::gemma, 2, 1e-6);
  CHECK(gemma.named_parameters().size() == 1);
  CHECK(gemma.parameter("weight").value()(0) == 0.0);
  // x = [3, 4]: mean of squares 12.5; w = 0 is the plain RMSNorm, w = [1, -0.5] gains 2, 0.5
  const double q = 1.0 / std::sqrt(12.5 + 1e-6);
  check_values(gemma(make<double>({2}, {3, 4})), {2}, {3 * q, 4 * q});
  set(gemma.parameter("weight"), {1, -0.5});
  check_values(gemma(make<double>({2}, {3, 4})), {2}, {2 * 3 * q, 0.5 * 4 * q});
  // w = -1: gain 0, whatever x is
  set(gemma.parameter("weight"), {-1, -1});
  check_values(gemma(make<double>({2}, {3, 4})), {2}, {0, 0});

  Norm<double> gemma4(NormKind::gemma, 4, 1e-6);
  set(gemma4.parameter("weight"), {0.5, 1.5, -1.0, 2.0});
  require_gradcheck<double>([&](const std::vector<Tensor<double>>& in) { return gemma4(in[0]); },
                            with_parameters(random<double>({2, 3, 4}, 5), gemma4));
}

TEST_CASE("geglu FeedForward is down(gelu(gate x) * up x)", "[layers][gemma]") {
  Generator gen(4);
  FeedForward<double> ff({1, 2, MlpKind::geglu, true, 0.5, 0.5}, gen);
  const std::vector<std::string> names{"gate.weight", "gate.bias", "up.weight", "up.bias",
                                       "down.weight", "down.bias"};
  REQUIRE(ff.named_parameters().size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) CHECK(ff.named_parameters()[i].name == names[i]);
  set(ff.parameter("gate.weight"), {1, -1});
  set(ff.parameter("gate.bias"), {0, 0.5});
  set(ff.parameter("up.weight"), {2, 3});
  set(ff.parameter("up.bias"), {0, -1});
  set(ff.parameter("down.weight"), {1, 0.5});
  set(ff.parameter("down.bias"), {0.25});
  // x = 0.5: gate (0.5, 0), up (1, 0.5); swiglu's silu in place of gelu would differ
  check_values(ff(make<double>({1, 1}, {0.5})), {1, 1},
               {gelu_tanh(0.5) * 1 + 0.5 * gelu_tanh(0.0) * 0.5 + 0.25});

  FeedForward<double> wide({4, 6, MlpKind::geglu, false, 0.5, 0.5}, gen);
  require_gradcheck<double>([&](const std::vector<Tensor<double>>& in) { return wide(in[0]); },
                            with_parameters(random<double>({2, 3, 4}, 6), wide));
}

TEST_CASE("Block with post_norms normalises each sub-layer's output before the add",
          "[layers][gemma]") {
  Generator gen(8);
  BlockConfig c;
  c.attention.d_model = 4;
  c.attention.spec.heads = 2;
  c.mlp_hidden = 8;
  c.norm = NormKind::gemma;
  c.post_norms = true;
  Block<double> block(c, gen);
  const std::vector<std::string> names{
      "norm1.weight", "attn.Wq", "attn.Wk", "attn.Wv", "attn.Wo", "norm1_post.weight",
      "norm2.weight", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias",
      "norm2_post.weight"};
  REQUIRE(block.named_parameters().size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) CHECK(block.named_parameters()[i].name == names[i]);
  // post-norm gains 1 + (-1) = 0: neither sub-layer adds anything, so block(x) = x exactly
  // (without the post norms the MLP's output bias alone would be added)
  set(block.parameter("mlp.proj.bias"), {1, -2, 3, 0.5});
  set(block.parameter("norm1_post.weight"), std::vector<double>(4, -1.0));
  set(block.parameter("norm2_post.weight"), std::vector<double>(4, -1.0));
  const Tensor<double> x = random<double>({2, 3, 4}, 13);
  check_close<double>(block(x).value(), x.value(), 0.0);
  // gain 1: the MLP's output, a constant bias row, normalises to bias / rms(bias)
  set(block.parameter("attn.Wo"), std::vector<double>(16, 0.0));
  set(block.parameter("mlp.proj.weight"), std::vector<double>(32, 0.0));
  set(block.parameter("norm2_post.weight"), std::vector<double>(4, 0.0));
  const double r = std::sqrt((1 + 4 + 9 + 0.25) / 4 + 1e-5);
  const Tensor<double> y = block(x);
  const std::vector<double> bias{1, -2, 3, 0.5};
  for (std::size_t i = 0; i < y.size(); ++i)
    CHECK(y.value().data()[i] == Approx(x.value().data()[i] + bias[i % 4] / r).epsilon(1e-14));
}

TEST_CASE("Block with post_norms gradcheck with respect to x and every parameter",
          "[layers][gemma]") {
  for (NormKind norm : {NormKind::layer_norm, NormKind::gemma})
    for (MlpKind mlp : {MlpKind::geglu, MlpKind::none}) {
      INFO("norm " << int(norm) << " mlp " << int(mlp));
      Generator gen(9);
      BlockConfig c;
      c.attention.d_model = 6;
      c.attention.spec.heads = 2;
      c.mlp_hidden = 12;
      c.mlp = mlp;
      c.norm = norm;
      c.post_norms = true;
      c.std = c.attention.qkv_std = c.attention.out_std = 0.5;
      Block<double> block(c, gen);
      // gains away from their starting values, so that w and 1 + w differ in the gradient
      Generator spread(3);
      for (const auto& p : block.named_parameters())
        if (p.name.find("norm") != std::string::npos) {
          Tensor<double> t = p.tensor;
          t.value() = Tensor<double>::randn(t.shape(), spread, 0.2, 0.5).value();
        }
      GradcheckOptions options;
      options.max_elements = 12;
      require_gradcheck<double>([&](const std::vector<Tensor<double>>& in) { return block(in[0]); },
                                with_parameters(random<double>({2, 4, 6}, 14), block), options);
    }
}
