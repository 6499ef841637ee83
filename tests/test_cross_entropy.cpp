// cross_entropy: fused log-softmax + NLL with ignore_index. Hand values, the gradient
// (softmax - onehot) / count, all-ignored rows, gradcheck, agreement with PyTorch's
// F.cross_entropy, the float path and the errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "reference.hpp"
#include "tapegrad.hpp"
#include "ops/cross_entropy.hpp"

using namespace tapegrad;

namespace {

using test::check_close;
using test::rel_error;
Array<double> fixture(const std::string& name, const std::string& file) {
  return test::load_fixture("nnops", name, file);
}
Indices fixture_ids(const std::string& name, const std::string& file) {
  return test::load_fixture_ids("nnops", name, file);
}
Shape shape(const Array<double>& a) { return Shape(a.shape().begin(), a.shape().end()); }

template <class T>
Tensor<T> random(const Shape& shape, std::uint64_t seed, double stddev = 1.0) {
  Generator gen(seed);
  return Tensor<T>::randn(shape, gen, T(0), T(stddev), true);
}

void check_gradients(const Indices& targets, std::int64_t ignore_index, const Tensor<double>& logits) {
  const GradcheckResult r = gradcheck<double>(
      [&](const std::vector<Tensor<double>>& in) {
        return cross_entropy(in[0], targets, ignore_index);
      },
      {logits});
  INFO(r.to_string());
  CHECK(r.passed);
  CHECK(r.inputs[0].checked == logits.size());
  CHECK(r.inputs[0].max_abs_error < 1e-8);
  CHECK(r.inputs[0].max_rel_error < 1e-6);
}

}  // namespace

TEST_CASE("cross_entropy of uniform logits over C classes is log C", "[cross_entropy]") {
  for (std::int64_t C : {2, 5, 65}) {
    auto logits = Tensor<double>::full({3, static_cast<std::size_t>(C)}, 0.3);
    auto loss = cross_entropy(logits, Indices{0, C - 1, C / 2});
    CHECK(loss.shape() == Shape{});
    CHECK(loss.item() == Approx(std::log(static_cast<double>(C))).epsilon(1e-14));
  }
}

TEST_CASE("cross_entropy averages -log p over kept rows and its gradient is (p - onehot) / count", "[cross_entropy]") {
  // row 0: logits [0, log 3] -> p = [1/4, 3/4], target 1: -log(3/4)
  // row 1: ignored; row 2: logits [log 2, log 2] -> p = [1/2, 1/2], target 0: log 2
  auto logits = Tensor<double>(Array<double>{{0.0, std::log(3.0)}, {5.0, -7.0}, {std::log(2.0), std::log(2.0)}}, true);
  auto loss = cross_entropy(logits, Indices{1, -100, 0});
  CHECK(loss.item() == Approx((-std::log(0.75) + std::log(2.0)) / 2.0).epsilon(1e-14));
  CHECK(Tape<double>::active().size() == 1);  // one fused node, not log_softmax + gather
  loss.backward();
  const Array<double> expected{{0.25 / 2, -0.25 / 2}, {0.0, 0.0}, {-0.5 / 2, 0.5 / 2}};
  CHECK(rel_error(logits.grad(), expected) < 1e-15);
}

TEST_CASE("cross_entropy with every target ignored is 0 with a zero gradient and never NaN", "[cross_entropy]") {
  auto logits = random<double>({2, 3, 4}, 5);
  auto loss = cross_entropy(logits, Indices{{-100, -100, -100}, {-100, -100, -100}});
  CHECK(loss.item() == 0.0);
  loss.backward();
  REQUIRE(logits.has_grad());
  CHECK((logits.grad() == xt::zeros<double>({2, 3, 4})));
  // the same with a custom ignore_index, in float
  auto lf = random<float>({3, 4}, 6);
  auto lossf = cross_entropy(lf, Indices{2, 2, 2}, 2);
  CHECK(lossf.item() == 0.0f);
  lossf.backward();
  CHECK((lf.grad() == xt::zeros<float>({3, 4})));
  // and with no rows at all
  auto empty = Tensor<double>(Array<double>::from_shape({0, 4}), true);
  CHECK(cross_entropy(empty, Indices::from_shape({0})).item() == 0.0);
  Tape<double>::active().clear();
}

