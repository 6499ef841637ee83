// ops/shape_ops: reshape, transpose, swapaxes, concatenate and slice by hand, gradients by
// finite differences, errors. x = arange((2,3,4)) has x[i,j,k] = 12 i + 4 j + k.
#include "helpers.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

TEMPLATE_TEST_CASE("reshape keeps row-major order", "[shape_ops]", float, double) {
  using T = TestType;
  auto a = make<T>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_values(reshape(a, {3, 2}), {3, 2}, {1, 2, 3, 4, 5, 6});
  check_values(reshape(a, {6}), {6}, {1, 2, 3, 4, 5, 6});
  check_values(reshape(a, {1, 6, 1}), {1, 6, 1}, {1, 2, 3, 4, 5, 6});
  check_values(reshape(make<T>({1}, {7}), {}), {}, {7});
  check_values(reshape(Tensor<T>::scalar(T(7)), {1, 1}), {1, 1}, {7});
  // the input is untouched
  CHECK(a.shape() == Shape{2, 3});
}

TEMPLATE_TEST_CASE("transpose: result axis i is input axis perm of i", "[shape_ops]", float,
                   double) {
  using T = TestType;
  auto a = make<T>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_values(transpose(a, {1, 0}), {3, 2}, {1, 4, 2, 5, 3, 6});
  check_values(transpose(a, {0, 1}), {2, 3}, {1, 2, 3, 4, 5, 6});
  auto x = arange<T>({2, 3, 4});
  // y[k,i,j] = x[i,j,k]
  check_values(transpose(x, {2, 0, 1}), {4, 2, 3},
               {0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21,
                2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23});
  // y[j,k,i] = x[i,j,k]
  check_values(transpose(x, {1, 2, 0}), {3, 4, 2},
               {0, 12, 1, 13, 2, 14, 3, 15, 4, 16, 5, 17,
                6, 18, 7, 19, 8, 20, 9, 21, 10, 22, 11, 23});
  // the result is a contiguous buffer in its own row-major order, not a strided view
  auto y = transpose(x, {2, 0, 1});
  CHECK(y.data()[1] == T(4));
}

TEMPLATE_TEST_CASE("swapaxes exchanges two axes", "[shape_ops]", float, double) {
  using T = TestType;
  auto x = arange<T>({2, 3, 4});
  // y[k,j,i] = x[i,j,k]
  const std::vector<double> expected = {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21,
                                        2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23};
  check_values(swapaxes(x, 0, 2), {4, 3, 2}, expected);
  check_values(swapaxes(x, -1, 0), {4, 3, 2}, expected);
  // y[i,k,j] = x[i,j,k]
  check_values(swapaxes(x, -1, -2), {2, 4, 3},
               {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11,
                12, 16, 20, 13, 17, 21, 14, 18, 22, 15, 19, 23});
  check_values(swapaxes(x, 1, 1), {2, 3, 4}, std::vector<double>(x.value().begin(), x.value().end()));
}

TEMPLATE_TEST_CASE("concatenate joins along any axis", "[shape_ops]", float, double) {
  using T = TestType;
  auto a = make<T>({2, 2}, {1, 2, 3, 4});
  auto b = make<T>({1, 2}, {5, 6});
  auto c = make<T>({2, 1}, {7, 8});
  check_values(concatenate<T>({a, b}, 0), {3, 2}, {1, 2, 3, 4, 5, 6});
  check_values(concatenate<T>({b, a}, -2), {3, 2}, {5, 6, 1, 2, 3, 4});
  check_values(concatenate<T>({a, c}, 1), {2, 3}, {1, 2, 7, 3, 4, 8});
  check_values(concatenate<T>({c, a, c}, -1), {2, 4}, {7, 1, 2, 7, 8, 3, 4, 8});
  check_values(concatenate<T>({a}, 0), {2, 2}, {1, 2, 3, 4});
  // the middle axis of rank-3 parts: (2,1,2) + (2,2,2) -> (2,3,2)
  auto p = make<T>({2, 1, 2}, {-1, -2, -3, -4});
  auto q = arange<T>({2, 2, 2});
  check_values(concatenate<T>({p, q}, 1), {2, 3, 2}, {-1, -2, 0, 1, 2, 3, -3, -4, 4, 5, 6, 7});
}

