// layer_norm and rms_norm: hand-computed values, gradcheck of x, gamma and beta, agreement
// with PyTorch (tests/make_nnops_fixtures.py), the float path and the shape errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "reference.hpp"
#include "tapegrad.hpp"
#include "ops/norm.hpp"

using namespace tapegrad;

namespace {

using test::check_close;
using test::rel_error;
Array<double> fixture(const std::string& name, const std::string& file) {
  return test::load_fixture("nnops", name, file);
}
Shape shape(const Array<double>& a) { return Shape(a.shape().begin(), a.shape().end()); }

template <class T>
Tensor<T> values(const Shape& shape, const std::vector<double>& v, bool requires_grad = false) {
  Array<T> a = Array<T>::from_shape(shape);
  REQUIRE(a.size() == v.size());
  for (std::size_t i = 0; i < v.size(); ++i) a.data()[i] = static_cast<T>(v[i]);
  return Tensor<T>(std::move(a), requires_grad);
}

template <class T>
Tensor<T> random(const Shape& shape, std::uint64_t seed, bool requires_grad = true,
                 double mean = 0.0, double stddev = 1.0) {
  Generator gen(seed);
  return Tensor<T>::randn(shape, gen, T(mean), T(stddev), requires_grad);
}

void check_gradients(const TensorFunction<double>& f, const std::vector<Tensor<double>>& in) {
  const GradcheckResult r = gradcheck<double>(f, in);
  INFO(r.to_string());
  CHECK(r.passed);
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (!in[i].requires_grad()) continue;
    CHECK(r.inputs[i].checked == in[i].size());
    CHECK(r.inputs[i].max_rel_error < 1e-6);
  }
}

}  // namespace

TEST_CASE("layer_norm of 1 2 3 with gamma 1 and beta 0 is -1.2247 0 1.2247", "[norm]") {
  auto x = values<double>({3}, {1, 2, 3});
  auto y = layer_norm(x, Tensor<double>::ones({3}), Tensor<double>::zeros({3}), 0.0);
  // mean 2, biased variance 2/3: (x - 2) / sqrt(2/3) = (x - 2) * 1.2247448713915890
  const double a = std::sqrt(1.5);
  CHECK(y.value()(0) == Approx(-a).epsilon(1e-14));
  CHECK(y.value()(1) == Approx(0.0).margin(1e-15));
  CHECK(y.value()(2) == Approx(a).epsilon(1e-14));
}

TEST_CASE("layer_norm applies eps inside the root then gamma and beta per column", "[norm]") {
  // row 0: [1 2 3] with eps 1: rstd = 1/sqrt(2/3 + 1) = sqrt(0.6)
  // row 1: constant [4 4 4]: x - mean = 0, so y = beta exactly (no 0/0 thanks to eps)
  auto x = values<double>({2, 3}, {1, 2, 3, 4, 4, 4});
  auto gamma = values<double>({3}, {2.0, 1.0, 0.5});
  auto beta = values<double>({3}, {0.5, -1.0, 0.0});
  auto y = layer_norm(x, gamma, beta, 1.0);
  const double r = std::sqrt(0.6);
  CHECK(y.value()(0, 0) == Approx(-r * 2.0 + 0.5).epsilon(1e-14));
  CHECK(y.value()(0, 1) == Approx(-1.0).epsilon(1e-14));
  CHECK(y.value()(0, 2) == Approx(r * 0.5).epsilon(1e-14));
  CHECK(y.value()(1, 0) == 0.5);
  CHECK(y.value()(1, 1) == -1.0);
  CHECK(y.value()(1, 2) == 0.0);
}

TEST_CASE("rms_norm of 3 4 divides by sqrt(12.5) then scales by gamma", "[norm]") {
  auto x = values<double>({1, 2}, {3, 4});
  auto y = rms_norm(x, values<double>({2}, {1.0, 2.0}), 0.0);
  const double rms = std::sqrt(12.5);  // mean of 9 and 16
  CHECK(y.value()(0, 0) == Approx(3.0 / rms).epsilon(1e-14));
  CHECK(y.value()(0, 1) == Approx(2.0 * 4.0 / rms).epsilon(1e-14));
  // with eps: 1 / sqrt(12.5 + 0.5) = 1 / sqrt(13)
  auto z = rms_norm(x, Tensor<double>::ones({2}), 0.5);
  CHECK(z.value()(0, 0) == Approx(3.0 / std::sqrt(13.0)).epsilon(1e-14));
}

