// ops/reduce: sum, mean and max by hand, gradients by finite differences, errors.
#include "helpers.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

TEMPLATE_TEST_CASE("sum and mean over everything give a rank-0 tensor", "[reduce]", float,
                   double) {
  using T = TestType;
  auto a = make<T>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_values(sum(a), {}, {21});
  check_values(mean(a), {}, {3.5});
  CHECK(sum(a).item() == T(21));
  // a rank-0 input is its own sum and mean
  check_values(sum(Tensor<T>::scalar(T(-4))), {}, {-4});
  check_values(mean(Tensor<T>::scalar(T(-4))), {}, {-4});
}

TEMPLATE_TEST_CASE("sum and mean over axes with keepdims and negative axes", "[reduce]", float,
                   double) {
  using T = TestType;
  auto a = make<T>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_values(sum(a, {0}), {3}, {5, 7, 9});
  check_values(sum(a, {1}), {2}, {6, 15});
  check_values(sum(a, {-1}), {2}, {6, 15});
  check_values(sum(a, {-2}), {3}, {5, 7, 9});
  check_values(sum(a, {0}, true), {1, 3}, {5, 7, 9});
  check_values(sum(a, {-1}, true), {2, 1}, {6, 15});
  check_values(sum(a, {0, 1}), {}, {21});
  check_values(sum(a, {1, 0}, true), {1, 1}, {21});
  check_values(sum(a, {}), {2, 3}, {1, 2, 3, 4, 5, 6});  // no axes: nothing folded
  check_values(mean(a, {0}), {3}, {2.5, 3.5, 4.5});
  check_values(mean(a, {-1}, true), {2, 1}, {2, 5});

  // x[i,j,k] = 12 i + 4 j + k; over i and k: sum = 2*(0+1+2+3) + 4*12 + 8*4 j = 60 + 32 j
  auto x = arange<T>({2, 3, 4});
  check_values(sum(x, {0, 2}), {3}, {60, 92, 124});
  check_values(sum(x, {0, -1}, true), {1, 3, 1}, {60, 92, 124});
  check_values(mean(x, {2, 0}), {3}, {7.5, 11.5, 15.5});
  // over j: 3*12 i + 4*(0+1+2) + 3 k = 36 i + 12 + 3 k
  check_values(sum(x, {1}), {2, 4}, {12, 15, 18, 21, 48, 51, 54, 57});
  check_values(mean(x, {-2}, true), {2, 1, 4}, {4, 5, 6, 7, 16, 17, 18, 19});
}

TEMPLATE_TEST_CASE("max along an axis with keepdims", "[reduce]", float, double) {
  using T = TestType;
  auto a = make<T>({2, 3}, {1, 5, 3, 4, 2, 6});
  check_values(max(a, 1), {2}, {5, 6});
  check_values(max(a, -1), {2}, {5, 6});
  check_values(max(a, 0), {3}, {4, 5, 6});
  check_values(max(a, -2, true), {1, 3}, {4, 5, 6});
  check_values(max(a, 1, true), {2, 1}, {5, 6});
  // the middle axis of a (2,3,2): x[i,j,k] = 6 i + 2 j + k is largest at j = 2
  check_values(max(arange<T>({2, 3, 2}), 1), {2, 2}, {4, 5, 10, 11});
  check_values(max(make<T>({3}, {-7, -2, -9}), 0), {}, {-2});
}

TEST_CASE("max sends the gradient to the first maximal element", "[reduce]") {
  auto a = make<double>({2, 3}, {1, 5, 5, 7, 7, 7}, true);
  max(a, 1).backward(Array<double>{2.0, 3.0});
  check_values(a.grad(), {2, 3}, {0, 2, 0, 3, 0, 0});
  auto b = make<double>({2, 2}, {1, 4, 3, 2}, true);
  max(b, 0, true).backward(Array<double>{{10.0, 20.0}});
  check_values(b.grad(), {2, 2}, {0, 20, 10, 0});
}

TEST_CASE("gradcheck of sum and mean", "[reduce][gradcheck]") {
  auto x = random<double>({2, 3, 4}, 1);
  require_gradcheck<double>([](const auto& v) { return sum(v[0]); }, {x});
  require_gradcheck<double>([](const auto& v) { return mean(v[0]); }, {x});
  for (bool keep : {false, true}) {
    INFO("keepdims " << keep);
    for (const std::vector<long>& axes : std::vector<std::vector<long>>{
             {0}, {1}, {-1}, {0, 2}, {-3, -2}, {0, 1, 2}, {}}) {
      INFO("axes " << axes.size());
      require_gradcheck<double>([&](const auto& v) { return sum(v[0], axes, keep); }, {x});
      require_gradcheck<double>([&](const auto& v) { return mean(v[0], axes, keep); }, {x});
    }
  }
  auto s = random<double>({}, 2);
  require_gradcheck<double>([](const auto& v) { return sum(v[0]) * 3.0; }, {s});
  require_gradcheck<double>([](const auto& v) { return mean(v[0] * v[0]); }, {s});
}

TEST_CASE("gradcheck of max", "[reduce][gradcheck]") {
  // distinct values, so the maximum is unique and moves smoothly under eps
  auto x = random<double>({3, 4, 5}, 3);
  for (long axis : {0L, 1L, 2L, -1L}) {
    for (bool keep : {false, true}) {
      INFO("axis " << axis << " keepdims " << keep);
      require_gradcheck<double>([&](const auto& v) { return max(v[0], axis, keep); }, {x});
    }
  }
}

TEST_CASE("float32 spot check of reduction gradients", "[reduce][gradcheck][float]") {
  auto x = random<float>({3, 4}, 4);
  const auto opt = GradcheckOptions::for_float();
  require_gradcheck<float>([](const auto& v) { return mean(v[0] * v[0], {1}, true); }, {x}, opt);
  require_gradcheck<float>([](const auto& v) { return sum(v[0], {0}) * mean(v[0], {-2}); }, {x}, opt);
}

TEST_CASE("reductions reject bad axes naming op and shape", "[reduce][errors]") {
  auto a = Tensor<double>::ones({2, 3});
  require_shape_error([&] { sum(a, {2}); }, {"sum", "axis 2", "(2,3)"});
  require_shape_error([&] { sum(a, {-3}); }, {"sum", "-3", "(2,3)"});
  require_shape_error([&] { mean(a, {0, 5}); }, {"mean", "5", "(2,3)"});
  require_shape_error([&] { sum(a, {1, -1}); }, {"sum", "twice", "(2,3)"});
  require_shape_error([&] { max(a, 2); }, {"max", "axis 2", "(2,3)"});
  require_shape_error([&] { max(Tensor<float>::scalar(1.0f), 0); }, {"max", "()"});
}
