// embedding: row lookup forward, scatter-add backward (repeated ids accumulate), agreement
// with PyTorch's F.embedding, the float path and the errors; weighted_row_sum likewise.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "helpers.hpp"
#include "reference.hpp"
#include "tapegrad.hpp"
#include "ops/embedding.hpp"

using namespace tapegrad;

namespace {

using test::check_close;
using test::rel_error;
Array<double> fixture(const std::string& name, const std::string& file) {
  return test::load_fixture("nnops", name, file);
}
Shape shape(const Array<double>& a) { return Shape(a.shape().begin(), a.shape().end()); }

// weight[v, d] = 10 v + d: every looked-up value says which row it came from
template <class T>
Tensor<T> labelled(std::size_t V, std::size_t D, bool requires_grad) {
  Array<T> w = Array<T>::from_shape({V, D});
  for (std::size_t v = 0; v < V; ++v)
    for (std::size_t d = 0; d < D; ++d) w(v, d) = static_cast<T>(10 * v + d);
  return Tensor<T>(std::move(w), requires_grad);
}

void check_gradients(const TensorFunction<double>& f, const Tensor<double>& weight) {
  const GradcheckResult r = gradcheck<double>(f, {weight});
  INFO(r.to_string());
  CHECK(r.passed);
  CHECK(r.inputs[0].checked == weight.size());
  CHECK(r.inputs[0].max_rel_error < 1e-6);
}

}  // namespace

TEST_CASE("embedding copies the rows named by ids into shape ids + (D)", "[embedding]") {
  auto w = labelled<double>(4, 3, false);
  const Indices ids{{2, 0}, {2, 3}};
  auto y = embedding(w, ids);
  REQUIRE(y.shape() == (Shape{2, 2, 3}));
  const std::size_t rows[2][2] = {{2, 0}, {2, 3}};
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 2; ++j)
      for (std::size_t d = 0; d < 3; ++d)
        CHECK(y.value()(i, j, d) == static_cast<double>(10 * rows[i][j] + d));
  // a rank-0 id gives one row of shape (D)
  auto one = embedding(w, Indices(3));
  REQUIRE(one.shape() == Shape{3});
  CHECK(one.value()(1) == 31.0);
}

TEST_CASE("embedding backward scatter-adds so a repeated id gets every gradient", "[embedding]") {
  Tensor<double> w = Tensor<double>::zeros({5, 2}, true);
  const Indices ids{1, 3, 1, 1};
  auto y = embedding(w, ids);
  // upstream gradient of row n: [n + 1, 10 (n + 1)]
  Array<double> gy{{1, 10}, {2, 20}, {3, 30}, {4, 40}};
  y.backward(gy);
  const Array<double> expected{{0, 0}, {1 + 3 + 4, 80}, {0, 0}, {2, 20}, {0, 0}};
  CHECK((w.grad() == expected));
  CHECK(Tape<double>::active().size() == 0);
}

TEST_CASE("embedding gradcheck in double with repeated ids", "[embedding]") {
  Generator gen(7);
  auto w = Tensor<double>::randn({6, 4}, gen, 0.0, 1.0, true);
  const Indices ids{{5, 2, 5}, {0, 5, 2}};  // 5 three times, 2 twice, rows 1 3 4 unused
  check_gradients([ids](const std::vector<Tensor<double>>& in) { return embedding(in[0], ids); }, w);
  const Indices scalar_id(4);
  check_gradients([scalar_id](const std::vector<Tensor<double>>& in) {
    return embedding(in[0], scalar_id);
  }, w);
}

TEST_CASE("embedding with no ids gives (0 D) and a zero gradient", "[embedding]") {
  auto w = Tensor<double>::ones({3, 2}, true);
  Indices none = Indices::from_shape({0});
  auto y = embedding(w, none);
  CHECK(y.shape() == (Shape{0, 2}));
  y.backward(Array<double>::from_shape({0, 2}));
  CHECK((w.grad() == xt::zeros<double>({3, 2})));
}

TEST_CASE("embedding agrees with torch F.embedding to 1e-10", "[embedding]") {
  for (const std::string name : {"embedding_2d_ids", "embedding_1d_ids"}) {
    INFO(name);
    Tensor<double> w(fixture(name, "weight"), true);
    const Indices ids = test::load_fixture_ids("nnops", name, "ids");
    auto y = embedding(w, ids);
    y.backward(fixture(name, "gy"));
    check_close(name + " y", y.value(), fixture(name, "y"), 1e-10);
    check_close(name + " dweight", w.grad(), fixture(name, "dweight"), 1e-10);
  }
}