TEST_CASE("cross_entropy gradcheck in double with and without ignored rows", "[cross_entropy]") {
  check_gradients(Indices{3, 0, 4, 4}, -100, random<double>({4, 5}, 10));
  check_gradients(Indices{{0, -100, 3}, {-100, 2, 2}}, -100, random<double>({2, 3, 4}, 11, 2.0));
  // ignore_index inside [0, C): class 0 is padding
  check_gradients(Indices{0, 1, 0, 3}, 0, random<double>({4, 4}, 12));
  // every row ignored: the numeric gradient is 0 too
  check_gradients(Indices{-100, -100}, -100, random<double>({2, 3}, 13));
  // C = 19: whole SIMD batches and a remainder in one row
  check_gradients(Indices{18, -100, 0}, -100, random<double>({3, 19}, 15));
  // a single row of rank 1 and a rank-0 target
  check_gradients(Indices(2), -100, random<double>({6}, 14));
}

TEST_CASE("cross_entropy agrees with torch F.cross_entropy to 1e-10", "[cross_entropy]") {
  for (const std::string name : {"cross_entropy_3d", "cross_entropy_pad0", "cross_entropy_large",
                                 "cross_entropy_wide"}) {
    INFO(name);
    Tensor<double> logits(fixture(name, "logits"), true);
    const Indices targets = fixture_ids(name, "targets");
    const std::int64_t ignore = fixture_ids(name, "ignore_index")(0);
    auto loss = cross_entropy(logits, targets, ignore);
    Array<double> gloss = Array<double>::from_shape(Shape{});
    gloss() = fixture(name, "gloss")(0);
    loss.backward(gloss);
    Array<double> got_loss{loss.item()};
    check_close(name + " loss", got_loss, fixture(name, "loss"), 1e-10);
    check_close(name + " dlogits", logits.grad(), fixture(name, "dlogits"), 1e-10);
  }
}

TEST_CASE("cross_entropy in float matches double and stays finite for large logits", "[cross_entropy]") {
  // logits of size ~30 (exp would overflow float without the max subtracted); C = 40
  // covers whole SIMD batches and a remainder
  auto ld = random<double>({3, 4, 40}, 20, 30.0);
  Tensor<float> lf(xt::cast<float>(ld.value()), true);
  const Indices targets{{0, 39, -100, 2}, {17, 1, 3, -100}, {4, 0, 0, 35}};
  auto loss_d = cross_entropy(ld, targets);
  auto loss_f = cross_entropy(lf, targets);
  REQUIRE(std::isfinite(loss_f.item()));
  CHECK(loss_f.item() == Approx(loss_d.item()).epsilon(1e-5));
  loss_d.backward();
  loss_f.backward();
  check_close("float dlogits", xt::cast<double>(lf.grad()), ld.grad(), 1e-5);
  auto small = random<float>({4, 5}, 21);
  const GradcheckResult r = gradcheck<float>(
      [](const std::vector<Tensor<float>>& in) { return cross_entropy(in[0], Indices{1, -100, 4, 0}); },
      {small}, GradcheckOptions::for_float());
  INFO(r.to_string());
  CHECK(r.passed);
}

TEST_CASE("cross_entropy rejects mismatched targets and out-of-range classes naming the shapes", "[cross_entropy]") {
  auto logits = Tensor<double>::zeros({2, 3, 5});
  using Catch::Contains;
  CHECK_THROWS_AS(cross_entropy(logits, Indices{1, 2}), ShapeError);
  CHECK_THROWS_WITH(cross_entropy(logits, Indices{{1, 2}, {3, 4}}),
                    Contains("cross_entropy") && Contains("(2,2)") && Contains("(2,3,5)") &&
                        Contains("(2,3)"));
  // targets shaped like the logits (one-hot style) are not accepted either
  CHECK_THROWS_WITH(cross_entropy(logits, Indices::from_shape({2, 3, 5})),
                    Contains("cross_entropy") && Contains("(2,3,5)"));
  CHECK_THROWS_WITH(cross_entropy(logits, Indices{{0, 1, 2}, {3, 4, 5}}),
                    Contains("cross_entropy") && Contains("target 5") && Contains("C=5"));
  CHECK_THROWS_WITH(cross_entropy(logits, Indices{{0, -1, 2}, {3, 4, 0}}),
                    Contains("cross_entropy") && Contains("target -1") && Contains("ignore_index=-100"));
  // -100 is an ordinary bad class when ignore_index is something else
  CHECK_THROWS_WITH(cross_entropy(logits, Indices{{0, -100, 2}, {3, 4, 0}}, 0),
                    Contains("target -100"));
  CHECK_THROWS_WITH(cross_entropy(Tensor<float>::scalar(1.0f), Indices(0)),
                    Contains("cross_entropy") && Contains("()"));
}
