// The engine: accumulation, one reverse sweep, freeing, NoGradGuard, printing.
#include <cmath>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "autograd/memory.hpp"
#include "tapegrad.hpp"

using namespace tapegrad;

TEST_CASE("a tensor used twice accumulates both contributions: y = x*x + x", "[tape]") {
  Tensor<double> x(Array<double>{1.0, -2.0, 3.0}, true);
  Tensor<double> y = sum(x * x + x);
  y.backward();
  // dy/dx = 2x + 1
  CHECK(x.grad()(0) == Approx(3.0));
  CHECK(x.grad()(1) == Approx(-3.0));
  CHECK(x.grad()(2) == Approx(7.0));
}

TEST_CASE("gradients accumulate across two backward calls until zero_grad", "[tape]") {
  Tensor<float> x(Array<float>{2.0f}, true);
  sum(x * x).backward();
  sum(x * x).backward();
  CHECK(x.grad()(0) == Approx(8.0f));
  x.zero_grad();
  CHECK_FALSE(x.has_grad());
}

TEST_CASE("a chain of 100000 ops backwards without recursion", "[tape]") {
  Tensor<double> x(Array<double>{1.0}, true);
  Tensor<double> y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0 + 0.0;
  CHECK(Tape<double>::active().size() == 200000);
  sum(y).backward();
  CHECK(x.grad()(0) == Approx(1.0));
  CHECK(Tape<double>::active().size() == 0);
}

TEST_CASE("after backward the tape is empty and every intermediate is freed", "[tape]") {
  const long before = live_tensors<double>();
  {
    Tensor<double> w(Array<double>{{1.0, 2.0}, {3.0, 4.0}}, true);
    Tensor<double> x(Array<double>{{0.5, -1.0}}, false);
    {
      Tensor<double> loss = sum(tanh(matmul(x, w)) * 2.0);
      CHECK(Tape<double>::active().size() == 4);
      loss.backward();
    }
    CHECK(Tape<double>::active().size() == 0);
    // only the two leaves survive: no node and no cycle keeps anything else alive
    CHECK(live_tensors<double>() == before + 2);
    CHECK(w.has_grad());
  }
  CHECK(live_tensors<double>() == before);
}

// x * w0 * w1 * ... * w7, each factor a leaf of n doubles: the forward keeps 8 products for
// the backward, which makes 8 leaf gradients of n doubles. If the sweep held every product
// until its end, the gradients would come on top of them (growth 8 n doubles and more);
// freed as soon as the nodes that read them have run, each product makes room for a gradient.
TEST_CASE("backward frees each saved product once the nodes that read it have run", "[tape][memory]") {
  constexpr std::size_t n = 1 << 16, layers = 8;
  const double block = double(n * sizeof(double));
  for (const bool retain : {false, true}) {
    Tensor<double> x = Tensor<double>::ones({n});
    std::vector<Tensor<double>> w;
    for (std::size_t l = 0; l < layers; ++l) w.push_back(Tensor<double>::full({n}, 2.0, true));
    Tensor<double> h = x;
    for (const Tensor<double>& wl : w) h = h * wl;
    Tensor<double> loss = sum(h);
    h = Tensor<double>();  // only the tape holds the products now
    const double before = double(tensor_bytes_in_use());
    reset_peak_tensor_bytes();
    loss.backward(retain);
    const double growth = double(peak_tensor_bytes()) - before;
    INFO("retain_graph " << retain << ": the backward's peak grew by " << growth / block << " blocks");
    if (retain)
      CHECK(growth >= double(layers) * block);  // the products stay: gradients add to them
    else
      CHECK(growth <= 4 * block);
    for (const Tensor<double>& wl : w) CHECK(wl.grad()(n - 1) == Approx(std::pow(2.0, layers - 1)));
    Tape<double>::active().clear();
  }
}

TEST_CASE("retain_graph keeps the tape for a second backward", "[tape]") {
  Tensor<double> x(Array<double>{3.0}, true);
  Tensor<double> y = sum(x * x);
  y.backward(true);
  CHECK(Tape<double>::active().size() == 2);
  y.backward();
  CHECK(x.grad()(0) == Approx(12.0));
  CHECK(Tape<double>::active().size() == 0);
}

TEST_CASE("intermediate gradients are dropped unless retained", "[tape]") {
  Tensor<double> x(Array<double>{1.0, 2.0}, true);
  Tensor<double> h = x * 3.0;
  Tensor<double> k = x * 5.0;
  k.retain_grad();
  sum(h + k).backward();
  CHECK_FALSE(h.has_grad());
  REQUIRE(k.has_grad());
  CHECK(k.grad()(1) == Approx(1.0));
}

