// ops/elementwise: forward values by hand, gradients by finite differences, errors.
#include <cmath>

#include "helpers.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {
constexpr double kE = 2.718281828459045;     // e
constexpr double kLn2 = 0.6931471805599453;  // log(2)
constexpr double kLn3 = 1.0986122886681098;  // log(3)
}  // namespace

// ---- forward values -------------------------------------------------------------------

TEMPLATE_TEST_CASE("add sub mul div of tensors broadcast as NumPy does", "[elementwise]",
                   float, double) {
  using T = TestType;
  auto a = make<T>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = make<T>({3}, {10, 20, 40});
  check_values(add(a, b), {2, 3}, {11, 22, 43, 14, 25, 46});
  check_values(a + b, {2, 3}, {11, 22, 43, 14, 25, 46});
  check_values(sub(a, b), {2, 3}, {-9, -18, -37, -6, -15, -34});
  check_values(sub(b, a), {2, 3}, {9, 18, 37, 6, 15, 34});
  check_values(mul(a, b), {2, 3}, {10, 40, 120, 40, 100, 240});
  check_values(div(b, a), {2, 3}, {10, 10, 40.0 / 3, 2.5, 4, 40.0 / 6});
  check_values(a / b, {2, 3}, {0.1, 0.1, 0.075, 0.4, 0.25, 0.15});

  // both operands broadcast: (2,1) with (1,3) -> (2,3)
  auto col = make<T>({2, 1}, {1, 2});
  auto row = make<T>({1, 3}, {10, 20, 30});
  check_values(col + row, {2, 3}, {11, 21, 31, 12, 22, 32});
  check_values(col - row, {2, 3}, {-9, -19, -29, -8, -18, -28});
  check_values(col * row, {2, 3}, {10, 20, 30, 20, 40, 60});
  check_values(row / col, {2, 3}, {10, 20, 30, 5, 10, 15});

  // a size-1 axis in the middle: (2,1,2) with (3,1) -> (2,3,2)
  auto m = make<T>({2, 1, 2}, {1, 2, 3, 4});
  auto n = make<T>({3, 1}, {0, 10, 100});
  check_values(m + n, {2, 3, 2}, {1, 2, 11, 12, 101, 102, 3, 4, 13, 14, 103, 104});

  // a rank-0 tensor broadcasts against anything, and the result keeps the larger shape
  auto s = Tensor<T>::scalar(T(2));
  check_values(a * s, {2, 3}, {2, 4, 6, 8, 10, 12});
  check_values(s - a, {2, 3}, {1, 0, -1, -2, -3, -4});
  check_values(s + s, {}, {4});
}

TEMPLATE_TEST_CASE("binary ops with a scalar operand in both orders", "[elementwise]", float,
                   double) {
  using T = TestType;
  auto a = make<T>({4}, {1, 2, 4, -8});
  check_values(add(a, T(3)), {4}, {4, 5, 7, -5});
  check_values(T(3) + a, {4}, {4, 5, 7, -5});
  check_values(a + T(3), {4}, {4, 5, 7, -5});
  check_values(sub(a, T(3)), {4}, {-2, -1, 1, -11});
  check_values(a - T(3), {4}, {-2, -1, 1, -11});
  check_values(sub(T(3), a), {4}, {2, 1, -1, 11});
  check_values(T(3) - a, {4}, {2, 1, -1, 11});
  check_values(mul(a, T(-2)), {4}, {-2, -4, -8, 16});
  check_values(T(-2) * a, {4}, {-2, -4, -8, 16});
  check_values(div(a, T(4)), {4}, {0.25, 0.5, 1, -2});
  check_values(a / T(4), {4}, {0.25, 0.5, 1, -2});
  check_values(div(T(4), a), {4}, {4, 2, 1, -0.5});
  check_values(T(4) / a, {4}, {4, 2, 1, -0.5});
}

