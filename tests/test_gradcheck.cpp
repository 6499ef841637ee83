// autograd/gradcheck: it passes correct ops, and it must be able to fail. Deliberately
// wrong ops are defined here through record<T>, the one way ops join the tape.
#include <cmath>
#include <limits>

#include "helpers.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {
// z = a^2 with a backward scaled by `factor`: factor 2 is right, anything else is wrong.
template <class T>
Tensor<T> square_with(const Tensor<T>& a, T factor) {
  return record<T>("square_with", {a}, Array<T>(a.value() * a.value()),
                   [factor](BackwardContext<T>& c) {
                     c.accumulate(0, c.grad() * c.input(0) * factor);
                   });
}

// z = a * b whose backward forgets b's gradient: right for a, wrong for b.
template <class T>
Tensor<T> mul_forgetting_b(const Tensor<T>& a, const Tensor<T>& b) {
  return record<T>("mul_forgetting_b", {a, b}, Array<T>(a.value() * b.value()),
                   [](BackwardContext<T>& c) {
                     c.accumulate(0, c.grad() * c.input(1));
                     c.accumulate(1, Array<T>(xt::zeros<T>(c.input(1).shape())));
                   });
}

// z = 3 a, but the gradient of one element (`bad`) is dropped.
Tensor<double> triple_except(const Tensor<double>& a, std::size_t bad) {
  return record<double>("triple_except", {a}, Array<double>(a.value() * 3.0),
                        [bad](BackwardContext<double>& c) {
                          Array<double> g = c.grad() * 3.0;
                          g.data()[bad] = 0.0;
                          c.accumulate(0, std::move(g));
                        });
}

// z = a with a backward that produces NaN.
Tensor<double> identity_nan(const Tensor<double>& a) {
  return record<double>("identity_nan", {a}, Array<double>(a.value()), [](BackwardContext<double>& c) {
    c.accumulate(0, c.grad() * std::numeric_limits<double>::quiet_NaN());
  });
}
}  // namespace

TEST_CASE("gradcheck defaults are PyTorch's double precision tolerances", "[gradcheck]") {
  const GradcheckOptions d;
  CHECK(d.eps == 1e-6);
  CHECK(d.atol == 1e-5);
  CHECK(d.rtol == 1e-3);
  CHECK(d.max_elements == 0);
  const GradcheckOptions f = GradcheckOptions::for_float();
  CHECK(f.eps > d.eps);
  CHECK(f.atol >= d.atol);
}

TEST_CASE("gradcheck passes a correct op and reports tiny errors", "[gradcheck]") {
  auto x = random<double>({3, 4}, 1);
  const GradcheckResult r =
      gradcheck<double>([](const auto& v) { return square_with(v[0], 2.0); }, {x});
  INFO(r.to_string());
  CHECK(r.passed);
  REQUIRE(r.inputs.size() == 1);
  CHECK(r.inputs[0].passed);
  CHECK(r.inputs[0].checked == 12);
  CHECK(r.inputs[0].shape == Shape{3, 4});
  CHECK(r.inputs[0].max_abs_error < 1e-8);
  CHECK(r.inputs[0].max_rel_error < 1e-8);
}

TEST_CASE("gradcheck fails a deliberately wrong backward", "[gradcheck]") {
  auto x = random<double>({3, 4}, 2);
  // d(a^2)/da = 2a, not a
  const GradcheckResult r =
      gradcheck<double>([](const auto& v) { return square_with(v[0], 1.0); }, {x});
  CHECK_FALSE(r.passed);
  REQUIRE(r.inputs.size() == 1);
  CHECK_FALSE(r.inputs[0].passed);
  // the analytic gradient is half the true one: the error is half the largest gradient
  CHECK(r.inputs[0].max_rel_error == Approx(0.5).epsilon(1e-6));
  CHECK_THAT(r.to_string(), Catch::Contains("FAIL"));
  // even a 1% error is beyond rtol = 1e-3
  const GradcheckResult close =
      gradcheck<double>([](const auto& v) { return square_with(v[0], 2.02); }, {x});
  CHECK_FALSE(close.passed);
  CHECK(close.inputs[0].max_rel_error == Approx(0.01).epsilon(1e-4));
  CHECK(Tape<double>::active().size() == 0);
}

TEST_CASE("a float32 gradcheck failure says that finite differences need float64",
          "[gradcheck][float]") {
  // a correct backward, checked in float with double's defaults: the differences are noise
  auto x = random<float>({3, 4}, 4);
  const GradcheckResult r =
      gradcheck<float>([](const auto& v) { return square_with(v[0], 2.0f); }, {x});
  CHECK_FALSE(r.passed);
  CHECK_THAT(r.to_string(), Catch::Contains("FAIL") &&
                                Catch::Contains("hint: finite differences need float64"));
  // the hint is float's: a double failure and a float pass print none
  const GradcheckResult wrong = gradcheck<double>(
      [](const auto& v) { return square_with(v[0], 1.0); }, {random<double>({3, 4}, 2)});
  CHECK_FALSE(wrong.passed);
  CHECK_THAT(wrong.to_string(), !Catch::Contains("hint"));
  const GradcheckResult spot = gradcheck<float>(
      [](const auto& v) { return square_with(v[0], 2.0f); }, {x}, GradcheckOptions::for_float());
  CHECK(spot.passed);
  CHECK_THAT(spot.to_string(), !Catch::Contains("hint"));
}