TEST_CASE("a gradient passed on unchanged is moved only when nobody keeps it", "[tape]") {
  // add, sub and reshape hand their output's gradient to an input by moving it when it is
  // spent; a retained gradient, the root's and a second backward's must survive intact.
  Tensor<double> x(Array<double>{1.0, 2.0}, true), b(Array<double>{0.5, 0.5}, true);
  Tensor<double> s = x * 3.0;
  s.retain_grad();
  Tensor<double> r = reshape(s + b, {2, 1});  // reshape's input is spent: moved
  Tensor<double> z = r - 1.0;
  z.retain_grad();
  Tensor<double> out = sum(z * z);
  out.backward(true);
  REQUIRE(z.has_grad());
  REQUIRE(s.has_grad());
  // z = 3x + b - 1 = (2.5, 5.5); dout/dz = 2z; ds = 2z; dx = 6z
  CHECK(z.grad()(0, 0) == Approx(5.0));
  CHECK(z.grad()(1, 0) == Approx(11.0));
  CHECK(s.grad()(1) == Approx(11.0));
  CHECK(b.grad()(0) == Approx(5.0));
  CHECK(x.grad()(1) == Approx(33.0));
  out.backward();  // the kept tape runs again: gradients add up, nothing was moved away
  CHECK(z.grad()(1, 0) == Approx(22.0));
  CHECK(x.grad()(1) == Approx(66.0));
  CHECK(b.grad()(1) == Approx(22.0));
}

TEST_CASE("NoGradGuard records nothing and restores the previous state", "[tape]") {
  Tensor<float> x(Array<float>{1.0f, 2.0f}, true);
  {
    NoGradGuard guard;
    CHECK_FALSE(grad_enabled());
    Tensor<float> y = exp(x) * x;
    CHECK_FALSE(y.requires_grad());
    CHECK(Tape<float>::active().size() == 0);
  }
  CHECK(grad_enabled());
  Tensor<float> z = exp(x);
  CHECK(z.requires_grad());
  CHECK(Tape<float>::active().size() == 1);
  Tape<float>::active().clear();
}

TEST_CASE("results dropped without backward do not grow the tape without bound", "[tape]") {
  Tensor<double> w(Array<double>{1.0, 2.0}, true);
  for (int i = 0; i < 20000; ++i) {
    Tensor<double> unused = exp(w * 2.0);  // an evaluation that forgot NoGradGuard
  }
  CHECK(Tape<double>::active().size() < 10000);
  Tape<double>::active().clear();
}

TEST_CASE("the tape prints each op with its shapes", "[tape]") {
  Tensor<float> x = Tensor<float>::ones({2, 6, 16}, true);
  Tensor<float> w = Tensor<float>::ones({16, 16}, true);
  Tensor<float> y = matmul(x, w);
  CHECK(tape_string<float>() == "#0 matmul leaf (2,6,16), leaf (16,16) -> (2,6,16)\n");
  Tape<float>::active().clear();
}

TEST_CASE("the tape printout names the node, leaf or constant each input comes from", "[tape]") {
  Tape<double>::active().clear();
  Tensor<double> x = Tensor<double>::ones({2, 3}, true);
  Tensor<double> bias = Tensor<double>::ones({3});  // no grad: a constant
  Tensor<double> h = exp(x);                        // #0
  Tensor<double> y = h + bias;                      // #1, from #0 and the constant
  Tensor<double> z = y * h;                         // #2, from #1 and #0
  CHECK(tape_string<double>() ==
        "#0 exp leaf (2,3) -> (2,3)\n"
        "#1 add #0 (2,3), constant (3) -> (2,3)\n"
        "#2 mul #1 (2,3), #0 (2,3) -> (2,3)\n");
  Tape<double>::active().clear();
}

TEST_CASE("the tape printout marks an input whose node a backward freed", "[tape]") {
  Tape<double>::active().clear();
  Tensor<double> x = Tensor<double>::ones({2}, true);
  Tensor<double> h = exp(x);
  sum(h).backward();  // frees the nodes of exp and sum: h keeps its value, not its history
  Tensor<double> y = h * 2.0;
  CHECK(tape_string<double>() == "#0 mul_scalar freed (2) -> (2)\n");
  Tape<double>::active().clear();
}

