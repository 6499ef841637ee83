// The fused multi-head ops agree with the plain composition (reshape, transpose, matmul_nt,
// masked_softmax, matmul) forward and backward, to round-off, and pass gradcheck.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "ops/attention.hpp"
#include "ops/attention_fused.hpp"
#include "ops/kernels/gemm.hpp"
#include "tapegrad.hpp"

using namespace tapegrad;

namespace {

template <class T>
struct Outputs {
  Array<T> y, w, dq, dk, dv;
};

// loss = sum(y * ry) + sum(w * rw), so both outputs carry gradient
template <class T>
Outputs<T> run(bool fused, const Array<T>& q0, const Array<T>& k0, const Array<T>& v0,
               std::size_t H, bool causal, T scale, const Array<T>& ry, const Array<T>& rw) {
  Tensor<T> q(q0, true), k(k0, true), v(v0, true);
  const std::size_t B = q0.shape()[0], Tn = q0.shape()[1], D = q0.shape()[2], dh = D / H;
  Tensor<T> y, w;
  if (fused) {
    w = attention_weights(q, k, H, scale, causal);
    y = attention_mix(w, v, H, causal);
  } else {
    auto split = [&](const Tensor<T>& t) {
      return transpose(reshape(t, Shape{B, Tn, H, dh}), {0, 2, 1, 3});
    };
    Tensor<T> scores = mul(matmul_nt(split(q), split(k)), scale);
    w = causal ? masked_softmax(scores, causal_mask(Tn)) : softmax(scores, -1);
    y = reshape(transpose(matmul(w, split(v)), {0, 2, 1, 3}), Shape{B, Tn, D});
  }
  Tensor<T> loss = sum(y * Tensor<T>(ry)) + sum(w * Tensor<T>(rw));
  loss.backward();
  return {y.value(), w.value(), q.grad(), k.grad(), v.grad()};
}

template <class T>
double max_diff(const Array<T>& a, const Array<T>& b) {
  REQUIRE(a.shape() == b.shape());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(double(a.data()[i]) - double(b.data()[i])));
  return m;
}

template <class T>
void check_agreement(std::size_t B, std::size_t Tn, std::size_t D, std::size_t H, bool causal,
                     double tol) {
  Generator g(B * 100 + Tn * 10 + H);
  auto rnd = [&](Shape s) { return Tensor<T>::randn(s, g).value(); };
  const Array<T> q = rnd({B, Tn, D}), k = rnd({B, Tn, D}), v = rnd({B, Tn, D});
  const Array<T> ry = rnd({B, Tn, D}), rw = rnd({B, H, Tn, Tn});
  const T scale = T(1) / std::sqrt(T(D / H));
  const Outputs<T> f = run<T>(true, q, k, v, H, causal, scale, ry, rw);
  const Outputs<T> c = run<T>(false, q, k, v, H, causal, scale, ry, rw);
  CHECK(max_diff(f.y, c.y) < tol);
  CHECK(max_diff(f.w, c.w) < tol);
  CHECK(max_diff(f.dq, c.dq) < tol);
  CHECK(max_diff(f.dk, c.dk) < tol);
  CHECK(max_diff(f.dv, c.dv) < tol);
}

}  // namespace

TEST_CASE("fused attention equals the composition in double", "[attention_fused]") {
  check_agreement<double>(2, 5, 8, 2, true, 1e-12);
  check_agreement<double>(2, 5, 8, 2, false, 1e-12);
  check_agreement<double>(3, 7, 12, 3, true, 1e-12);
  check_agreement<double>(1, 1, 4, 4, true, 1e-12);
}

TEST_CASE("fused attention equals the composition in float", "[attention_fused]") {
  check_agreement<float>(2, 17, 32, 4, true, 2e-5);
  check_agreement<float>(2, 9, 16, 2, false, 2e-5);
}

TEST_CASE("fused attention gives the same result on 1 and 2 threads", "[attention_fused]") {
  Generator g(3);
  const std::size_t B = 2, Tn = 6, D = 8, H = 2;
  auto rnd = [&](Shape s) { return Tensor<double>::randn(s, g).value(); };
  const Array<double> q = rnd({B, Tn, D}), k = rnd({B, Tn, D}), v = rnd({B, Tn, D});
  const Array<double> ry = rnd({B, Tn, D}), rw = rnd({B, H, Tn, Tn});
  kernels::set_num_threads(1);
  const Outputs<double> one = run<double>(true, q, k, v, H, true, 0.5, ry, rw);
  kernels::set_num_threads(2);
  const Outputs<double> two = run<double>(true, q, k, v, H, true, 0.5, ry, rw);
  kernels::set_num_threads(1);
  CHECK(max_diff(one.y, two.y) < 1e-13);
  CHECK(max_diff(one.dq, two.dq) < 1e-13);
  CHECK(max_diff(one.dv, two.dv) < 1e-13);
}

