// ops/matmul: NumPy matmul semantics (2-D, batched, broadcast batch axes, 1-D operands),
// matmul_nt, linear (matmul and add as one op), gradients by finite differences, errors.
#include <cstring>

#include "helpers.hpp"
#include "autograd/memory.hpp"
#include "autograd/shape.hpp"
#include "ops/kernels/gemm.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {
// An independent reference: NumPy's matmul for operands of rank >= 2, written as the
// textbook triple loop with batch axes aligned from the right and size-1 axes repeated.
template <class T>
Array<T> reference_matmul(const Array<T>& a, const Array<T>& b) {
  const Shape as = array_shape(a), bs = array_shape(b);
  const std::size_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  const std::size_t rank = std::max(as.size(), bs.size());
  Shape out(rank, 1);
  auto dim = [&](const Shape& s, std::size_t i) {  // batch axis i of the output, in s
    const std::size_t lead = rank - s.size();
    return i < lead ? std::size_t(1) : s[i - lead];
  };
  for (std::size_t i = 0; i + 2 < rank; ++i) out[i] = std::max(dim(as, i), dim(bs, i));
  out[rank - 2] = M;
  out[rank - 1] = N;
  Array<T> c = Array<T>::from_shape(out);
  const std::size_t batches = numel(out) / (M * N);
  for (std::size_t n = 0; n < batches; ++n) {
    // decompose n into the output batch index, then into a's and b's matrix index
    std::size_t rest = n, ia = 0, ib = 0, sa = 1, sb = 1;
    for (std::size_t i = rank - 2; i-- > 0;) {
      const std::size_t pos = rest % out[i];
      rest /= out[i];
      ia += (dim(as, i) == 1 ? 0 : pos) * sa;
      ib += (dim(bs, i) == 1 ? 0 : pos) * sb;
      sa *= dim(as, i);
      sb *= dim(bs, i);
    }
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t j = 0; j < N; ++j) {
        double acc = 0;
        for (std::size_t k = 0; k < K; ++k)
          acc += double(a.data()[ia * M * K + m * K + k]) * double(b.data()[ib * K * N + k * N + j]);
        c.data()[n * M * N + m * N + j] = T(acc);
      }
  }
  return c;
}

template <class T>
double matmul_tolerance() {
  return std::is_same<T, float>::value ? 1e-5 : 1e-12;
}
}  // namespace

TEMPLATE_TEST_CASE("matmul of matrices by hand", "[matmul]", float, double) {
  using T = TestType;
  auto a = make<T>({2, 2}, {1, 2, 3, 4});
  auto b = make<T>({2, 2}, {5, 6, 7, 8});
  check_values(matmul(a, b), {2, 2}, {19, 22, 43, 50});
  check_values(matmul(b, a), {2, 2}, {23, 34, 31, 46});
  auto c = make<T>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto d = make<T>({3, 2}, {7, 8, 9, 10, 11, 12});
  check_values(matmul(c, d), {2, 2}, {58, 64, 139, 154});
  check_values(matmul(d, c), {3, 3}, {39, 54, 69, 49, 68, 87, 59, 82, 105});
  // an empty inner dimension sums nothing
  check_values(matmul(Tensor<T>::ones({2, 0}), Tensor<T>::ones({0, 3})), {2, 3}, {0, 0, 0, 0, 0, 0});
}

TEMPLATE_TEST_CASE("batched matmul by hand", "[matmul]", float, double) {
  using T = TestType;
  // a[0] = I, a[1] = [[1,2],[3,4]]
  auto a = make<T>({2, 2, 2}, {1, 0, 0, 1, 1, 2, 3, 4});
  // one matrix for the whole batch: (2,2,2) @ (2,2), the folded Linear case
  auto w = make<T>({2, 2}, {5, 6, 7, 8});
  check_values(matmul(a, w), {2, 2, 2}, {5, 6, 7, 8, 19, 22, 43, 50});
  // a matrix per batch item: b[0] = [[5,6],[7,8]], b[1] = diag(1, 2)
  auto b = make<T>({2, 2, 2}, {5, 6, 7, 8, 1, 0, 0, 2});
  check_values(matmul(a, b), {2, 2, 2}, {5, 6, 7, 8, 1, 4, 3, 8});
  // one left matrix for every right one: (2,2) @ (2,2,2)
  check_values(matmul(w, b), {2, 2, 2}, {67, 78, 91, 106, 5, 12, 7, 16});
}

