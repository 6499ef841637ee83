// A scalar of any arithmetic type works with a tensor of either element type, converted to
// the tensor's type. Before, `Tensor<float> * 2.0` and `Tensor<double> + 1` did not compile
// (the scalar parameter took part in deducing T): this file building is half the test.
#include <cstdint>
#include <type_traits>

#include "helpers.hpp"
#include "tapegrad.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

TEST_CASE("a double, int or unsigned scalar works with a Tensor<float>", "[elementwise][scalar]") {
  auto x = make<float>({3}, {1, 2, 4}, true);
  Tensor<float> y = x * 2.0;  // double literal
  static_assert(std::is_same_v<decltype(x * 2.0), Tensor<float>>, "no promotion to double");
  static_assert(std::is_same_v<decltype(1 + x), Tensor<float>>);
  check_values(y, {3}, {2, 4, 8});
  check_values(2.0 * x, {3}, {2, 4, 8});
  check_values(x + 1, {3}, {2, 3, 5});
  check_values(1 + x, {3}, {2, 3, 5});
  check_values(x - 1u, {3}, {0, 1, 3});
  check_values(10L - x, {3}, {9, 8, 6});
  check_values(x / 2.0, {3}, {0.5, 1, 2});
  check_values(4.0 / x, {3}, {4, 2, 1});
  check_values(x * std::int64_t(3), {3}, {3, 6, 12});
  check_values(pow(x, 2), {3}, {1, 4, 16});
  check_values(add(x, 0.5), {3}, {1.5, 2.5, 4.5});

  // the scalar is a constant: the gradient is the float one, d(3x - 1)/dx = 3
  sum(x * 3.0 - 1).backward();
  check_values<float>(x.grad(), {3}, {3, 3, 3});
}

TEST_CASE("an int, float or long double scalar works with a Tensor<double>", "[elementwise][scalar]") {
  auto x = make<double>({2}, {1, 3});
  static_assert(std::is_same_v<decltype(x + 1), Tensor<double>>);
  static_assert(std::is_same_v<decltype(x * 2.0f), Tensor<double>>);
  check_values(x + 1, {2}, {2, 4});
  check_values(x * 0.5f, {2}, {0.5, 1.5});
  check_values(x * 0.5L, {2}, {0.5, 1.5});
  check_values(1 / x, {2}, {1, 1.0 / 3});
  check_values(2 - x, {2}, {1, -1});
}
