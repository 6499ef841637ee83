// A large gemm split over threads (row blocks when C is tall, column blocks when wide)
// gives the same product, forward and backward, as one single-threaded gemm.
#include <catch2/catch.hpp>

#include <cmath>

#include "tapegrad.hpp"

using namespace tapegrad;

namespace {
struct Run {
  Array<double> c, da, db;
};

Run product(const Array<double>& a0, const Array<double>& b0, int threads) {
  set_num_threads(threads);
  Tensor<double> a(a0, true), b(b0, true);
  Tensor<double> c = matmul(a, b);
  sum(c * c).backward();
  set_num_threads(1);
  return {c.value(), a.grad(), b.grad()};
}

double max_rel(const Array<double>& x, const Array<double>& y) {
  double m = 0, scale = 1e-300;
  for (std::size_t i = 0; i < x.size(); ++i) {
    m = std::max(m, std::abs(x.data()[i] - y.data()[i]));
    scale = std::max(scale, std::abs(y.data()[i]));
  }
  return m / scale;
}
}  // namespace

TEST_CASE("a gemm split over 2 threads equals the single-threaded product", "[threads]") {
  Generator g(17);
  // tall (300x200 @ 200x100): split by rows; wide (40x200 @ 200x400): split by columns;
  // the backward products (transposed operands) take both paths too
  for (auto [m, k, n] : {std::array<std::size_t, 3>{300, 200, 100}, {40, 200, 400}}) {
    const Array<double> a = Tensor<double>::randn({m, k}, g).value();
    const Array<double> b = Tensor<double>::randn({k, n}, g).value();
    const Run one = product(a, b, 1), two = product(a, b, 2);
    CHECK(max_rel(two.c, one.c) < 1e-13);
    CHECK(max_rel(two.da, one.da) < 1e-13);
    CHECK(max_rel(two.db, one.db) < 1e-13);
    // and against a plain loop, so a wrong block offset cannot hide in both runs
    double err = 0;
    for (std::size_t i = 0; i < m; i += 37)
      for (std::size_t j = 0; j < n; j += 13) {
        double s = 0;
        for (std::size_t q = 0; q < k; ++q) s += a(i, q) * b(q, j);
        err = std::max(err, std::abs(s - two.c(i, j)));
      }
    CHECK(err < 1e-10);
  }
}