TEST_CASE("layer_norm and rms_norm are each one fused node on the tape", "[norm]") {
  Tape<double>::active().clear();
  auto x = random<double>({2, 4}, 1);
  auto g = random<double>({4}, 2);
  auto b = random<double>({4}, 3);
  auto y = layer_norm(x, g, b);
  REQUIRE(Tape<double>::active().size() == 1);
  CHECK(Tape<double>::active().to_string() == "#0 layer_norm leaf (2,4), leaf (4), leaf (4) -> (2,4)\n");
  auto z = rms_norm(x, g);
  CHECK(Tape<double>::active().size() == 2);
  Tape<double>::active().clear();
}

TEST_CASE("layer_norm gradcheck in double for x gamma and beta", "[norm]") {
  auto x = random<double>({2, 3, 5}, 10);
  auto g = random<double>({5}, 11, true, 1.0, 0.5);
  auto b = random<double>({5}, 12);
  const auto f = [](const std::vector<Tensor<double>>& in) {
    return layer_norm(in[0], in[1], in[2], 1e-5);
  };
  check_gradients(f, {x, g, b});
  SECTION("one row of rank 1") {
    check_gradients(f, {random<double>({7}, 13), random<double>({7}, 14), random<double>({7}, 15)});
  }
  SECTION("a large eps, which the backward must carry through rstd") {
    check_gradients([](const std::vector<Tensor<double>>& in) {
      return layer_norm(in[0], in[1], in[2], 0.7);
    }, {x, g, b});
  }
  SECTION("only some inputs require grad") {
    auto xc = random<double>({2, 3, 5}, 10, false);
    check_gradients(f, {xc, g, b});
    auto gc = random<double>({5}, 11, false);
    check_gradients(f, {x, gc, random<double>({5}, 12, false)});
  }
}

TEST_CASE("rms_norm gradcheck in double for x and gamma", "[norm]") {
  const auto f = [](const std::vector<Tensor<double>>& in) { return rms_norm(in[0], in[1], 1e-5); };
  check_gradients(f, {random<double>({2, 3, 5}, 20), random<double>({5}, 21, true, 1.0, 0.5)});
  check_gradients(f, {random<double>({6}, 22), random<double>({6}, 23)});
  check_gradients(f, {random<double>({4, 3}, 24, false), random<double>({3}, 25)});
  check_gradients(f, {random<double>({4, 3}, 26), random<double>({3}, 27, false)});
}

TEST_CASE("layer_norm input gradient sums to zero per row and rms_norm's is orthogonal to x", "[norm]") {
  // Identities: layer_norm(x + c) = layer_norm(x), so each row of dx sums to 0; with
  // eps = 0, rms_norm(s x) = rms_norm(x), so each row of dx is orthogonal to x.
  auto x = random<double>({3, 6}, 30);
  auto g = random<double>({6}, 31);
  auto seed = random<double>({3, 6}, 32, false).value();
  layer_norm(x, g, Tensor<double>::zeros({6}, true), 1e-5).backward(seed);
  for (std::size_t r = 0; r < 3; ++r) {
    double s = 0.0;
    for (std::size_t j = 0; j < 6; ++j) s += x.grad()(r, j);
    CHECK(std::abs(s) < 1e-13);
  }
  x.zero_grad();
  rms_norm(x, g, 0.0).backward(seed);
  for (std::size_t r = 0; r < 3; ++r) {
    double s = 0.0;
    for (std::size_t j = 0; j < 6; ++j) s += x.grad()(r, j) * x.value()(r, j);
    CHECK(std::abs(s) < 1e-13);
  }
}

TEST_CASE("layer_norm agrees with torch layer_norm to 1e-10", "[norm]") {
  for (const std::string name : {"layer_norm_3d", "layer_norm_offset"}) {
    INFO(name);
    Tensor<double> x(fixture(name, "x"), true), g(fixture(name, "gamma"), true),
        b(fixture(name, "beta"), true);
    const double eps = fixture(name, "eps")(0);
    auto y = layer_norm(x, g, b, eps);
    y.backward(fixture(name, "gy"));
    check_close(name + " y", y.value(), fixture(name, "y"), 1e-10);
    check_close(name + " dx", x.grad(), fixture(name, "dx"), 1e-10);
    check_close(name + " dgamma", g.grad(), fixture(name, "dgamma"), 1e-10);
    check_close(name + " dbeta", b.grad(), fixture(name, "dbeta"), 1e-10);
  }
}