TEST_CASE("backward errors are clear", "[tape]") {
  Tensor<double> x(Array<double>{1.0, 2.0}, true);
  Tensor<double> y = x * 2.0;
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("backward") && Catch::Contains("(2)"));
  CHECK_THROWS_AS(y.backward(Array<double>{1.0, 2.0, 3.0}), std::invalid_argument);
  Tensor<double> c(Array<double>{1.0});
  CHECK_THROWS_WITH(c.backward(), Catch::Contains("does not require grad"));
  CHECK_THROWS_WITH(c.grad(), Catch::Contains("no gradient"));
  // A missing gradient has a type that says so (and is no ShapeError: no shape is wrong).
  CHECK_THROWS_AS(c.grad(), NoGradientError);
  CHECK_THROWS_AS(x.grad(), NoGradientError);  // backward never ran
  CHECK_FALSE(std::is_base_of_v<ShapeError, NoGradientError>);
  CHECK_FALSE(std::is_base_of_v<ShapeError, UndefinedTensorError>);
  Tape<double>::active().clear();
}

TEST_CASE("a non-scalar output takes an explicit seed", "[tape]") {
  Tensor<double> x(Array<double>{1.0, 2.0}, true);
  Tensor<double> y = x * x;
  y.backward(Array<double>{1.0, 10.0});
  CHECK(x.grad()(0) == Approx(2.0));
  CHECK(x.grad()(1) == Approx(40.0));
}

TEST_CASE("sum_to reduces leading and size-1 axes", "[tape][sum_to]") {
  Array<double> g = xt::ones<double>({2, 3, 4});
  Array<double> r = sum_to<double>(g, Shape{3, 1});
  REQUIRE(r.shape().size() == 2);
  CHECK(r.shape()[0] == 3);
  CHECK(r.shape()[1] == 1);
  CHECK(r(0, 0) == Approx(8.0));
  CHECK_THROWS_AS(sum_to<double>(g, Shape{5}), ShapeError);
}

namespace {
// The index into `to` (which broadcasts to `from`) that index `flat` of `from` was copied
// from: leading axes dropped, size-1 axes at 0.
std::size_t broadcast_source(std::size_t flat, const Shape& from, const Shape& to) {
  const std::size_t lead = from.size() - to.size();
  std::size_t target = 0, stride = 1;
  for (std::size_t i = from.size(); i-- > 0;) {
    const std::size_t at = flat % from[i];
    flat /= from[i];
    if (i < lead) continue;
    target += (to[i - lead] == 1 ? 0 : at) * stride;
    stride *= to[i - lead];
  }
  return target;
}
}  // namespace

TEST_CASE("sum_to and broadcast_to equal their definitions index by index", "[tape][sum_to]") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {4}},       {{2, 3, 4}, {3, 1}},    {{2, 3, 4}, {1, 3, 1}},
      {{2, 3, 4}, {2, 1, 4}}, {{2, 3, 4}, {}},        {{2, 3, 4}, {1}},
      {{5, 1, 3}, {1, 3}},    {{4, 6}, {4, 1}},       {{4, 6}, {1, 6}},
      {{2, 2, 3, 5}, {2, 1, 3, 1}}, {{7}, {1}},        {{3, 2}, {2}}, {{}, {}}};
  double next = 0.25;
  const auto fill = [&next](Array<double>& a) {
    for (double& v : a) v = next = std::fmod(next * 7.31 + 0.113, 5.0) - 2.5;
  };
  for (const auto& [from, to] : cases) {
    INFO(shape_str(from) << " -> " << shape_str(to));
    Array<double> g = Array<double>::from_shape(from), x = Array<double>::from_shape(to);
    fill(g);
    fill(x);
    Array<double> want = Array<double>::from_shape(to);
    want.fill(0.0);
    for (std::size_t i = 0; i < g.size(); ++i) want.data()[broadcast_source(i, from, to)] += g.data()[i];
    const Array<double> summed = sum_to<double>(g, to);
    REQUIRE(shape_str(shape_of(summed)) == shape_str(to));
    for (std::size_t i = 0; i < want.size(); ++i)
      CHECK(summed.data()[i] == Approx(want.data()[i]).margin(1e-12));
    const Array<double> spread = broadcast_to<double>(x, from);
    REQUIRE(shape_str(shape_of(spread)) == shape_str(from));
    for (std::size_t i = 0; i < spread.size(); ++i)
      CHECK(spread.data()[i] == x.data()[broadcast_source(i, from, to)]);
  }
  // an empty gradient sums to zeros of the input's shape
  const Array<double> none = sum_to<double>(Array<double>::from_shape({0, 3}), Shape{1, 3});
  REQUIRE(none.size() == 3);
  for (double v : none) CHECK(v == 0.0);
  CHECK_THROWS_AS(sum_to<double>(Array<double>::from_shape({2, 3}), Shape{2}), ShapeError);
  CHECK_THROWS_AS(broadcast_to<double>(Array<double>::from_shape({2, 3}), Shape{3}), ShapeError);
}