TEMPLATE_TEST_CASE("unary ops against known values", "[elementwise]", float, double) {
  using T = TestType;
  check_values(neg(make<T>({3}, {1, -2, 0})), {3}, {-1, 2, 0});
  check_values(-make<T>({2}, {1.5, -2.5}), {2}, {-1.5, 2.5});
  check_values(exp(make<T>({4}, {0, 1, -1, kLn2})), {4}, {1, kE, 1 / kE, 2});
  check_values(log(make<T>({4}, {1, kE, 8, 0.5})), {4}, {0, 1, 3 * kLn2, -kLn2});
  check_values(sqrt(make<T>({4}, {0, 4, 2.25, 2})), {4}, {0, 2, 1.5, 1.4142135623730951});
  auto p = make<T>({3}, {2, 3, 0.5});
  check_values(pow(p, T(3)), {3}, {8, 27, 0.125});
  check_values(pow(p, T(-1)), {3}, {0.5, 1.0 / 3, 2});
  check_values(pow(make<T>({2}, {4, 9}), T(0.5)), {2}, {2, 3});
  check_values(pow(p, T(0)), {3}, {1, 1, 1});
  // tanh(log k) = (k^2 - 1) / (k^2 + 1)
  check_values(tanh(make<T>({4}, {0, kLn2, -kLn2, kLn3})), {4}, {0, 0.6, -0.6, 0.8});
  check_values(relu(make<T>({4}, {-1, 0, 2, -0.5})), {4}, {0, 0, 2, 0});
  // sigmoid(log k) = k / (k + 1)
  check_values(sigmoid(make<T>({3}, {0, kLn3, -kLn3})), {3}, {0.5, 0.75, 0.25});
  // saturates without overflow or NaN
  check_values(sigmoid(make<T>({2}, {-1000, 1000})), {2}, {0, 1});
  check_values(tanh(make<T>({2}, {-1000, 1000})), {2}, {-1, 1});
}

TEMPLATE_TEST_CASE("gelu is the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
                   "[elementwise]", float, double) {
  using T = TestType;
  const std::vector<double> xs = {0, 1, -1, 0.5, -0.5, 3, -3, 10, -10};
  std::vector<double> expected;
  for (double x : xs) {
    const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    expected.push_back(0.5 * x * (1 + std::tanh(u)));
  }
  auto y = gelu(make<T>({xs.size()}, xs));
  check_values(y, {xs.size()}, expected);
  // PyTorch's gelu(1, approximate="tanh"), distinct from the erf form's 0.8413447
  CHECK(static_cast<double>(y.value()(1)) == Approx(0.8411919906082768).epsilon(1e-6));
  // the form's odd inner argument gives gelu(-x) = gelu(x) - x
  for (std::size_t i : {1, 3, 5, 7})
    CHECK(static_cast<double>(y.value()(i + 1)) ==
          Approx(static_cast<double>(y.value()(i)) - xs[i]).margin(tolerance<T>() * 10));
  CHECK(static_cast<double>(y.value()(0)) == 0.0);
}

TEMPLATE_TEST_CASE("silu is x * sigmoid(x), finite and saturating for large |x|",
                   "[elementwise]", float, double) {
  using T = TestType;
  // independent of the code's form: sigmoid(x) = (1 + tanh(x / 2)) / 2
  const std::vector<double> xs = {0, 1, -1, 0.25, -2.5, 6, -6, 15, -15};
  std::vector<double> expected;
  for (double x : xs) expected.push_back(x * 0.5 * (1 + std::tanh(x / 2)));
  check_values(silu(make<T>({xs.size()}, xs)), {xs.size()}, expected);
  // silu(log 3) = log 3 * 3/4
  check_values(silu(make<T>({1}, {kLn3})), {1}, {kLn3 * 0.75});

  // exp(1000) overflows in both types: the values and gradients stay finite and exact
  auto big = make<T>({4}, {-1000, 1000, -100, 100}, true);
  Tensor<T> y = silu(big);
  sum(y).backward();
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("element " << i);
    CHECK(std::isfinite(static_cast<double>(y.value()(i))));
    CHECK(std::isfinite(static_cast<double>(big.grad()(i))));
  }
  check_values(y, {4}, {0, 1000, 0, 100});
  check_values(big.grad(), {4}, {0, 1, 0, 1});
}

