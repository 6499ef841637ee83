// nn/optim and nn/schedule: steps against values computed by hand, clipping, schedule.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "helpers.hpp"
#include "nn/optim.hpp"
#include "nn/schedule.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

// Gives p the gradient c (the gradient of sum(p * c) is c, whatever p is).
void set_grad(Tensor<double>& p, const std::vector<double>& c) {
  p.zero_grad();
  sum(p * make<double>(p.shape(), c)).backward();
}

}  // namespace

TEST_CASE("SGD with momentum: two steps by hand", "[optim]") {
  Tensor<double> p = make<double>({2}, {1.0, -2.0}, true);
  SGD<double> sgd({p}, {0.1, 0.9, 0.0});
  set_grad(p, {0.5, 1.0});
  sgd.step();
  // buf = g = [0.5, 1];  p = [1, -2] - 0.1 * buf = [0.95, -2.1]
  check_values(p, {2}, {0.95, -2.1});
  set_grad(p, {0.5, 1.0});
  sgd.step();
  // buf = 0.9 * [0.5, 1] + [0.5, 1] = [0.95, 1.9];  p = [0.95 - 0.095, -2.1 - 0.19]
  check_values(p, {2}, {0.855, -2.29});
}

TEST_CASE("SGD without momentum and with weight decay", "[optim]") {
  Tensor<double> p = make<double>({2}, {1.0, -2.0}, true);
  SGD<double> sgd({p}, {0.5, 0.0, 0.1});
  set_grad(p, {0.5, 1.0});
  sgd.step();
  // g + 0.1 p = [0.6, 0.8];  p -= 0.5 * that -> [0.7, -2.4]
  check_values(p, {2}, {0.7, -2.4});
  sgd.zero_grad();
  CHECK_FALSE(p.has_grad());
  sgd.step();  // no gradient: untouched
  check_values(p, {2}, {0.7, -2.4});
}

TEST_CASE("AdamW: one and two steps by hand", "[optim]") {
  // lr 0.1, betas (0.9, 0.999), eps 1e-8, weight_decay 0.1, a constant gradient g.
  // With a constant g the bias-corrected moments are exact: m_hat = g, v_hat = g^2, so
  // every step is p = p * (1 - lr * wd) - lr * g / (|g| + eps).
  //   p0 = [1, -1], g = [0.5, -2]
  //   step 1: p * 0.99 = [0.99, -0.99]; update 0.1 * 0.5 / 0.50000001 = 0.1 / (1 + 2e-8)
  //           and -0.1 * 2 / 2.00000001 = -0.1 / (1 + 5e-9)
  //   step 2: the same on p1 * 0.99.
  Tensor<double> p = make<double>({2}, {1.0, -1.0}, true);
  AdamW<double> adamw({p}, {0.1, 0.9, 0.999, 1e-8, 0.1});
  const double u0 = 0.1 / (1 + 2e-8), u1 = -0.1 / (1 + 5e-9);
  set_grad(p, {0.5, -2.0});
  adamw.step();
  const double a1 = 0.99 - u0, b1 = -0.99 - u1;  // 0.890000002, -0.8900000005
  check_values(p, {2}, {a1, b1}, 1e-14);
  CHECK(a1 == Approx(0.890000002).epsilon(1e-15));
  set_grad(p, {0.5, -2.0});
  adamw.step();
  check_values(p, {2}, {a1 * 0.99 - u0, b1 * 0.99 - u1}, 1e-14);
  CHECK(p.value()(0) == Approx(0.78110000398).epsilon(1e-12));
  CHECK(p.value()(1) == Approx(-0.781100000995).epsilon(1e-12));
}

TEST_CASE("AdamW moments follow a changing gradient", "[optim]") {
  // p0 = 2, no weight decay, lr 0.01, betas (0.5, 0.75), eps 0; g1 = 1, g2 = -3.
  //   m1 = 0.5, v1 = 0.25;   m_hat = 0.5 / 0.5 = 1, v_hat = 0.25 / 0.25 = 1 -> p1 = 2 - 0.01
  //   m2 = 0.25 - 1.5 = -1.25, v2 = 0.1875 + 2.25 = 2.4375;
  //   m_hat = -1.25 / 0.75, v_hat = 2.4375 / 0.4375 -> p2 = p1 + 0.01 * (1.25/0.75) / sqrt(2.4375/0.4375)
  Tensor<double> p = make<double>({1}, {2.0}, true);
  AdamW<double> adamw({p}, {0.01, 0.5, 0.75, 1e-300, 0.0});
  set_grad(p, {1.0});
  adamw.step();
  check_values(p, {1}, {1.99});
  set_grad(p, {-3.0});
  adamw.step();
  check_values(p, {1}, {1.99 + 0.01 * (1.25 / 0.75) / std::sqrt(2.4375 / 0.4375)});
}