TEMPLATE_TEST_CASE("batched and broadcast matmul against the reference loop", "[matmul]",
                   float, double) {
  using T = TestType;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 1, 3, 4}, {5, 4, 2}},     // -> (2,5,3,2)
      {{3, 4}, {2, 4, 5}},           // -> (2,3,5)
      {{2, 3, 4}, {4, 5}},           // -> (2,3,5), folded into one gemm
      {{2, 3, 2, 4}, {2, 3, 4, 2}},  // 4-D, no broadcasting
      {{1, 3, 2, 4}, {2, 1, 4, 3}},  // both operands broadcast
      {{2, 1, 2, 3}, {1, 4, 3, 2}},  // outer product of batch axes
      {{3, 1, 4}, {1, 4, 5}},        // M = 1
  };
  std::uint64_t seed = 1;
  for (const auto& [sa, sb] : cases) {
    INFO(shape_str(sa) << " @ " << shape_str(sb));
    auto a = random<T>(sa, seed++, false);
    auto b = random<T>(sb, seed++, false);
    check_close<T>(matmul(a, b).value(), reference_matmul<T>(a.value(), b.value()),
                   matmul_tolerance<T>());
  }
  auto a = random<T>({2, 1, 3, 4}, 100, false);
  auto b = random<T>({5, 4, 2}, 101, false);
  CHECK(matmul(a, b).shape() == Shape{2, 5, 3, 2});
}

TEMPLATE_TEST_CASE("matmul with 1-D operands follows NumPy", "[matmul]", float, double) {
  using T = TestType;
  auto v = make<T>({2}, {1, 2});
  auto m = make<T>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_values(matmul(v, m), {3}, {9, 12, 15});  // vector @ matrix: (2) @ (2,3) -> (3)
  auto n = make<T>({3, 2}, {1, 2, 3, 4, 5, 6});
  check_values(matmul(n, v), {3}, {5, 11, 17});  // matrix @ vector: (3,2) @ (2) -> (3)
  auto u = make<T>({3}, {1, 2, 3});
  auto w = make<T>({3}, {4, 5, 6});
  check_values(matmul(u, w), {}, {32});  // vector @ vector -> scalar ()
  // vector against a stack: (2) @ (2,2,3) -> (2,3); (2,3,2) @ (2) -> (2,3)
  auto s = make<T>({2, 2, 3}, {1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 0, 1});
  check_values(matmul(v, s), {2, 3}, {9, 12, 15, 2, 1, 2});
  auto r = make<T>({2, 3, 2}, {1, 2, 3, 4, 5, 6, 0, 1, 1, 0, 2, 2});
  check_values(matmul(r, v), {2, 3}, {5, 11, 17, 2, 1, 6});
}

TEMPLATE_TEST_CASE("matmul_nt equals matmul with the last two axes of b swapped",
                   "[matmul]", float, double) {
  using T = TestType;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {5, 4}},
      {{2, 3, 4}, {5, 4}},           // folded
      {{3, 4}, {2, 5, 4}},
      {{2, 1, 3, 4}, {5, 2, 4}},
      {{2, 3, 6, 4}, {2, 3, 6, 4}},  // attention's q @ k^T
  };
  std::uint64_t seed = 10;
  for (const auto& [sa, sb] : cases) {
    INFO(shape_str(sa) << " @ " << shape_str(sb) << "^T");
    auto a = random<T>(sa, seed++);
    auto b = random<T>(sb, seed++);
    // the same values, and the same gradients for the same upstream gradient
    Tensor<T> nt = matmul_nt(a, b);
    const Array<T> seed_grad = random<T>(nt.shape(), seed++, false).value();
    nt.backward(seed_grad);
    const Array<T> da = a.grad(), db = b.grad();
    a.zero_grad();
    b.zero_grad();
    Tensor<T> ref = matmul(a, swapaxes(b, -1, -2));
    check_close<T>(nt.value(), ref.value(), matmul_tolerance<T>());
    ref.backward(seed_grad);
    check_close<T>(da, a.grad(), matmul_tolerance<T>());
    check_close<T>(db, b.grad(), matmul_tolerance<T>());
  }
  check_values(matmul_nt(make<T>({1, 2}, {1, 2}), make<T>({2, 2}, {3, 4, 5, 6})), {1, 2}, {11, 17});
}