TEST_CASE("embedding in float looks up the same rows and accumulates the same gradient", "[embedding]") {
  auto wf = labelled<float>(4, 3, true);
  const Indices ids{3, 3, 0};
  auto y = embedding(wf, ids);
  CHECK(y.value()(0, 2) == 32.0f);
  CHECK(y.value()(2, 1) == 1.0f);
  y.backward(Array<float>(xt::ones<float>({3, 3})));
  CHECK(wf.grad()(3, 0) == 2.0f);
  CHECK(wf.grad()(0, 0) == 1.0f);
  CHECK(wf.grad()(1, 0) == 0.0f);
  const GradcheckResult r = gradcheck<float>(
      [ids](const std::vector<Tensor<float>>& in) { return embedding(in[0], ids); }, {wf},
      GradcheckOptions::for_float());
  INFO(r.to_string());
  CHECK(r.passed);
}

TEST_CASE("embedding rejects out-of-range ids and a weight that is not 2-D", "[embedding]") {
  auto w = Tensor<double>::zeros({5, 3});
  using Catch::Contains;
  CHECK_THROWS_AS(embedding(w, Indices{0, 5}), ShapeError);
  CHECK_THROWS_WITH(embedding(w, Indices{{0, 1}, {5, 2}}),
                    Contains("embedding") && Contains("id 5") && Contains("V=5") &&
                        Contains("(5,3)") && Contains("(2,2)"));
  CHECK_THROWS_WITH(embedding(w, Indices{-1}), Contains("embedding") && Contains("id -1"));
  CHECK_THROWS_WITH(embedding(Tensor<double>::zeros({15}), Indices{1}),
                    Contains("embedding") && Contains("2-D") && Contains("(15)"));
  CHECK_THROWS_WITH(embedding(Tensor<float>::zeros({2, 5, 3}), Indices{1}),
                    Contains("embedding") && Contains("(2,5,3)"));
}

// weighted_row_sum: each output row a weighted sum of k looked-up rows (the mixture of
// experts' combine), against the sum written out by hand.
TEST_CASE("weighted_row_sum adds each output's k rows by their weights", "[embedding]") {
  auto rows = labelled<double>(4, 3, true);
  const Indices ids{{2, 0}, {3, 3}, {1, 2}};
  Tensor<double> w(Array<double>{{0.5, 2.0}, {1.0, -1.0}, {0.25, 0.0}}, true);
  auto y = weighted_row_sum(rows, ids, w);
  REQUIRE(y.shape() == (Shape{3, 3}));
  for (std::size_t d = 0; d < 3; ++d) {
    CHECK(y.value()(0, d) == 0.5 * (20.0 + d) + 2.0 * d);
    CHECK(y.value()(1, d) == 0.0);  // the same row twice, weights 1 and -1
    CHECK(y.value()(2, d) == 0.25 * (10.0 + d));
  }
  // upstream gradient of output n: all ones times (n + 1)
  y.backward(Array<double>{{1, 1, 1}, {2, 2, 2}, {3, 3, 3}});
  // drows[r] = sum over (n, j) picking r of w[n, j] * (n + 1)
  const Array<double> drows{{2.0, 2, 2}, {0.75, 0.75, 0.75}, {0.5, 0.5, 0.5}, {0, 0, 0}};
  CHECK((rows.grad() == drows));
  // dw[n, j] = (n + 1) * sum_d rows[ids[n, j], d]
  const Array<double> dw{{63, 3}, {2 * 93.0, 2 * 93.0}, {3 * 33.0, 3 * 63.0}};
  CHECK((w.grad() == dw));
}

TEST_CASE("weighted_row_sum gradcheck in double with repeated ids", "[embedding]") {
  const Tensor<double> rows = test::random<double>({5, 4}, 3), w = test::random<double>({3, 2}, 4);
  const Indices ids{{4, 1}, {1, 1}, {0, 3}};
  const GradcheckResult r = gradcheck<double>(
      [&](const std::vector<Tensor<double>>& x) { return weighted_row_sum(x[0], ids, x[1]); }, {rows, w});
  INFO(r.to_string());
  CHECK(r.passed);
}

TEST_CASE("weighted_row_sum rejects out-of-range ids and mismatched weights", "[embedding]") {
  using Catch::Contains;
  const auto rows = Tensor<double>::zeros({5, 3});
  CHECK_THROWS_WITH(weighted_row_sum(rows, Indices{{0, 5}}, Tensor<double>::zeros({1, 2})),
                    Contains("weighted_row_sum") && Contains("id 5") && Contains("(5,3)"));
  CHECK_THROWS_WITH(weighted_row_sum(rows, Indices{{0, 1}}, Tensor<double>::zeros({2, 1})),
                    Contains("weighted_row_sum") && Contains("(1,2)") && Contains("(2,1)"));
  CHECK_THROWS_WITH(weighted_row_sum(rows, Indices{0, 1}, Tensor<double>::zeros({2})),
                    Contains("weighted_row_sum") && Contains("(N, k)"));
}