TEST_CASE("gradcheck in float32 mode also catches a wrong backward", "[gradcheck][float]") {
  auto x = random<float>({5}, 3);
  const auto opt = GradcheckOptions::for_float();
  CHECK(gradcheck<float>([](const auto& v) { return square_with(v[0], 2.0f); }, {x}, opt).passed);
  CHECK_FALSE(gradcheck<float>([](const auto& v) { return square_with(v[0], 1.0f); }, {x}, opt).passed);
}

TEST_CASE("gradcheck reports each input separately", "[gradcheck]") {
  auto a = random<double>({2, 3}, 4);
  auto b = random<double>({2, 3}, 5);
  const GradcheckResult r =
      gradcheck<double>([](const auto& v) { return mul_forgetting_b(v[0], v[1]); }, {a, b});
  INFO(r.to_string());
  CHECK_FALSE(r.passed);
  REQUIRE(r.inputs.size() == 2);
  CHECK(r.inputs[0].passed);
  CHECK_FALSE(r.inputs[1].passed);
  CHECK(r.inputs[1].max_rel_error == Approx(1.0));  // the whole gradient is missing
}

TEST_CASE("a NaN gradient is a failure with an infinite error", "[gradcheck]") {
  auto x = random<double>({4}, 6);
  const GradcheckResult r = gradcheck<double>([](const auto& v) { return identity_nan(v[0]); }, {x});
  CHECK_FALSE(r.passed);
  CHECK(std::isinf(r.inputs[0].max_abs_error));
}

TEST_CASE("gradcheck skips inputs that do not require grad", "[gradcheck]") {
  auto a = random<double>({2, 3}, 7);
  auto b = random<double>({2, 3}, 8, false);
  // b's backward is wrong, but b is a constant, so only a is checked
  const GradcheckResult r =
      gradcheck<double>([](const auto& v) { return mul_forgetting_b(v[0], v[1]); }, {a, b});
  INFO(r.to_string());
  CHECK(r.passed);
  REQUIRE(r.inputs.size() == 2);
  CHECK(r.inputs[0].checked == 6);
  CHECK(r.inputs[1].checked == 0);
  CHECK(r.inputs[1].passed);
  CHECK(r.inputs[1].shape == Shape{2, 3});
  CHECK_FALSE(b.has_grad());
  // an input the output ignores has gradient 0, numerically and analytically
  CHECK(gradcheck<double>([](const auto& v) { return v[1] * 2.0; }, {a, random<double>({2}, 9)}).passed);
  // nothing to check at all is an error, not a silent pass
  require_shape_error([&] { gradcheck<double>([](const auto& v) { return v[0] * 2.0; }, {b}); },
                      {"gradcheck", "no input requires grad"});
}

TEST_CASE("gradcheck samples max_elements elements per input", "[gradcheck]") {
  auto x = random<double>({4, 5}, 10);
  GradcheckOptions opt;
  opt.max_elements = 5;
  auto f = [](const std::vector<Tensor<double>>& v) { return square_with(v[0], 2.0); };
  const GradcheckResult r = gradcheck<double>(f, {x}, opt);
  CHECK(r.passed);
  CHECK(r.inputs[0].checked == 5);
  opt.max_elements = 100;  // more than there are: every element once
  CHECK(gradcheck<double>(f, {x}, opt).inputs[0].checked == 20);

  // an op wrong at one element: the full check fails; a half sample fails exactly when
  // it happens to pick that element, and the same seed picks the same elements
  auto wrong = [](const std::vector<Tensor<double>>& v) { return triple_except(v[0], 13); };
  CHECK_FALSE(gradcheck<double>(wrong, {x}).passed);
  opt.max_elements = 10;
  int passed = 0, failed = 0;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    opt.seed = seed;
    const bool ok = gradcheck<double>(wrong, {x}, opt).passed;
    (ok ? passed : failed)++;
    CHECK(gradcheck<double>(wrong, {x}, opt).passed == ok);
  }
  CHECK(passed > 0);
  CHECK(failed > 0);
}

TEST_CASE("gradcheck restores inputs and leaves no tape or gradient behind", "[gradcheck]") {
  auto x = random<double>({3, 3}, 11);
  const Array<double> before = x.value();
  gradcheck<double>([](const auto& v) { return exp(v[0]) * v[0]; }, {x});
  CHECK((x.value() == before));
  CHECK_FALSE(x.has_grad());
  CHECK(Tape<double>::active().size() == 0);
  CHECK(x.requires_grad());
}