TEST_CASE("gradcheck of matmul on every operand layout", "[matmul][gradcheck]") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},
      {{2, 3, 4}, {4, 5}},           // folded Linear
      {{3, 4}, {2, 4, 5}},           // a broadcast over b's batch
      {{2, 1, 3, 4}, {5, 4, 2}},     // a broadcast on axis 1, b on axis 0
      {{2, 3, 4}, {2, 4, 5}},
      {{1, 3, 2, 4}, {2, 1, 4, 3}},  // both broadcast
      {{4}, {4, 5}},                 // vector @ matrix
      {{3, 4}, {4}},                 // matrix @ vector
      {{4}, {4}},                    // vector @ vector
      {{4}, {2, 4, 3}},              // vector @ stack
      {{2, 3, 4}, {4}},              // stack @ vector
  };
  std::uint64_t seed = 20;
  for (const auto& [sa, sb] : cases) {
    INFO(shape_str(sa) << " @ " << shape_str(sb));
    auto a = random<double>(sa, seed++);
    auto b = random<double>(sb, seed++);
    require_gradcheck<double>([](const auto& v) { return matmul(v[0], v[1]); }, {a, b});
    // one operand constant
    auto c = random<double>(sb, seed++, false);
    require_gradcheck<double>([](const auto& v) { return matmul(v[0], v[1]); }, {a, c});
    // the same tensor on both sides when the shapes allow it
    if (sa == sb && sa.size() == 1)
      require_gradcheck<double>([](const auto& v) { return matmul(v[0], v[0]); }, {a});
  }
}

TEST_CASE("gradcheck of matmul_nt", "[matmul][gradcheck]") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {5, 4}},
      {{2, 3, 4}, {5, 4}},
      {{3, 4}, {2, 5, 4}},
      {{2, 1, 3, 4}, {5, 2, 4}},
      {{2, 2, 3, 4}, {2, 2, 3, 4}},
  };
  std::uint64_t seed = 40;
  for (const auto& [sa, sb] : cases) {
    INFO(shape_str(sa) << " @ " << shape_str(sb) << "^T");
    auto a = random<double>(sa, seed++);
    auto b = random<double>(sb, seed++);
    require_gradcheck<double>([](const auto& v) { return matmul_nt(v[0], v[1]); }, {a, b});
  }
  // q @ q^T: one tensor on both sides
  auto q = random<double>({2, 3, 4}, 50);
  require_gradcheck<double>([](const auto& v) { return matmul_nt(v[0], v[0]); }, {q});
}

TEST_CASE("float32 spot check of matmul gradients", "[matmul][gradcheck][float]") {
  auto a = random<float>({2, 1, 3, 4}, 60);
  auto b = random<float>({2, 4, 2}, 61);
  auto w = random<float>({2, 4}, 62);
  const auto opt = GradcheckOptions::for_float();
  require_gradcheck<float>([](const auto& v) { return matmul(v[0], v[1]); }, {a, b}, opt);
  require_gradcheck<float>([](const auto& v) { return matmul_nt(v[0], v[1]); }, {a, w}, opt);
}

TEST_CASE("batched matmul gives the same numbers on 1 and 2 threads", "[matmul][threads]") {
  auto a = random<double>({4, 3, 5, 6}, 70);
  auto b = random<double>({4, 3, 6, 5}, 71);
  const int before = kernels::num_threads();
  kernels::set_num_threads(1);
  Tensor<double> one = matmul(a, b);
  sum(one * one).backward();
  const Array<double> da1 = a.grad(), db1 = b.grad();
  a.zero_grad();
  b.zero_grad();
  kernels::set_num_threads(2);
  Tensor<double> two = matmul(a, b);
  sum(two * two).backward();
  kernels::set_num_threads(before);
  check_close<double>(two.value(), one.value(), 1e-14);
  check_close<double>(a.grad(), da1, 1e-14);
  check_close<double>(b.grad(), db1, 1e-14);
}

