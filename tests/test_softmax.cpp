// ops/softmax: softmax, log_softmax and masked_softmax by hand and by identities,
// numerical stability, fully masked rows, mask broadcasting, gradients, errors.
#include <cmath>
#include <limits>

#include <xtensor/xbroadcast.hpp>

#include "helpers.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {
constexpr double kE = 2.718281828459045;
constexpr double kSoftplus1 = 1.3132616875182228;  // log(1 + e)
constexpr double kInf = std::numeric_limits<double>::infinity();
// softmax([1, 2, 3]) = [1, e, e^2] / (1 + e + e^2)
const double kZ = 1 + kE + kE * kE;
const double kP1 = 1 / kZ, kP2 = kE / kZ, kP3 = kE * kE / kZ;

bool any_nan(const Array<double>& a) {
  for (double v : a)
    if (std::isnan(v)) return true;
  return false;
}

// Entry e of x is allowed with probability 1/2; row `dead` of the last two axes is masked
// entirely.
Mask random_mask(const Shape& shape, std::uint64_t seed, std::size_t dead) {
  Generator gen(seed);
  Mask m = Mask::from_shape(shape);
  for (auto& v : m) v = gen.uniform() < 0.5;
  const std::size_t T = shape.back(), rows = m.size() / T;
  for (std::size_t r = 0; r < rows; ++r)
    if (r % shape[shape.size() - 2] == dead)
      for (std::size_t k = 0; k < T; ++k) m.data()[r * T + k] = false;
  return m;
}

Mask causal(std::size_t T) {
  Mask m = Mask::from_shape({T, T});
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j < T; ++j) m(i, j) = j <= i;
  return m;
}
}  // namespace

TEMPLATE_TEST_CASE("softmax of known rows", "[softmax]", float, double) {
  using T = TestType;
  check_values(softmax(make<T>({3}, {1, 2, 3})), {3}, {kP1, kP2, kP3});
  // shifting a row changes nothing
  check_values(softmax(make<T>({2, 3}, {1, 2, 3, -9, -8, -7})), {2, 3},
               {kP1, kP2, kP3, kP1, kP2, kP3});
  check_values(softmax(make<T>({3}, {5, 5, 5})), {3}, {1.0 / 3, 1.0 / 3, 1.0 / 3});
  check_values(softmax(make<T>({1}, {42})), {1}, {1});
  // -inf scores drop out
  check_values(softmax(make<T>({3}, {-kInf, 0, 0})), {3}, {0, 0.5, 0.5});
}

TEMPLATE_TEST_CASE("softmax of a row with a NaN, a +inf or nothing but -inf is NaN, as in PyTorch",
                   "[softmax][nonfinite]", float, double) {
  using T = TestType;
  const double nan = std::nan("");
  // rows: a NaN among finite scores, all NaN, a +inf (exp(inf - inf)), all -inf (0/0), and
  // a healthy row that must stay exact
  const std::vector<double> rows = {nan,  1,    2,    nan,   nan,   nan,  kInf, 1, 2,
                                    -kInf, -kInf, -kInf, 1, 2, 3};
  for (long axis : {-1L, 0L}) {  // the contiguous kernel, and the strided one on the transpose
    INFO("axis " << axis);
    const Tensor<T> x = make<T>({5, 3}, rows);
    const Array<T> y = axis == -1 ? softmax(x).value()
                                  : Array<T>(xt::transpose(softmax(transpose(x, {1, 0}), 0).value()));
    for (std::size_t r = 0; r < 4; ++r)
      for (std::size_t k = 0; k < 3; ++k) {
        INFO("row " << r << ", " << k);
        CHECK(std::isnan(y(r, k)));
      }
    CHECK(double(y(4, 0)) == Approx(kP1).epsilon(1e-6));
  }
}