TEMPLATE_TEST_CASE("slice takes start to stop along one axis", "[shape_ops]", float, double) {
  using T = TestType;
  auto x = arange<T>({2, 3, 4});
  check_values(slice(x, 1, 1, 3), {2, 2, 4},
               {4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23});
  check_values(slice(x, -1, 1, 2), {2, 3, 1}, {1, 5, 9, 13, 17, 21});
  check_values(slice(x, 0, 1, 2), {1, 3, 4},
               {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  check_values(slice(x, 2, 0, 4), {2, 3, 4}, std::vector<double>(x.value().begin(), x.value().end()));
  CHECK(slice(x, 1, 2, 2).shape() == Shape{2, 0, 4});
}

TEMPLATE_TEST_CASE("repeat_interleave repeats each element in place, never tiles", "[shape_ops]",
                   float, double) {
  using T = TestType;
  auto a = make<T>({2, 2}, {1, 2, 3, 4});
  // torch.repeat_interleave(a, 2, dim=0) and dim=1; tiling would give 1 2 1 2 ...
  check_values(repeat_interleave(a, 2, 0), {4, 2}, {1, 2, 1, 2, 3, 4, 3, 4});
  check_values(repeat_interleave(a, 3, -1), {2, 6}, {1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4});
  check_values(repeat_interleave(a, 1, 1), {2, 2}, {1, 2, 3, 4});
  CHECK(repeat_interleave(a, 0, 0).shape() == Shape{0, 2});
  // the middle axis of x (2,3,4): y[i, 2j + t, k] = x[i, j, k] = 12 i + 4 j + k
  auto x = arange<T>({2, 3, 4});
  auto y = repeat_interleave(x, 2, 1);
  REQUIRE(y.shape() == Shape{2, 6, 4});
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 6; ++j)
      for (std::size_t k = 0; k < 4; ++k) CHECK(y.value()(i, j, k) == T(12 * i + 4 * (j / 2) + k));
}

TEST_CASE("repeat_interleave sums the gradient of each element's copies", "[shape_ops]") {
  auto a = make<double>({2, 2}, {1, 2, 3, 4}, true);
  repeat_interleave(a, 2, 0).backward(Array<double>{{1, 2}, {3, 4}, {5, 6}, {7, 8}});
  check_values(a.grad(), {2, 2}, {1 + 3, 2 + 4, 5 + 7, 6 + 8});
  auto b = make<double>({1, 2}, {1, 2}, true);
  repeat_interleave(b, 3, 1).backward(Array<double>{{1, 2, 3, 10, 20, 30}});
  check_values(b.grad(), {1, 2}, {6, 60});
}

TEST_CASE("slice and concatenate route gradients to the right places", "[shape_ops]") {
  auto x = arange<double>({2, 3}, true);
  slice(x, 1, 1, 3).backward(Array<double>{{1.0, 2.0}, {3.0, 4.0}});
  check_values(x.grad(), {2, 3}, {0, 1, 2, 0, 3, 4});
  auto a = make<double>({2, 1}, {1, 2}, true);
  auto b = make<double>({2, 2}, {3, 4, 5, 6}, true);
  concatenate<double>({a, b}, 1).backward(Array<double>{{10.0, 20.0, 30.0}, {40.0, 50.0, 60.0}});
  check_values(a.grad(), {2, 1}, {10, 40});
  check_values(b.grad(), {2, 2}, {20, 30, 50, 60});
}

TEST_CASE("gradcheck of shape ops", "[shape_ops][gradcheck]") {
  auto x = random<double>({2, 3, 4}, 1);
  require_gradcheck<double>([](const auto& v) { return reshape(v[0], {4, 6}); }, {x});
  require_gradcheck<double>([](const auto& v) { return reshape(v[0], {24}) * reshape(v[0], {24}); }, {x});
  for (const std::vector<std::size_t>& perm : std::vector<std::vector<std::size_t>>{
           {0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {2, 1, 0}, {0, 2, 1}}) {
    INFO("perm " << perm[0] << perm[1] << perm[2]);
    require_gradcheck<double>([&](const auto& v) { return transpose(v[0], perm); }, {x});
  }
  require_gradcheck<double>([](const auto& v) { return swapaxes(v[0], 0, -1); }, {x});
  require_gradcheck<double>([](const auto& v) { return swapaxes(v[0], -2, -1); }, {x});
  require_gradcheck<double>([](const auto& v) { return slice(v[0], 1, 1, 3); }, {x});
  require_gradcheck<double>([](const auto& v) { return slice(v[0], -1, 0, 1); }, {x});
  for (long axis : {0, 1, -1})
    require_gradcheck<double>([axis](const auto& v) { return repeat_interleave(v[0], 3, axis); }, {x});
  // a part used twice and a constant part
  auto y = random<double>({2, 2, 4}, 2);
  auto z = random<double>({2, 1, 4}, 3, false);
  require_gradcheck<double>(
      [](const auto& v) { return concatenate<double>({v[0], v[1], v[2], v[0]}, 1); }, {x, y, z});
  require_gradcheck<double>(
      [](const auto& v) { return concatenate<double>({slice(v[0], 2, 0, 1), slice(v[0], 2, 3, 4)}, -1); },
      {x});
}

TEST_CASE("float32 spot check of shape op gradients", "[shape_ops][gradcheck][float]") {
  auto x = random<float>({2, 3, 4}, 4);
  require_gradcheck<float>(
      [](const auto& v) {
        return reshape(swapaxes(concatenate<float>({v[0], slice(v[0], 0, 0, 1)}, 0), 0, 2), {4, 9});
      },
      {x}, GradcheckOptions::for_float());
}

TEST_CASE("shape ops reject bad arguments naming op and shapes", "[shape_ops][errors]") {
  auto a = Tensor<double>::ones({2, 3});
  require_shape_error([&] { reshape(a, {4, 2}); }, {"reshape", "(2,3)", "(4,2)"});
  require_shape_error([&] { reshape(a, {}); }, {"reshape", "(2,3)", "()"});
  require_shape_error([&] { transpose(a, {0, 0}); }, {"transpose", "(0,0)", "(2,3)"});
  require_shape_error([&] { transpose(a, {0}); }, {"transpose", "(2,3)"});
  require_shape_error([&] { transpose(a, {0, 2}); }, {"transpose", "(2,3)"});
  require_shape_error([&] { transpose(a, {2, 1, 0}); }, {"transpose", "(2,3)"});
  require_shape_error([&] { swapaxes(a, 2, 0); }, {"swapaxes", "axis 2", "(2,3)"});
  require_shape_error([&] { swapaxes(a, 0, -3); }, {"swapaxes", "-3", "(2,3)"});
  auto b = Tensor<double>::ones({3, 3});
  require_shape_error([&] { concatenate<double>({a, b}, 1); },
                      {"concatenate", "(3,3)", "(2,3)"});
  require_shape_error([&] { concatenate<double>({a, Tensor<double>::ones({3})}, 0); },
                      {"concatenate", "(3)", "(2,3)"});
  require_shape_error([&] { concatenate<double>({a, a}, 2); }, {"concatenate", "axis 2", "(2,3)"});
  require_shape_error([&] { concatenate<double>({}, 0); }, {"concatenate"});
  require_shape_error([&] { slice(a, 1, 2, 5); }, {"slice", "[2, 5)", "(2,3)"});
  require_shape_error([&] { slice(a, 0, 2, 1); }, {"slice", "[2, 1)", "(2,3)"});
  require_shape_error([&] { slice(a, 2, 0, 1); }, {"slice", "axis 2", "(2,3)"});
  require_shape_error([&] { slice(Tensor<double>::scalar(1.0), 0, 0, 1); }, {"slice", "rank-0"});
  require_shape_error([&] { repeat_interleave(a, 2, 2); }, {"repeat_interleave", "axis 2", "(2,3)"});
  require_shape_error([&] { repeat_interleave(Tensor<double>::scalar(1.0), 2, 0); },
                      {"repeat_interleave", "rank-0"});
}
