// autograd/tensor: factories, shape queries, item, detach, requires_grad flags, handles.
#include <cmath>

#include "helpers.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

TEMPLATE_TEST_CASE("zeros ones full and scalar", "[tensor]", float, double) {
  using T = TestType;
  auto z = Tensor<T>::zeros({2, 3});
  check_values(z, {2, 3}, std::vector<double>(6, 0.0));
  CHECK_FALSE(z.requires_grad());
  CHECK(z.is_leaf());
  check_values(Tensor<T>::ones({4}), {4}, {1, 1, 1, 1});
  check_values(Tensor<T>::full({1, 2, 1}, T(-2.5)), {1, 2, 1}, {-2.5, -2.5});
  auto s = Tensor<T>::scalar(T(7), true);
  check_values(s, {}, {7});
  CHECK(s.requires_grad());
  CHECK(s.dim() == 0);
  CHECK(s.size() == 1);
  CHECK(s.item() == T(7));
  CHECK(Tensor<T>::ones({3, 0}).size() == 0);
  auto f = Tensor<T>::from_array(Array<T>{{1, 2}, {3, 4}}, true);
  check_values(f, {2, 2}, {1, 2, 3, 4});
  CHECK(f.requires_grad());
}

TEMPLATE_TEST_CASE("shape dim size and item", "[tensor]", float, double) {
  using T = TestType;
  auto t = Tensor<T>::ones({2, 3, 4});
  CHECK(t.shape() == Shape{2, 3, 4});
  CHECK(t.dim() == 3);
  CHECK(t.size() == 24);
  CHECK(t.shape_string() == "(2,3,4)");
  CHECK(Tensor<T>::scalar(T(1)).shape_string() == "()");
  CHECK(Tensor<T>::full({1, 1}, T(3)).item() == T(3));
  require_shape_error([&] { t.item(); }, {"item", "(2,3,4)"});
  require_shape_error([] { Tensor<T>::zeros({0}).item(); }, {"item", "(0)"});
  Tensor<T> undefined;
  CHECK_FALSE(undefined.defined());
  // Its own type, not a shape error: nothing about the handle's shape is wrong.
  CHECK_THROWS_AS(undefined.shape(), UndefinedTensorError);
  CHECK_THROWS_WITH(undefined.value(), Catch::Contains("undefined"));
  CHECK_THROWS_AS(undefined.grad(), UndefinedTensorError);
  bool caught_as_shape_error = false;
  try {
    undefined.size();
  } catch (const ShapeError&) {
    caught_as_shape_error = true;
  } catch (const std::logic_error&) {
  }
  CHECK_FALSE(caught_as_shape_error);
}

TEMPLATE_TEST_CASE("has_shape compares every extent and the rank", "[tensor]", float, double) {
  using T = TestType;
  auto t = Tensor<T>::ones({2, 3, 4});
  CHECK(t.has_shape({2, 3, 4}));
  CHECK(t.has_shape(Shape{2, 3, 4}));
  CHECK_FALSE(t.has_shape({2, 3, 5}));
  CHECK_FALSE(t.has_shape({4, 3, 2}));
  CHECK_FALSE(t.has_shape({2, 3}));
  CHECK_FALSE(t.has_shape({2, 3, 4, 1}));
  CHECK_FALSE(t.has_shape(Shape{}));
  CHECK(Tensor<T>::scalar(T(1)).has_shape(Shape{}));
  CHECK(Tensor<T>::zeros({0, 3}).has_shape({0, 3}));
  CHECK_THROWS_AS(Tensor<T>().has_shape({1}), UndefinedTensorError);
}

TEMPLATE_TEST_CASE("randn and uniform are reproducible from the seed", "[tensor][random]",
                   float, double) {
  using T = TestType;
  Generator g1(42), g2(42), g3(43);
  auto a = Tensor<T>::randn({100}, g1);
  auto b = Tensor<T>::randn({100}, g2);
  auto c = Tensor<T>::randn({100}, g3);
  CHECK((a.value() == b.value()));
  std::size_t same = 0;
  for (std::size_t i = 0; i < 100; ++i) same += a.value()(i) == c.value()(i);
  CHECK(same == 0);
  // the generator advances: the next draw differs from the first
  auto a2 = Tensor<T>::randn({100}, g1);
  CHECK_FALSE((a2.value() == a.value()));

  Generator u1(7), u2(7);
  auto p = Tensor<T>::uniform({1000}, u1, T(-2), T(3));
  CHECK((p.value() == Tensor<T>::uniform({1000}, u2, T(-2), T(3)).value()));
  for (T v : p.value()) CHECK((v >= T(-2) && v < T(3)));
}