TEMPLATE_TEST_CASE("masked_softmax: a NaN at an allowed key poisons the row, at a masked key nothing",
                   "[softmax][masked][nonfinite]", float, double) {
  using T = TestType;
  const double nan = std::nan("");
  // row 0 NaN allowed; row 1 NaN masked; row 2 fully masked and all NaN; row 3 allowed all NaN
  auto x = make<T>({4, 3}, {1, nan, 3, 1, 2, nan, nan, nan, nan, nan, nan, 5}, true);
  Mask m = {{true, true, false}, {true, true, false}, {false, false, false}, {true, true, false}};
  Tensor<T> y = masked_softmax(x, m);
  for (std::size_t k = 0; k < 2; ++k) CHECK(std::isnan(y.value()(0, k)));
  CHECK(double(y.value()(1, 0)) == Approx(1 / (1 + kE)).epsilon(1e-6));
  CHECK(double(y.value()(1, 1)) == Approx(kE / (1 + kE)).epsilon(1e-6));
  CHECK(y.value()(1, 2) == T(0));
  for (std::size_t k = 0; k < 3; ++k) CHECK(y.value()(2, k) == T(0));
  for (std::size_t k = 0; k < 2; ++k) CHECK(std::isnan(y.value()(3, k)));
  y.backward(xt::ones<T>({4, 3}) * T(0.5) + make<T>({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3}).value());
  for (std::size_t k = 0; k < 2; ++k) CHECK(std::isnan(x.grad()(0, k)));
  for (std::size_t k = 0; k < 3; ++k) CHECK(x.grad()(2, k) == T(0));  // zeros forward and back
  for (std::size_t k = 0; k < 3; ++k) CHECK(std::isfinite(x.grad()(1, k)));
}

TEMPLATE_TEST_CASE("softmax and log_softmax stay finite for huge inputs", "[softmax]", float,
                   double) {
  using T = TestType;
  // softmax([1000, 1001]) = [1, e] / (1 + e), never exp(1000) = inf
  check_values(softmax(make<T>({2}, {1000, 1001})), {2}, {1 / (1 + kE), kE / (1 + kE)});
  check_values(softmax(make<T>({2}, {-1001, -1000})), {2}, {1 / (1 + kE), kE / (1 + kE)});
  // log_softmax([1000, 1001]) = [-log(1 + e), -log(1 + 1/e)] = [-sp(1), 1 - sp(1)]
  check_values(log_softmax(make<T>({2}, {1000, 1001})), {2}, {-kSoftplus1, 1 - kSoftplus1});
  check_values(log_softmax(make<T>({2}, {-1000, -1001})), {2}, {1 - kSoftplus1, -kSoftplus1});
  // no underflow to log(0): a score 1000 below the max keeps its exact log-probability
  check_values(log_softmax(make<T>({2}, {0, -1000})), {2}, {0, -1000}, 1e-6);
}

TEMPLATE_TEST_CASE("log_softmax of known rows and its identity with log(softmax)", "[softmax]",
                   float, double) {
  using T = TestType;
  // log_softmax(x) = x - log(sum exp x); log(e + e^2 + e^3) = 3 + log(1/e^2 + 1/e + 1)
  const double lse = 3 + std::log(1 / (kE * kE) + 1 / kE + 1);
  check_values(log_softmax(make<T>({3}, {1, 2, 3})), {3}, {1 - lse, 2 - lse, 3 - lse});
  // an -inf score keeps log-probability -inf; an all -inf row is -inf, not NaN
  auto y = log_softmax(make<T>({2, 3}, {-kInf, 0, 0, -kInf, -kInf, -kInf}));
  CHECK(y.value()(0, 0) == -std::numeric_limits<T>::infinity());
  CHECK(static_cast<double>(y.value()(0, 1)) == Approx(-std::log(2.0)).epsilon(1e-6));
  CHECK(static_cast<double>(y.value()(0, 2)) == Approx(-std::log(2.0)).epsilon(1e-6));
  for (std::size_t k = 0; k < 3; ++k) CHECK(y.value()(1, k) == -std::numeric_limits<T>::infinity());

  auto x = random<T>({2, 3, 4}, 7, false, -3.0, 3.0);
  for (long axis : {0L, 1L, 2L, -1L, -3L}) {
    INFO("axis " << axis);
    Array<T> expected = xt::log(softmax(x, axis).value());
    check_close<T>(log_softmax(x, axis).value(), expected, tolerance<T>() * 10);
  }
}