TEST_CASE("silu's derivative is s (1 + x (1 - s))", "[elementwise][gradcheck]") {
  auto x = make<double>({5}, {-3, -0.5, 0, 0.7, 4}, true);
  sum(silu(x)).backward();
  std::vector<double> expected;
  for (double v : {-3.0, -0.5, 0.0, 0.7, 4.0}) {
    const double s = 0.5 * (1 + std::tanh(v / 2));
    expected.push_back(s * (1 + v * (1 - s)));
  }
  check_values(x.grad(), {5}, expected);
  require_gradcheck<double>([](const auto& v) { return silu(v[0]); },
                            {random<double>({2, 3, 4}, 34, true, -6.0, 6.0)});
}

// ---- gradients ------------------------------------------------------------------------

TEST_CASE("gradcheck of binary tensor ops with broadcasting", "[elementwise][gradcheck]") {
  using F = TensorFunction<double>;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3}, {2, 3}},        // same shape
      {{2, 3}, {3}},           // b broadcast along the leading axis
      {{2, 1, 3}, {4, 1}},     // both broadcast, size-1 axes in the middle
      {{}, {2, 3}},            // a rank-0 scalar
      {{3, 1}, {}},            // a rank-0 scalar on the right
      {{1, 4}, {3, 1}},        // outer-product shape
  };
  const std::vector<std::pair<const char*, F>> ops = {
      {"add", [](const auto& v) { return add(v[0], v[1]); }},
      {"sub", [](const auto& v) { return sub(v[0], v[1]); }},
      {"mul", [](const auto& v) { return mul(v[0], v[1]); }},
      {"div", [](const auto& v) { return div(v[0], v[1]); }},
  };
  std::uint64_t seed = 1;
  for (const auto& [name, f] : ops) {
    for (const auto& [sa, sb] : cases) {
      INFO(name << " " << shape_str(sa) << " " << shape_str(sb));
      auto a = random<double>(sa, seed++);
      auto b = random_away_from_zero<double>(sb, seed++, 0.5);  // div stays smooth
      require_gradcheck<double>(f, {a, b});
    }
  }
}

namespace {
// Where output element (i, j, k) of a rank-3 broadcast reads an operand of `shape`: the shape
// aligned on the right, an axis of extent 1 read at 0. NumPy's rule, written out.
std::size_t broadcast_offset(const Shape& shape, std::size_t i, std::size_t j, std::size_t k) {
  const std::size_t index[3] = {i, j, k};
  const std::size_t missing = 3 - shape.size();
  std::size_t offset = 0;
  for (std::size_t d = missing; d < 3; ++d) {
    const std::size_t extent = shape[d - missing];
    offset = offset * extent + (extent == 1 ? 0 : index[d]);
  }
  return offset;
}
}  // namespace