TEST_CASE("AdamW skips parameters without a gradient and keeps their step count", "[optim]") {
  Tensor<double> a = make<double>({1}, {1.0}, true);
  Tensor<double> b = make<double>({1}, {1.0}, true);
  AdamW<double> adamw({a, b}, {0.1, 0.9, 0.999, 1e-8, 0.0});
  set_grad(a, {1.0});
  adamw.step();  // b has no gradient: untouched, still at its step 0
  check_values(b, {1}, {1.0});
  set_grad(b, {1.0});
  set_grad(a, {1.0});
  adamw.step();
  // b's first step moves it by lr * g / (|g| + eps), exactly as a's first step did
  check_values(b, {1}, {1.0 - 0.1 / (1 + 1e-8)});
}

TEST_CASE("optimisers reject bad settings", "[optim]") {
  Tensor<float> p = Tensor<float>::zeros({2}, true);
  require_shape_error([&] { SGD<float>({p}, {-1.0, 0.0, 0.0}); }, {"SGD", "lr"});
  require_shape_error([&] { AdamW<float>({p}, {1e-3, 1.0, 0.999, 1e-8, 0.0}); }, {"AdamW", "beta1"});
  require_shape_error([&] { AdamW<float>({p}, {1e-3, 0.9, 0.999, 0.0, 0.0}); }, {"AdamW", "eps"});
  require_shape_error([&] { AdamW<float>({Tensor<float>()}); }, {"AdamW", "undefined"});
}

TEST_CASE("clip_grad_norm scales by the global norm and returns it", "[optim]") {
  Tensor<double> a = make<double>({2}, {0, 0}, true);
  Tensor<double> b = make<double>({1}, {0}, true);
  Tensor<double> none = make<double>({1}, {0}, true);  // no gradient: ignored
  set_grad(a, {3, 4});
  set_grad(b, {12});
  // sqrt(9 + 16 + 144) = 13; above 20 nothing changes
  CHECK(clip_grad_norm<double>({a, b, none}, 20.0) == Approx(13.0).epsilon(1e-15));
  check_values<double>(a.grad(), {2}, {3, 4});
  // max_norm 6.5: every gradient times 6.5 / (13 + 1e-6)
  CHECK(clip_grad_norm<double>({a, b, none}, 6.5) == Approx(13.0).epsilon(1e-15));
  const double f = 6.5 / (13.0 + 1e-6);
  check_values<double>(a.grad(), {2}, {3 * f, 4 * f});
  check_values<double>(b.grad(), {1}, {12 * f});
  CHECK_FALSE(none.has_grad());
  require_shape_error([&] { clip_grad_norm<double>({a}, 0.0); }, {"clip_grad_norm", "max_norm"});
}

TEST_CASE("warm-up + cosine schedule at its landmarks", "[optim]") {
  // lr 1, min_lr 0.1, 10 warm-up steps, 110 in total: 100 cosine steps
  WarmupCosine s(1.0, 0.1, 10, 110);
  CHECK(s(0) == Approx(0.1));   // warm-up start: lr * 1/10
  CHECK(s(4) == Approx(0.5));   // warm-up middle: lr * 5/10
  CHECK(s(9) == Approx(1.0));   // warm-up end
  CHECK(s(10) == Approx(1.0));  // cosine start
  // a quarter of the way: 0.1 + 0.9 * (1 + cos(pi/4)) / 2
  CHECK(s(35) == Approx(0.1 + 0.45 * (1 + std::sqrt(0.5))));
  CHECK(s(60) == Approx(0.55));  // halfway: the mean of lr and min_lr
  CHECK(s(110) == Approx(0.1));  // end
  CHECK(s(1000) == Approx(0.1));
  for (std::size_t t = 10; t < 110; ++t) CHECK(s(t + 1) <= s(t));

  WarmupCosine no_warmup(2.0, 0.0, 0, 4);
  CHECK(no_warmup(0) == Approx(2.0));
  CHECK(no_warmup(2) == Approx(1.0));
  require_shape_error([] { WarmupCosine(1.0, 0.1, 20, 10); }, {"WarmupCosine", "warmup"});
  require_shape_error([] { WarmupCosine(0.1, 1.0, 0, 10); }, {"WarmupCosine", "min_lr"});
}