TEST_CASE("a gradient held from before a value of another shape is an error, not a blend", "[tape]") {
  Tensor<double> x(Array<double>{1.0, 2.0}, true);
  sum(x * x).backward();
  x.value() = Array<double>{1.0, 2.0, 3.0};
  CHECK_THROWS_WITH(sum(x * x).backward(), Catch::Contains("cannot be added to the gradient of shape (2)"));
}

TEST_CASE("the memory reuse policy is on by default and can be switched", "[memory]") {
  // on unless the environment opted out (GLIBC_TUNABLES malloc settings or
  // TAPEGRAD_MALLOC_REUSE=0)
  const bool env_opt_out = std::getenv("GLIBC_TUNABLES") || std::getenv("TAPEGRAD_MALLOC_REUSE");
#ifdef __SANITIZE_ADDRESS__
  // AddressSanitizer brings its own allocator, whose mallopt does nothing and returns 0:
  // the policy reports itself off rather than pretending (scripts/test.sh's ASan run).
  CHECK_FALSE(memory_reuse_enabled());
  CHECK_FALSE(set_memory_reuse(true));
  return;
#endif
  if (!env_opt_out) CHECK(memory_reuse_enabled());
  CHECK_FALSE(set_memory_reuse(false));
  CHECK_FALSE(memory_reuse_enabled());
  CHECK(set_memory_reuse(true));
  CHECK(memory_reuse_enabled());
}

TEST_CASE("anomaly mode names the op whose output is not finite", "[anomaly]") {
  Tensor<double> x(Array<double>{1.0, -1.0}, true);
  CHECK_NOTHROW(log(x));  // off by default: NaN passes silently, as in NumPy
  AnomalyGuard guard;
  CHECK(anomaly_mode());
  CHECK_THROWS_WITH(log(x), Catch::Contains("anomaly: log") && Catch::Contains("(2)"));
  Tape<double>::active().clear();
}

TEST_CASE("anomaly mode names an input that already held the NaN, not the op it reached",
          "[anomaly]") {
  // x came in with a NaN (a leaf made before the guard): matmul only carries it
  Tensor<double> x(Array<double>{{1.0, std::nan("")}, {3.0, 4.0}}, true);
  Tensor<double> w(Array<double>{{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, true);
  Tensor<double> y = sum(matmul(x, w));  // recorded without the guard
  {
    AnomalyGuard guard;
    CHECK_THROWS_WITH(matmul(x, w), Catch::Contains("anomaly: input 0 of matmul already holds NaN") &&
                                        Catch::Contains("(2,2), (2,3) -> (2,3)"));
    const Tensor<double> inf_leaf(Array<double>{1.0, std::numeric_limits<double>::infinity()});
    CHECK_THROWS_WITH(add(Tensor<double>(Array<double>{1.0, 2.0}), inf_leaf),
                      Catch::Contains("input 1 of add already holds Inf"));
    // an op that makes the NaN itself is still blamed
    CHECK_THROWS_WITH(log(Tensor<double>(Array<double>{-1.0})),
                      Catch::Contains("anomaly: log produced"));
    // backward under the guard: matmul's gradient for w is x^T @ dy, NaN because x is
    CHECK_THROWS_WITH(y.backward(), Catch::Contains("input 0 of matmul already holds NaN"));
  }
  Tape<double>::active().clear();
}

TEST_CASE("anomaly mode catches a non-finite gradient in backward", "[anomaly]") {
  // sqrt(0) is finite, its gradient 1 / (2 sqrt(0)) is not
  Tensor<double> x(Array<double>{0.0, 4.0}, true);
  Tensor<double> y = sum(sqrt(x));
  {
    AnomalyGuard guard;
    CHECK_THROWS_WITH(y.backward(), Catch::Contains("backward of sqrt"));
  }
  CHECK_FALSE(anomaly_mode());
  CHECK(Tape<double>::active().size() == 0);  // the failed sweep left no nodes behind
}