TEST_CASE("randn has the requested mean and standard deviation", "[tensor][random]") {
  Generator gen(1);
  auto x = Tensor<double>::randn({20000}, gen, 2.0, 3.0);
  double mean = 0, var = 0;
  for (double v : x.value()) mean += v;
  mean /= x.size();
  for (double v : x.value()) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / x.size());
  // standard errors: 3 / sqrt(20000) = 0.021 for the mean, about 0.015 for the sd
  CHECK(mean == Approx(2.0).margin(0.1));
  CHECK(sd == Approx(3.0).margin(0.1));
  auto r = Tensor<float>::randn({4}, gen, 0.0f, 1.0f, true);
  CHECK(r.requires_grad());
  CHECK_THROWS_AS(gen.integer(0), ShapeError);
  for (int i = 0; i < 100; ++i) CHECK(gen.integer(3) < 3);
}

TEST_CASE("a Tensor is a shared handle", "[tensor]") {
  auto a = Tensor<double>::zeros({2});
  Tensor<double> b = a;
  b.value()(0) = 5.0;
  CHECK(a.value()(0) == 5.0);
  CHECK(a.impl() == b.impl());
}

TEST_CASE("detach copies the value and cuts the history", "[tensor]") {
  auto x = make<double>({3}, {1, 2, 3}, true);
  Tensor<double> y = x * 2.0;
  Tensor<double> d = y.detach();
  check_values(d, {3}, {2, 4, 6});
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  d.value()(0) = 100.0;  // a copy, not a view
  CHECK(y.value()(0) == 2.0);
  Tape<double>::active().clear();

  // no gradient flows through a detached tensor: d(x * detach(x))/dx = x
  sum(x * x.detach()).backward();
  check_values(x.grad(), {3}, {1, 2, 3});
  CHECK(Tape<double>::active().size() == 0);
}

TEST_CASE("requires_grad flows from inputs to outputs", "[tensor]") {
  auto a = Tensor<float>::ones({2}, true);
  auto b = Tensor<float>::ones({2});
  CHECK(a.requires_grad());
  CHECK_FALSE(b.requires_grad());
  Tensor<float> c = a * b;
  CHECK(c.requires_grad());
  CHECK_FALSE(c.is_leaf());
  Tensor<float> d = b * b;  // nothing to differentiate: not recorded
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(Tape<float>::active().size() == 1);
  Tape<float>::active().clear();
  b.set_requires_grad();
  CHECK(b.requires_grad());
  a.set_requires_grad(false);
  CHECK_FALSE(a.requires_grad());
  Tensor<float> e = a * 2.0f;
  CHECK_FALSE(e.requires_grad());
  CHECK(Tape<float>::active().size() == 0);
}

TEST_CASE("gradients: absent until backward then accumulated then dropped", "[tensor]") {
  auto x = make<double>({2}, {1, 3}, true);
  CHECK_FALSE(x.has_grad());
  CHECK_THROWS_AS(x.grad(), NoGradientError);  // its own type: no shape is wrong
  CHECK_THROWS_WITH(x.grad(), Catch::Contains("grad") && Catch::Contains("(2)"));
  sum(x * x).backward();
  check_values(x.grad(), {2}, {2, 6});
  x.zero_grad();
  CHECK_FALSE(x.has_grad());
}

TEST_CASE("live_tensors counts every tensor alive", "[tensor]") {
  const long before = live_tensors<float>();
  {
    auto a = Tensor<float>::ones({3});
    auto b = a;  // a handle, not a tensor
    CHECK(live_tensors<float>() == before + 1);
    auto c = a.detach();
    CHECK(live_tensors<float>() == before + 2);
  }
  CHECK(live_tensors<float>() == before);
}
