// softcap(x, c) = c * tanh(x / c), the final-logit soft-cap as an op of its own: values and
// gradients against the formula written out with std::tanh, gradcheck in double, the same
// bits as the composition of mul and tanh the model used before, and a clear error for a
// cap that cannot be computed.
#include <cmath>
#include <limits>

#include "helpers.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

TEMPLATE_TEST_CASE("softcap: c * tanh(x / c) and its gradient 1 - tanh^2(x / c), elementwise",
                   "[softcap]", float, double) {
  using T = TestType;
  Generator gen(7);
  Tensor<T> x(Tensor<T>::randn({3, 5}, gen).value() * T(3), true);
  const Array<T> g = Tensor<T>::randn({3, 5}, gen).value();
  for (const double c : {0.5, 2.0, 30.0}) {
    INFO("c = " << c);
    x.zero_grad();
    const Tensor<T> y = softcap(x, c);
    sum(y * Tensor<T>(g)).backward();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double xi = double(x.value().data()[i]), t = std::tanh(xi / c);
      INFO("x = " << xi);
      CHECK(double(y.value().data()[i]) == Approx(c * t).epsilon(1e-6).margin(1e-6));
      CHECK(double(x.grad().data()[i]) ==
            Approx(double(g.data()[i]) * (1 - t * t)).epsilon(1e-5).margin(1e-6));
    }
  }
}

TEST_CASE("softcap: gradcheck in double", "[softcap][gradcheck]") {
  Generator gen(8);
  for (const double c : {0.3, 1.0, 5.0})
    require_gradcheck<double>([c](const std::vector<Tensor<double>>& in) { return softcap(in[0], c); },
                              {Tensor<double>(Tensor<double>::randn({4, 3}, gen).value(), true)});
}

TEMPLATE_TEST_CASE("softcap: the same bits as c * tanh(x * (1 / c)) by mul and tanh",
                   "[softcap]", float, double) {
  using T = TestType;
  Generator gen(9);
  const Tensor<T> x(Tensor<T>::randn({4, 7}, gen).value() * T(10));
  NoGradGuard no_grad;
  for (const double c : {0.01, 1.0, 15.0}) {
    const Array<T> op = softcap(x, c).value(), composed = mul(tanh(mul(x, 1 / c)), c).value();
    for (std::size_t i = 0; i < op.size(); ++i) CHECK(op.data()[i] == composed.data()[i]);
  }
}

TEST_CASE("softcap: a cap that is not a positive number in range is refused by name",
          "[softcap]") {
  const Tensor<float> x(Array<float>::from_shape({2, 3}));
  for (const double c : {0.0, -1.0, std::nan(""), 1e-31, 1e31,
                         std::numeric_limits<double>::infinity()}) {
    INFO("c = " << c);
    CHECK_THROWS_WITH(softcap(x, c), Catch::Contains("softcap: c must be in") &&
                                         Catch::Contains("(a is (2,3))"));
  }
}