// Neither operand has the output's size nor is a single number, so neither the equal-shape
// nor the size-1 loop applies: this is the strided broadcast alone, forward and backward
// (da = dz * b and db = -dz * z / b read b and z through it), against index loops.
TEMPLATE_TEST_CASE("binary ops broadcasting both operands match index loops, values and gradients",
                   "[elementwise][broadcast]", float, double) {
  using T = TestType;
  struct Case {
    Shape a, b, z;
  };
  const std::vector<Case> cases = {
      {{2, 1, 3}, {4, 1}, {2, 4, 3}},
      {{4, 1}, {2, 1, 3}, {2, 4, 3}},
      {{3}, {2, 3, 1}, {2, 3, 3}},
      {{2, 3, 1}, {3}, {2, 3, 3}},
  };
  using Fn = std::function<Tensor<T>(const Tensor<T>&, const Tensor<T>&)>;
  using Math = std::function<double(double, double)>;
  struct Op {
    const char* name;
    Fn f;
    Math value, d_da, d_db;  // z(a, b), dz/da, dz/db
  };
  const std::vector<Op> ops = {
      {"add", [](const auto& a, const auto& b) { return a + b; },
       [](double a, double b) { return a + b; }, [](double, double) { return 1.0; },
       [](double, double) { return 1.0; }},
      {"sub", [](const auto& a, const auto& b) { return a - b; },
       [](double a, double b) { return a - b; }, [](double, double) { return 1.0; },
       [](double, double) { return -1.0; }},
      {"mul", [](const auto& a, const auto& b) { return a * b; },
       [](double a, double b) { return a * b; }, [](double, double b) { return b; },
       [](double a, double) { return a; }},
      {"div", [](const auto& a, const auto& b) { return a / b; },
       [](double a, double b) { return a / b; }, [](double, double b) { return 1 / b; },
       [](double a, double b) { return -a / (b * b); }},
  };
  for (const Case& c : cases) {
    // distinct values, exact in float; b away from zero, the seed of both signs
    std::vector<double> av(numel(c.a)), bv(numel(c.b)), dz(numel(c.z));
    for (std::size_t i = 0; i < av.size(); ++i) av[i] = 0.5 + 0.25 * double(i);
    for (std::size_t i = 0; i < bv.size(); ++i)
      bv[i] = (i % 2 ? -1.0 : 1.0) * (1 + 0.5 * double(i));
    for (std::size_t i = 0; i < dz.size(); ++i) dz[i] = (i % 3 ? 0.25 : -0.5) * double(i + 1);
    for (const Op& op : ops) {
      INFO(op.name << " " << shape_str(c.a) << " " << shape_str(c.b));
      auto a = make<T>(c.a, av, true);
      auto b = make<T>(c.b, bv, true);
      Tensor<T> z = op.f(a, b);
      z.backward(make<T>(c.z, dz).value());

      std::vector<double> want_z(dz.size()), want_da(av.size(), 0.0), want_db(bv.size(), 0.0);
      std::size_t n = 0;
      for (std::size_t i = 0; i < c.z[0]; ++i)
        for (std::size_t j = 0; j < c.z[1]; ++j)
          for (std::size_t k = 0; k < c.z[2]; ++k, ++n) {
            const std::size_t ia = broadcast_offset(c.a, i, j, k);
            const std::size_t ib = broadcast_offset(c.b, i, j, k);
            want_z[n] = op.value(av[ia], bv[ib]);
            want_da[ia] += dz[n] * op.d_da(av[ia], bv[ib]);
            want_db[ib] += dz[n] * op.d_db(av[ia], bv[ib]);
          }
      check_values(z, c.z, want_z);
      check_values(a.grad(), c.a, want_da);
      check_values(b.grad(), c.b, want_db);
    }
  }
}

TEST_CASE("gradcheck of one operand at a time and of a tensor used twice",
          "[elementwise][gradcheck]") {
  auto a = random<double>({2, 3}, 11);
  auto b = random_away_from_zero<double>({3}, 12, 0.5, false);  // constant
  require_gradcheck<double>([](const auto& v) { return div(v[0], v[1]); }, {a, b});
  require_gradcheck<double>([](const auto& v) { return mul(v[1], v[0]); }, {a, b});
  require_gradcheck<double>([](const auto& v) { return sub(v[1], v[0]); }, {a, b});
  // y = x * x + x: both uses of x accumulate
  require_gradcheck<double>([](const auto& v) { return v[0] * v[0] + v[0]; }, {a});
}

TEST_CASE("gradcheck of scalar-operand ops", "[elementwise][gradcheck]") {
  auto a = random_away_from_zero<double>({3, 4}, 21, 0.3);
  require_gradcheck<double>([](const auto& v) { return add(v[0], 1.5); }, {a});
  require_gradcheck<double>([](const auto& v) { return sub(v[0], 1.5); }, {a});
  require_gradcheck<double>([](const auto& v) { return sub(1.5, v[0]); }, {a});
  require_gradcheck<double>([](const auto& v) { return mul(v[0], -2.5); }, {a});
  require_gradcheck<double>([](const auto& v) { return div(v[0], -2.5); }, {a});
  require_gradcheck<double>([](const auto& v) { return div(1.5, v[0]); }, {a});
  require_gradcheck<double>([](const auto& v) { return 2.0 * v[0] - 1.0 / v[0]; }, {a});
}