TEMPLATE_TEST_CASE("softmax along axis 0 and along a middle axis", "[softmax]", float, double) {
  using T = TestType;
  // columns [1,2,3] and [0,0,0]
  check_values(softmax(make<T>({3, 2}, {1, 0, 2, 0, 3, 0}), 0), {3, 2},
               {kP1, 1.0 / 3, kP2, 1.0 / 3, kP3, 1.0 / 3});
  check_values(softmax(make<T>({3, 2}, {1, 0, 2, 0, 3, 0}), -2), {3, 2},
               {kP1, 1.0 / 3, kP2, 1.0 / 3, kP3, 1.0 / 3});
  // x (2,3,2): along axis 1 the slices are [1,2,3], [0,0,0], [3,2,1], [1000,1001,1000]
  auto x = make<T>({2, 3, 2}, {1, 0, 2, 0, 3, 0, 3, 1000, 2, 1001, 1, 1000});
  const double q = 1 / (2 + kE);
  const std::vector<double> expected = {kP1, 1.0 / 3, kP2, 1.0 / 3, kP3, 1.0 / 3,
                                        kP3, q,       kP2, kE * q,  kP1, q};
  check_values(softmax(x, 1), {2, 3, 2}, expected);
  std::vector<double> logs;
  for (double p : expected) logs.push_back(std::log(p));
  check_values(log_softmax(x, 1), {2, 3, 2}, logs, std::is_same<T, float>::value ? 1e-5 : 1e-12);
}

TEMPLATE_TEST_CASE("softmax rows sum to 1 on every axis", "[softmax]", float, double) {
  using T = TestType;
  auto x = random<T>({2, 3, 4, 5}, 3, false, -5.0, 5.0);
  for (long axis : {0L, 1L, 2L, 3L}) {
    INFO("axis " << axis);
    Tensor<T> y = softmax(x, axis);
    Array<T> ones = xt::ones<T>(sum(y, {axis}).shape());
    check_close<T>(sum(y, {axis}).value(), ones, 1e-6);
    for (T v : y.value()) CHECK((v > T(0) && v < T(1)));
  }
}

TEMPLATE_TEST_CASE("masked_softmax zeroes masked entries exactly and fully masked rows",
                   "[softmax][masked]", float, double) {
  using T = TestType;
  auto x = make<T>({3, 3}, {1, 2, 3, 1, 2, 3, 7, 8, 9});
  Mask m = {{true, true, false}, {false, false, false}, {true, true, true}};
  Tensor<T> y = masked_softmax(x, m);
  check_values(y, {3, 3}, {1 / (1 + kE), kE / (1 + kE), 0, 0, 0, 0, kP1, kP2, kP3});
  CHECK(y.value()(0, 2) == T(0));
  for (std::size_t k = 0; k < 3; ++k) CHECK(y.value()(1, k) == T(0));
  // a masked score never matters, however large
  auto big = make<T>({3, 3}, {1, 2, 1e30, 5, 6, 7, 7, 8, 9});
  check_values(masked_softmax(big, m), {3, 3},
               {1 / (1 + kE), kE / (1 + kE), 0, 0, 0, 0, kP1, kP2, kP3});
  // an all-true mask is plain softmax; a rank-0 mask broadcasts
  check_close<T>(masked_softmax(x, Mask{{true, true, true}}).value(), softmax(x).value());
  check_close<T>(masked_softmax(x, Mask(true)).value(), softmax(x).value());
  check_values(masked_softmax(x, Mask(false)), {3, 3}, std::vector<double>(9, 0.0));
}