TEST_CASE("fused attention ops pass gradcheck", "[attention_fused]") {
  Generator g(11);
  for (bool causal : {true, false}) {
    std::vector<Tensor<double>> in = {Tensor<double>::randn({2, 4, 6}, g, 0, 1, true),
                                      Tensor<double>::randn({2, 4, 6}, g, 0, 1, true),
                                      Tensor<double>::randn({2, 4, 6}, g, 0, 1, true)};
    auto f = [causal](const std::vector<Tensor<double>>& x) {
      return attention_mix(attention_weights(x[0], x[1], 3, 0.7, causal), x[2], 3, causal);
    };
    const GradcheckResult r = gradcheck<double>(f, in);
    INFO(r.to_string());
    CHECK(r.passed);
  }
}

TEST_CASE("fused attention ops reject bad shapes by name", "[attention_fused]") {
  Tensor<double> q = Tensor<double>::zeros({2, 4, 6}), k = Tensor<double>::zeros({2, 4, 5});
  CHECK_THROWS_WITH(attention_weights(q, k, 2, 1.0, false),
                    Catch::Contains("attention_weights") && Catch::Contains("(2,4,5)"));
  CHECK_THROWS_WITH(attention_weights(q, q, 4, 1.0, false),
                    Catch::Contains("D=6 is not divisible by heads=4"));
  Tensor<double> w = Tensor<double>::zeros({2, 3, 4, 4});
  CHECK_THROWS_WITH(attention_mix(w, q, 2), Catch::Contains("attention_mix") &&
                                                 Catch::Contains("(2,3,4,4)"));
}

TEST_CASE("multi_head_attention: the fused path equals the composition", "[attention_fused]") {
  Generator g(5);
  for (bool causal : {true, false}) {
    for (double scale : {0.0, 1.0}) {  // 0 stands for the default 1/sqrt(dh)
      MultiHeadOptions fused, plain;
      fused.causal = plain.causal = causal;
      if (scale != 0.0) fused.scale = plain.scale = scale;
      plain.fused = false;
      std::vector<Array<double>> grads[2];
      Array<double> y[2], w[2];
      const Array<double> x0 = Tensor<double>::randn({2, 6, 8}, g).value();
      std::vector<Array<double>> W0;
      for (int i = 0; i < 4; ++i) W0.push_back(Tensor<double>::randn({8, 8}, g, 0, 0.5).value());
      const Array<double> ry = Tensor<double>::randn({2, 6, 8}, g).value();
      for (int path = 0; path < 2; ++path) {
        Tensor<double> x(x0, true), Wq(W0[0], true), Wk(W0[1], true), Wv(W0[2], true),
            Wo(W0[3], true);
        AttentionResult<double> r = multi_head_attention_with_weights(
            x, Wq, Wk, Wv, Wo, 2, path == 0 ? fused : plain);
        sum(r.out * Tensor<double>(ry)).backward();
        y[path] = r.out.value();
        w[path] = r.weights.value();
        grads[path] = {x.grad(), Wq.grad(), Wk.grad(), Wv.grad(), Wo.grad()};
      }
      CHECK(max_diff(y[0], y[1]) < 1e-12);
      CHECK(max_diff(w[0], w[1]) < 1e-12);
      for (std::size_t i = 0; i < 5; ++i) CHECK(max_diff(grads[0][i], grads[1][i]) < 1e-12);
    }
  }
}

TEST_CASE("fused attention ops take the resolved dims of check_attention_spec", "[attention_fused]") {
  // grouped (4 query heads on 2 kv heads), Tq < Tk, dv != dh: the dims overloads equal the
  // composed reference of attention()
  Generator g(21);
  const Tensor<double> q = Tensor<double>::randn({2, 3, 12}, g, 0, 1, true);
  const Tensor<double> k = Tensor<double>::randn({2, 5, 6}, g, 0, 1, true);
  const Tensor<double> v = Tensor<double>::randn({2, 5, 4}, g, 0, 1, true);
  AttentionSpec spec;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.causal = true;
  const AttentionDims d = check_attention_spec("test", q.shape(), k.shape(), v.shape(), spec);
  const Tensor<double> w = attention_weights(q, k, d);
  const Tensor<double> y = attention_mix(w, v, d);
  const AttentionResult<double> ref = attention(q, k, v, spec, AttentionPath::composed);
  CHECK(y.shape() == Shape{2, 3, 8});
  CHECK(max_diff(y.value(), ref.out.value()) < 1e-12);
  CHECK(max_diff(w.value(), ref.weights.value()) < 1e-12);
}

TEST_CASE("fused attention ops reject a non-finite or non-positive scale", "[attention_fused]") {
  // the composed path always did; through the one spec check the fused ops do too
  const Tensor<double> q = Tensor<double>::zeros({2, 4, 6});
  for (double s : {std::nan(""), std::numeric_limits<double>::infinity(), 0.0, -1.0})
    CHECK_THROWS_WITH(attention_weights(q, q, 2, s, false),
                      Catch::Contains("attention_weights") && Catch::Contains("scale") &&
                          Catch::Contains("(2,4,6)"));
}