TEST_CASE("gradcheck of unary ops", "[elementwise][gradcheck]") {
  auto any = random<double>({2, 3, 4}, 31, true, -2.0, 2.0);
  auto positive = random<double>({2, 3, 4}, 32, true, 0.2, 3.0);
  auto kinked = random_away_from_zero<double>({2, 3, 4}, 33, 0.05);
  require_gradcheck<double>([](const auto& v) { return neg(v[0]); }, {any});
  require_gradcheck<double>([](const auto& v) { return exp(v[0]); }, {any});
  require_gradcheck<double>([](const auto& v) { return log(v[0]); }, {positive});
  require_gradcheck<double>([](const auto& v) { return sqrt(v[0]); }, {positive});
  require_gradcheck<double>([](const auto& v) { return pow(v[0], 3.0); }, {any});
  require_gradcheck<double>([](const auto& v) { return pow(v[0], 2.0); }, {any});
  require_gradcheck<double>([](const auto& v) { return pow(v[0], -1.5); }, {positive});
  require_gradcheck<double>([](const auto& v) { return pow(v[0], 0.5); }, {positive});
  require_gradcheck<double>([](const auto& v) { return tanh(v[0]); }, {any});
  require_gradcheck<double>([](const auto& v) { return relu(v[0]); }, {kinked});
  require_gradcheck<double>([](const auto& v) { return sigmoid(v[0]); }, {any});
  require_gradcheck<double>([](const auto& v) { return silu(v[0]); }, {any});
  require_gradcheck<double>([](const auto& v) { return gelu(v[0]); }, {any});
  require_gradcheck<double>([](const auto& v) { return gelu(v[0]); }, {kinked});
}

TEST_CASE("relu passes the gradient only where the input is positive", "[elementwise]") {
  auto x = make<double>({4}, {-1, 2, -3, 4}, true);
  sum(relu(x) * 3.0).backward();
  check_values(x.grad(), {4}, {0, 3, 0, 3});
}

TEST_CASE("float32 spot check of elementwise gradients", "[elementwise][gradcheck][float]") {
  auto a = random<float>({3, 4}, 41);
  auto b = random_away_from_zero<float>({4}, 42, 0.5);
  auto p = random<float>({3, 4}, 43, true, 0.5f, 2.0f);
  const auto opt = GradcheckOptions::for_float();
  require_gradcheck<float>([](const auto& v) { return div(v[0] * v[1], v[1] + 2.0f); }, {a, b},
                           opt);
  require_gradcheck<float>([](const auto& v) { return gelu(v[0]) + tanh(v[0]) * sigmoid(v[0]); },
                           {a}, opt);
  require_gradcheck<float>([](const auto& v) { return log(v[0]) + sqrt(v[0]) + exp(v[0]); }, {p},
                           opt);
  require_gradcheck<float>([](const auto& v) { return pow(v[0], 1.5f) - 2.0f / v[0]; }, {p}, opt);
}

// ---- errors ---------------------------------------------------------------------------

TEST_CASE("binary ops on shapes that do not broadcast throw naming op and shapes",
          "[elementwise][errors]") {
  auto a = Tensor<double>::ones({2, 3});
  auto b = Tensor<double>::ones({4});
  require_shape_error([&] { add(a, b); }, {"add", "(2,3)", "(4)"});
  require_shape_error([&] { sub(a, b); }, {"sub", "(2,3)", "(4)"});
  require_shape_error([&] { mul(b, a); }, {"mul", "(4)", "(2,3)"});
  require_shape_error([&] { div(a, b); }, {"div", "(2,3)", "(4)"});
  auto c = Tensor<float>::ones({2, 3, 4}, true);
  auto d = Tensor<float>::ones({3, 1, 4});
  require_shape_error([&] { c + d; }, {"add", "(2,3,4)", "(3,1,4)"});
}