TEST_CASE("a fully masked row has zero gradient and no NaN", "[softmax][masked]") {
  auto x = make<double>({2, 3}, {0.5, -1, 2, 3, 1, -2}, true);
  Mask m = {{true, false, true}, {false, false, false}};
  Tensor<double> y = masked_softmax(x, m);
  y.backward(Array<double>{{1.0, 2.0, -3.0}, {4.0, 5.0, 6.0}});
  REQUIRE_FALSE(any_nan(y.value()));
  REQUIRE_FALSE(any_nan(x.grad()));
  CHECK(x.grad()(0, 1) == 0.0);
  for (std::size_t k = 0; k < 3; ++k) CHECK(x.grad()(1, k) == 0.0);
  // row 0: p = softmax([0.5, 2]), dx = p * (dy - p . dy) with dy = [1, -3]
  const double p0 = 1 / (1 + std::exp(1.5)), p2 = 1 - p0;
  const double dot = p0 * 1 + p2 * -3;
  CHECK(x.grad()(0, 0) == Approx(p0 * (1 - dot)));
  CHECK(x.grad()(0, 2) == Approx(p2 * (-3 - dot)));
  CHECK(x.grad()(0, 0) + x.grad()(0, 2) == Approx(0.0).margin(1e-15));
}

TEMPLATE_TEST_CASE("masks broadcast from TxT and from Bx1x1xT to BxHxTxT",
                   "[softmax][masked]", float, double) {
  using T = TestType;
  const std::size_t B = 2, H = 2, L = 3;
  // equal scores: an allowed entry of a row with n allowed entries weighs 1/n
  auto zeros = Tensor<T>::zeros({B, H, L, L});
  std::vector<double> causal_rows;
  for (std::size_t bh = 0; bh < B * H; ++bh)
    for (double v : {1.0, 0.0, 0.0, 0.5, 0.5, 0.0, 1.0 / 3, 1.0 / 3, 1.0 / 3}) causal_rows.push_back(v);
  check_values(masked_softmax(zeros, causal(L)), {B, H, L, L}, causal_rows);

  // padding: batch 0 may see keys 0 and 1, batch 1 only key 0
  Mask pad = Mask::from_shape({B, 1, 1, L});
  pad(0, 0, 0, 0) = true, pad(0, 0, 0, 1) = true, pad(0, 0, 0, 2) = false;
  pad(1, 0, 0, 0) = true, pad(1, 0, 0, 1) = false, pad(1, 0, 0, 2) = false;
  std::vector<double> pad_rows;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t r = 0; r < H * L; ++r)
      for (double v : b == 0 ? std::vector<double>{0.5, 0.5, 0} : std::vector<double>{1, 0, 0})
        pad_rows.push_back(v);
  check_values(masked_softmax(zeros, pad), {B, H, L, L}, pad_rows);

  // per head (H,1,T) and per row (T,1): shapes that are not a suffix of the scores'
  Mask head = {{{true, true, true}}, {{false, true, true}}};
  std::vector<double> head_rows;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t r = 0; r < L; ++r)
        for (double v : h == 0 ? std::vector<double>{1.0 / 3, 1.0 / 3, 1.0 / 3}
                               : std::vector<double>{0, 0.5, 0.5})
          head_rows.push_back(v);
  check_values(masked_softmax(zeros, head), {B, H, L, L}, head_rows);
  Mask rows = Mask::from_shape({L, 1});
  rows(0, 0) = true, rows(1, 0) = false, rows(2, 0) = true;
  const double t = 1.0 / 3;
  check_values(masked_softmax(Tensor<T>::zeros({L, L}), rows), {L, L}, {t, t, t, 0, 0, 0, t, t, t});

  // random scores: each broadcast mask gives what its materialised (B,H,T,T) copy gives,
  // and the causal rows match exp(x_j) / sum_{j' <= i} exp(x_j')
  auto x = random<T>({B, H, L, L}, 5, false, -2.0, 2.0);
  for (const Mask& mask : {causal(L), pad, head, rows}) {
    Mask full = xt::broadcast(mask, Shape{B, H, L, L});
    check_close<T>(masked_softmax(x, mask).value(), masked_softmax(x, full).value());
  }
  Tensor<T> y = masked_softmax(x, causal(L));
  for (std::size_t n = 0; n < B * H; ++n)
    for (std::size_t i = 0; i < L; ++i) {
      const T* row = x.data() + (n * L + i) * L;
      double z = 0;
      for (std::size_t j = 0; j <= i; ++j) z += std::exp(double(row[j]));
      for (std::size_t j = 0; j < L; ++j) {
        const double want = j <= i ? std::exp(double(row[j])) / z : 0.0;
        CHECK(double(y.data()[(n * L + i) * L + j]) == Approx(want).epsilon(1e-6).margin(1e-7));
      }
    }
}