TEST_CASE("rms_norm agrees with an explicit torch RMSNorm to 1e-10", "[norm]") {
  for (const std::string name : {"rms_norm_3d", "rms_norm_2d"}) {
    INFO(name);
    Tensor<double> x(fixture(name, "x"), true), g(fixture(name, "gamma"), true);
    auto y = rms_norm(x, g, fixture(name, "eps")(0));
    y.backward(fixture(name, "gy"));
    check_close(name + " y", y.value(), fixture(name, "y"), 1e-10);
    check_close(name + " dx", x.grad(), fixture(name, "dx"), 1e-10);
    check_close(name + " dgamma", g.grad(), fixture(name, "dgamma"), 1e-10);
  }
}

TEST_CASE("layer_norm and rms_norm in float match double and pass a float gradcheck", "[norm]") {
  auto xd = random<double>({4, 16}, 40, true, 0.5, 2.0);
  auto gd = random<double>({16}, 41, true, 1.0, 0.3);
  auto bd = random<double>({16}, 42);
  auto xf = Tensor<float>(xt::cast<float>(xd.value()), true);
  auto gf = Tensor<float>(xt::cast<float>(gd.value()), true);
  auto bf = Tensor<float>(xt::cast<float>(bd.value()), true);
  auto seed = random<double>({4, 16}, 43, false).value();

  auto yd = layer_norm(xd, gd, bd);
  auto yf = layer_norm(xf, gf, bf);
  yd.backward(seed);
  yf.backward(Array<float>(xt::cast<float>(seed)));
  check_close("float layer_norm y", xt::cast<double>(yf.value()), yd.value(), 1e-5);
  check_close("float layer_norm dx", xt::cast<double>(xf.grad()), xd.grad(), 1e-5);
  check_close("float layer_norm dgamma", xt::cast<double>(gf.grad()), gd.grad(), 1e-5);
  check_close("float layer_norm dbeta", xt::cast<double>(bf.grad()), bd.grad(), 1e-5);

  for (auto* t : {&xd, &gd}) t->zero_grad();
  for (auto* t : {&xf, &gf}) t->zero_grad();
  auto rd = rms_norm(xd, gd);
  auto rf = rms_norm(xf, gf);
  rd.backward(seed);
  rf.backward(Array<float>(xt::cast<float>(seed)));
  check_close("float rms y", xt::cast<double>(rf.value()), rd.value(), 1e-5);
  check_close("float rms dx", xt::cast<double>(xf.grad()), xd.grad(), 1e-5);
  check_close("float rms dgamma", xt::cast<double>(gf.grad()), gd.grad(), 1e-5);

  const GradcheckResult ln = gradcheck<float>(
      [](const std::vector<Tensor<float>>& in) { return layer_norm(in[0], in[1], in[2]); },
      {xf, gf, bf}, GradcheckOptions::for_float());
  INFO(ln.to_string());
  CHECK(ln.passed);
  const GradcheckResult rms = gradcheck<float>(
      [](const std::vector<Tensor<float>>& in) { return rms_norm(in[0], in[1]); }, {xf, gf},
      GradcheckOptions::for_float());
  INFO(rms.to_string());
  CHECK(rms.passed);
}

TEST_CASE("layer_norm and rms_norm reject wrong gamma beta x and eps naming op and shapes", "[norm]") {
  auto x = Tensor<double>::zeros({2, 3, 5});
  auto d5 = Tensor<double>::ones({5});
  auto d4 = Tensor<double>::ones({4});
  auto d15 = Tensor<double>::ones({1, 5});
  using Catch::Contains;
  CHECK_THROWS_AS(layer_norm(x, d4, d5), ShapeError);
  CHECK_THROWS_WITH(layer_norm(x, d4, d5),
                    Contains("layer_norm") && Contains("gamma") && Contains("(2,3,5)") && Contains("(4)"));
  CHECK_THROWS_WITH(layer_norm(x, d5, d15),
                    Contains("layer_norm") && Contains("beta") && Contains("(2,3,5)") && Contains("(1,5)"));
  CHECK_THROWS_WITH(rms_norm(x, d15),
                    Contains("rms_norm") && Contains("gamma") && Contains("(2,3,5)") && Contains("(1,5)"));
  CHECK_THROWS_WITH(rms_norm(Tensor<double>::scalar(1.0), d5), Contains("rms_norm") && Contains("()"));
  CHECK_THROWS_WITH(layer_norm(Tensor<double>::zeros({3, 0}), Tensor<double>::ones({0}),
                               Tensor<double>::ones({0})),
                    Contains("layer_norm") && Contains("(3,0)"));
  CHECK_THROWS_WITH(layer_norm(x, d5, d5, -1.0), Contains("layer_norm") && Contains("eps"));
  CHECK_THROWS_AS(rms_norm(Tensor<float>::zeros({2, 3}), Tensor<float>::ones({2})), std::invalid_argument);
}