TEST_CASE("matmul shape errors name the op and the shapes", "[matmul][errors]") {
  auto a = Tensor<double>::ones({2, 3});
  auto b = Tensor<double>::ones({4, 5});
  require_shape_error([&] { matmul(a, b); }, {"matmul", "(2,3)", "(4,5)"});
  require_shape_error([&] { matmul(Tensor<double>::ones({2, 3, 4}), Tensor<double>::ones({3, 4, 5})); },
                      {"matmul", "(2,3,4)", "(3,4,5)"});
  require_shape_error([&] { matmul(Tensor<double>::ones({2, 2, 3, 4}), Tensor<double>::ones({3, 1, 4, 5})); },
                      {"matmul", "(2,2,3,4)", "(3,1,4,5)"});
  require_shape_error([&] { matmul(Tensor<double>::ones({3}), b); }, {"matmul", "(3)", "(4,5)"});
  require_shape_error([&] { matmul(a, Tensor<double>::ones({4})); }, {"matmul", "(2,3)", "(4)"});
  require_shape_error([&] { matmul(Tensor<double>::ones({3}), Tensor<double>::ones({4})); },
                      {"matmul", "(3)", "(4)"});
  require_shape_error([&] { matmul(Tensor<double>::scalar(1.0), a); }, {"matmul", "()", "(2,3)"});
  require_shape_error([&] { matmul_nt(a, b); }, {"matmul_nt", "(2,3)", "(4,5)"});
  require_shape_error([&] { matmul_nt(Tensor<float>::ones({2, 3, 4}), Tensor<float>::ones({3, 5, 4})); },
                      {"matmul_nt", "(2,3,4)", "(3,5,4)"});
  require_shape_error([&] { matmul_nt(Tensor<float>::ones({4}), Tensor<float>::ones({5, 4})); },
                      {"matmul_nt", "(4)", "(5,4)"});
}

namespace {
template <class T>
bool same_bits(const Array<T>& a, const Array<T>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
void check_linear_equals_matmul_add() {
  Generator g(31);
  Tensor<T> x = Tensor<T>::randn({3, 5, 7}, g, T(0), T(1), true);
  Tensor<T> w = Tensor<T>::randn({7, 6}, g, T(0), T(1), true);
  Tensor<T> b = Tensor<T>::randn({6}, g, T(0), T(1), true);
  const Tensor<T> upstream = Tensor<T>::randn({3, 5, 6}, g);
  Tensor<T> y = linear(x, w, b);
  sum(y * upstream).backward();
  const Array<T> dx = x.grad(), dw = w.grad(), db = b.grad();
  x.zero_grad(), w.zero_grad(), b.zero_grad();
  Tensor<T> reference = matmul(x, w) + b;
  sum(reference * upstream).backward();
  CHECK(same_bits(y.value(), reference.value()));
  CHECK(same_bits(dx, x.grad()));
  CHECK(same_bits(dw, w.grad()));
  CHECK(same_bits(db, b.grad()));
}
}  // namespace

TEST_CASE("linear equals matmul then add bit for bit, forward and backward", "[matmul][linear]") {
  check_linear_equals_matmul_add<float>();
  check_linear_equals_matmul_add<double>();
}

// matmul then add keeps the product before the bias alive for add's backward (as its
// input); linear makes no such tensor, so after the forward it holds one (N, out) less.
TEST_CASE("linear keeps no product before the bias for the backward", "[matmul][linear][memory]") {
  Generator g(32);
  Tensor<float> x = Tensor<float>::randn({64, 32}, g, 0, 1, true);
  Tensor<float> w = Tensor<float>::randn({32, 1024}, g, 0, 1, true);
  Tensor<float> b = Tensor<float>::randn({1024}, g, 0, 1, true);
  const double product = 64.0 * 1024 * sizeof(float);
  auto held_after_forward = [&](bool fused) {
    const double before = double(tensor_bytes_in_use());
    Tensor<float> loss = sum(fused ? linear(x, w, b) : matmul(x, w) + b);
    const double held = double(tensor_bytes_in_use()) - before;
    loss.backward();
    return held;
  };
  const double fused = held_after_forward(true), separate = held_after_forward(false);
  INFO("held after the forward: linear " << fused << " bytes, matmul + add " << separate);
  CHECK(separate - fused >= product);
  CHECK(fused < 1.1 * product + 4096);
}

TEST_CASE("linear names the bias that does not fit", "[matmul][linear]") {
  Tensor<float> x = Tensor<float>::zeros({2, 3}), w = Tensor<float>::zeros({3, 4});
  CHECK_THROWS_WITH(linear(x, w, Tensor<float>::zeros({3})),
                    Catch::Contains("linear") && Catch::Contains("(3)") && Catch::Contains("expected (4)"));
  CHECK_THROWS_WITH(linear(x, Tensor<float>::zeros({2, 4}), Tensor<float>::zeros({4})),
                    Catch::Contains("linear") && Catch::Contains("inner dimensions"));
}