TEST_CASE("gradcheck of softmax and log_softmax on several axes", "[softmax][gradcheck]") {
  auto x = random<double>({2, 3, 4}, 11, true, -2.0, 2.0);
  for (long axis : {0L, 1L, 2L, -1L, -2L}) {
    INFO("axis " << axis);
    require_gradcheck<double>([&](const auto& v) { return softmax(v[0], axis); }, {x});
    require_gradcheck<double>([&](const auto& v) { return log_softmax(v[0], axis); }, {x});
  }
  auto big = random<double>({3, 5}, 12, true, 995.0, 1005.0);
  require_gradcheck<double>([](const auto& v) { return softmax(v[0]); }, {big});
  require_gradcheck<double>([](const auto& v) { return log_softmax(v[0]); }, {big});
}

TEST_CASE("gradcheck of masked_softmax with random masks and a fully masked row",
          "[softmax][masked][gradcheck]") {
  auto x = random<double>({2, 2, 4, 4}, 21, true, -2.0, 2.0);
  require_gradcheck<double>([m = random_mask({2, 2, 4, 4}, 22, 1)](const auto& v) {
    return masked_softmax(v[0], m);
  }, {x});
  require_gradcheck<double>([m = random_mask({4, 4}, 23, 2)](const auto& v) {
    return masked_softmax(v[0], m);
  }, {x});
  require_gradcheck<double>([](const auto& v) { return masked_softmax(v[0], causal(4)); }, {x});
  Mask pad = Mask::from_shape({2, 1, 1, 4});
  pad.fill(true);
  pad(0, 0, 0, 3) = false;
  require_gradcheck<double>([pad](const auto& v) { return masked_softmax(v[0], pad); }, {x});
  // composed with other ops, as attention uses it
  auto w = random<double>({4, 4}, 24);
  require_gradcheck<double>([](const auto& v) {
    return matmul(masked_softmax(v[0] * 2.0, causal(4)), v[1]);
  }, {x, w});
}

TEST_CASE("float32 spot check of softmax gradients", "[softmax][gradcheck][float]") {
  auto x = random<float>({2, 3, 4}, 31, true, -2.0, 2.0);
  const auto opt = GradcheckOptions::for_float();
  require_gradcheck<float>([](const auto& v) { return softmax(v[0], 1); }, {x}, opt);
  require_gradcheck<float>([](const auto& v) { return log_softmax(v[0], -1); }, {x}, opt);
  require_gradcheck<float>([](const auto& v) { return masked_softmax(v[0], causal(4)); },
                           {random<float>({2, 4, 4}, 32)}, opt);
}

TEST_CASE("softmax errors name the op and the shapes", "[softmax][errors]") {
  auto x = Tensor<double>::ones({3, 3});
  require_shape_error([&] { masked_softmax(x, Mask{true, false}); },
                      {"masked_softmax", "(2)", "(3,3)"});
  require_shape_error([&] { masked_softmax(x, Mask::from_shape({2, 3, 3})); },
                      {"masked_softmax", "(2,3,3)", "(3,3)"});
  require_shape_error([&] { masked_softmax(Tensor<float>::ones({2, 2, 3, 3}), Mask::from_shape({3, 3, 3})); },
                      {"masked_softmax", "(3,3,3)", "(2,2,3,3)"});
  require_shape_error([&] { softmax(Tensor<double>::ones({2, 3}), 2); }, {"softmax", "axis 2", "(2,3)"});
  require_shape_error([&] { log_softmax(Tensor<double>::ones({2, 3}), -3); },
                      {"log_softmax", "-3", "(2,3)"});
  require_shape_error([&] { softmax(Tensor<double>::scalar(1.0)); }, {"softmax", "()"});
  require_shape_error([&] { masked_softmax(Tensor<double>::scalar(1.0), Mask(true)); },
                      {"masked_softmax", "()"});
}
