// Attention (ops/attention.cpp) against its specification (ops/attention.hpp): eight
// numbered checks (shapes, the 1/sqrt(d_k) scale, exact zeros under a mask, no future key
// reaching a query, rows summing to 1, the causal mask, multi-head against a loop over
// heads, heads independent of each other), several shown to fail on the classic bug they
// exist for; the causal invariants; the fully masked row; every argument error; gradcheck in
// double; and PyTorch float64 fixtures written by tests/make_attention_fixtures.py.
// Expected values come from hand computation, identities or the fixtures, never from this
// code's own output.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnpy.hpp>
#include <xtensor/xview.hpp>

#include "autograd/shape.hpp"
#include "ops/attention.hpp"
#include "tapegrad.hpp"
#include "test_paths.hpp"

using namespace tapegrad;

namespace {

using D = double;

Tensor<D> randn(const Shape& shape, std::uint64_t seed, bool requires_grad = true,
                double stddev = 1.0) {
  Generator gen(seed);
  return Tensor<D>::randn(shape, gen, 0.0, stddev, requires_grad);
}

Shape shape_of(const Array<D>& a) { return Shape(a.shape().begin(), a.shape().end()); }

// max |a - b| over equal shapes; NaN counts as infinitely far.
double max_abs_diff(const Array<D>& a, const Array<D>& b) {
  REQUIRE(shape_of(a) == shape_of(b));
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(a.data()[i] - b.data()[i]);
    m = std::max(m, std::isnan(d) ? std::numeric_limits<double>::infinity() : d);
  }
  return m;
}

bool all_finite(const Array<D>& a) {
  return std::all_of(a.begin(), a.end(), [](D v) { return std::isfinite(v); });
}

bool all_zero(const Array<D>& a) {
  return std::all_of(a.begin(), a.end(), [](D v) { return v == 0.0; });
}

// Row sums of a (..., Tq, Tk) array, flattened.
std::vector<double> row_sums(const Array<D>& w) {
  const std::size_t Tk = w.shape().back();
  std::vector<double> sums(w.size() / Tk, 0.0);
  for (std::size_t i = 0; i < w.size(); ++i) sums[i / Tk] += w.data()[i];
  return sums;
}

double max_row_sum_error(const Array<D>& w) {
  double m = 0.0;
  for (double s : row_sums(w)) m = std::max(m, std::abs(s - 1.0));
  return m;
}

Mask mask_from(const Shape& shape, const std::vector<int>& bits) {
  Mask m = Mask::from_shape(shape);
  REQUIRE(m.size() == bits.size());
  std::copy(bits.begin(), bits.end(), m.begin());
  return m;
}

// A random boolean mask with about 60% allowed; every row keeps at least one allowed key.
Mask random_mask(const Shape& shape, std::uint64_t seed) {
  Generator gen(seed);
  Mask m = Mask::from_shape(shape);
  for (bool& b : m) b = gen.uniform() < 0.6;
  const std::size_t Tk = shape.back();
  for (std::size_t r = 0; r < m.size() / Tk; ++r) {
    bool any = false;
    for (std::size_t k = 0; k < Tk; ++k) any = any || m.data()[r * Tk + k];
    if (!any) m.data()[r * Tk + gen.integer(Tk)] = true;
  }
  return m;
}

// sum(a * g) for a constant upstream gradient g: the scalar loss of a vector-Jacobian product.
Tensor<D> dot_loss(const Tensor<D>& a, const Array<D>& g) { return sum(a * Tensor<D>(g)); }

// Runs f and requires a ShapeError whose message contains every part.
void require_shape_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  static_assert(std::is_base_of<std::invalid_argument, ShapeError>::value, "");
  bool thrown = false;
  try {
    f();
  } catch (const ShapeError& e) {
    thrown = true;
    const std::string message = e.what();
    INFO("message: " << message);
    for (const std::string& p : parts) {
      INFO("expected to contain: " << p);
      CHECK(message.find(p) != std::string::npos);
    }
  }
  CHECK(thrown);
  Tape<D>::active().clear();
}

// Checks 7 and 8 need multi-head attention written two more ways: as an explicit loop
// over heads (the definition multi-head attention must match), and with the classic bug
// (reshape into heads without moving the head axis in front of the token axis).
using Mha = std::function<Tensor<D>(const Tensor<D>&, const Tensor<D>&, const Tensor<D>&,
                                    const Tensor<D>&, const Tensor<D>&, std::size_t, bool)>;

Tensor<D> mha_library(const Tensor<D>& x, const Tensor<D>& Wq, const Tensor<D>& Wk,
                      const Tensor<D>& Wv, const Tensor<D>& Wo, std::size_t heads, bool causal) {
  return multi_head_attention(x, Wq, Wk, Wv, Wo, heads, causal);
}

// Head h attends with the columns [h*dh, (h+1)*dh) of each projection; heads concatenated.
Tensor<D> mha_loop_over_heads(const Tensor<D>& x, const Tensor<D>& Wq, const Tensor<D>& Wk,
                              const Tensor<D>& Wv, const Tensor<D>& Wo, std::size_t heads,
                              bool causal) {
  const std::size_t T = x.shape()[1], Dm = x.shape()[2], dh = Dm / heads;
  const Tensor<D> q = matmul(x, Wq), k = matmul(x, Wk), v = matmul(x, Wv);
  std::vector<Tensor<D>> outs;
  for (std::size_t h = 0; h < heads; ++h) {
    auto cols = [&](const Tensor<D>& t) { return slice(t, -1, h * dh, (h + 1) * dh); };
    std::optional<Mask> mask;
    if (causal) mask = causal_mask(T);
    outs.push_back(scaled_dot_product_attention(cols(q), cols(k), cols(v), mask).out);
  }
  return matmul(concatenate(outs, -1), Wo);
}

// THE BUG: (B, T, D) -> (B, T, heads, dh) and straight into attention, so each token's
// heads attend to each other instead of each head attending over the tokens.
Tensor<D> mha_forgot_transpose(const Tensor<D>& x, const Tensor<D>& Wq, const Tensor<D>& Wk,
                               const Tensor<D>& Wv, const Tensor<D>& Wo, std::size_t heads,
                               bool /*causal: the (T, T) mask cannot even apply*/) {
  const std::size_t B = x.shape()[0], T = x.shape()[1], Dm = x.shape()[2];
  auto split = [&](const Tensor<D>& w) { return reshape(matmul(x, w), Shape{B, T, heads, Dm / heads}); };
  const Tensor<D> out = scaled_dot_product_attention(split(Wq), split(Wk), split(Wv)).out;
  return matmul(reshape(out, Shape{B, T, Dm}), Wo);
}

// Check 7: max |MHA - loop over heads|.
double check7_distance(const Mha& mha, bool causal) {
  NoGradGuard no_grad;
  const Tensor<D> x = randn({2, 5, 12}, 70, false);
  const Tensor<D> Wq = randn({12, 12}, 71, false, 0.3), Wk = randn({12, 12}, 72, false, 0.3);
  const Tensor<D> Wv = randn({12, 12}, 73, false, 0.3), Wo = randn({12, 12}, 74, false, 0.3);
  const Tensor<D> reference = mha_loop_over_heads(x, Wq, Wk, Wv, Wo, 3, causal);
  return max_abs_diff(mha(x, Wq, Wk, Wv, Wo, 3, causal).value(), reference.value());
}

// Check 8: block-diagonal Wq/Wk/Wv (D=4, 2 heads) and Wo = identity, so y's
// columns 0:2 are head 1's output. Returns how far head 1's output moves when head 2's
// input slice x[..., 2:4] is zeroed, and (to show the check has teeth) how far head 2's moves.
std::pair<double, double> check8_movement(const Mha& mha, bool causal) {
  NoGradGuard no_grad;
  Generator gen(80);
  auto block_diagonal = [&gen]() {
    Array<D> w = Array<D>::from_shape({4, 4});
    w.fill(0.0);
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 2; ++j) w(2 * b + i, 2 * b + j) = gen.normal();
    return Tensor<D>(w);
  };
  const Tensor<D> Wq = block_diagonal(), Wk = block_diagonal(), Wv = block_diagonal();
  const Tensor<D> Wo(Array<D>(xt::eye<D>(4)));
  const Tensor<D> x = randn({2, 5, 4}, 81, false);
  Array<D> zeroed = x.value();
  xt::view(zeroed, xt::all(), xt::all(), xt::range(2, 4)) = 0.0;
  const Array<D> y1 = mha(x, Wq, Wk, Wv, Wo, 2, causal).value();
  const Array<D> y2 = mha(Tensor<D>(zeroed), Wq, Wk, Wv, Wo, 2, causal).value();
  auto cols = [](const Array<D>& y, std::size_t a, std::size_t b) {
    return Array<D>(xt::view(y, xt::all(), xt::all(), xt::range(a, b)));
  };
  return {max_abs_diff(cols(y1, 0, 2), cols(y2, 0, 2)),
          max_abs_diff(cols(y1, 2, 4), cols(y2, 2, 4))};
}

}  // namespace

// ---------------------------------------------------------------- checks 1-8

TEST_CASE("np-05 check 1: shapes of out and weights for 2-D and batched 4-D inputs", "[attention]") {
  const auto r2 = scaled_dot_product_attention(randn({3, 4}, 1), randn({5, 4}, 2), randn({5, 6}, 3));
  CHECK(r2.out.shape() == Shape{3, 6});
  CHECK(r2.weights.shape() == Shape{3, 5});
  const auto r4 = scaled_dot_product_attention(randn({2, 3, 4, 8}, 4), randn({2, 3, 7, 8}, 5),
                                               randn({2, 3, 7, 5}, 6));
  CHECK(r4.out.shape() == Shape{2, 3, 4, 5});
  CHECK(r4.weights.shape() == Shape{2, 3, 4, 7});
  // causal MHA, B 2, T 6, D 16, 4 heads: out (2, 6, 16), weights (2, 4, 6, 6)
  MultiHeadOptions causal;
  causal.causal = true;
  const auto m = multi_head_attention_with_weights(randn({2, 6, 16}, 7), randn({16, 16}, 8),
                                                   randn({16, 16}, 9), randn({16, 16}, 10),
                                                   randn({16, 16}, 11), 4, causal);
  CHECK(m.out.shape() == Shape{2, 6, 16});
  CHECK(m.weights.shape() == Shape{2, 4, 6, 6});
  Tape<D>::active().clear();
}

TEST_CASE("np-05 check 2: the query (1 0) against two orthogonal keys gives 0.6698 scaled and 0.7311 unscaled", "[attention]") {
  NoGradGuard no_grad;
  const Tensor<D> Q(Array<D>{{1.0, 0.0}});
  const Tensor<D> K(Array<D>{{1.0, 0.0}, {0.0, 1.0}});
  const Tensor<D> V(Array<D>{{1.0, 0.0}, {0.0, 1.0}});  // identity: out equals weights
  // scores [1/sqrt(2), 0] -> first weight 1 / (1 + exp(-1/sqrt(2)))
  const auto scaled = scaled_dot_product_attention(Q, K, V);
  CHECK(std::abs(scaled.weights.value()(0, 0) - 0.6698) <= 1e-4);
  CHECK(std::abs(scaled.weights.value()(0, 0) - 1.0 / (1.0 + std::exp(-1.0 / std::sqrt(2.0)))) <= 1e-15);
  CHECK(std::abs(scaled.out.value()(0, 0) - 0.6698) <= 1e-4);
  // scores [1, 0] -> 1 / (1 + exp(-1))
  const auto unscaled = scaled_dot_product_attention(Q, K, V, std::nullopt, 1.0);
  CHECK(std::abs(unscaled.weights.value()(0, 0) - 0.7311) <= 1e-4);
  CHECK(std::abs(unscaled.weights.value()(0, 0) - 1.0 / (1.0 + std::exp(-1.0))) <= 1e-15);
  // and the same through multi-head attention's scale option (1 head, identity weights)
  const Tensor<D> x(Array<D>{{{1.0, 0.0}, {0.0, 1.0}}});
  const Tensor<D> I(Array<D>(xt::eye<D>(2)));
  MultiHeadOptions unscaled_mha;
  unscaled_mha.scale = 1.0;
  CHECK(std::abs(multi_head_attention_with_weights(x, I, I, I, I, 1).weights.value()(0, 0, 0, 0) - 0.6698) <= 1e-4);
  CHECK(std::abs(multi_head_attention_with_weights(x, I, I, I, I, 1, unscaled_mha).weights.value()(0, 0, 0, 0) - 0.7311) <= 1e-4);
}

TEST_CASE("np-05 check 3: masking 3 of 6 keys gives exactly zero weights there and rows summing to 1", "[attention]") {
  NoGradGuard no_grad;
  const Tensor<D> Q = randn({4, 5}, 30, false), K = randn({6, 5}, 31, false), V = randn({6, 3}, 32, false);
  const Mask keep = mask_from({6}, {1, 0, 1, 0, 1, 0});  // (6,) broadcasts over the 4 queries
  const auto r = scaled_dot_product_attention(Q, K, V, keep);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j : {1, 3, 5}) CHECK(std::abs(r.weights.value()(i, j)) <= 1e-9);
  CHECK(max_row_sum_error(r.weights.value()) <= 1e-12);
  // the survivors are exactly attention over keys 0, 2, 4 alone (same d_k, same scale)
  const Array<D> kept_idx_K = xt::view(K.value(), xt::keep(0, 2, 4), xt::all());
  const Array<D> kept_idx_V = xt::view(V.value(), xt::keep(0, 2, 4), xt::all());
  const auto three = scaled_dot_product_attention(Q, Tensor<D>(kept_idx_K), Tensor<D>(kept_idx_V));
  CHECK(max_abs_diff(r.out.value(), three.out.value()) <= 1e-12);

  // The check can fail: the "mask with zero" trap (scores * mask) leaves exp(0) in the sum.
  Array<D> keep01 = Array<D>::from_shape({6});
  std::copy(keep.begin(), keep.end(), keep01.begin());
  const Tensor<D> scores = matmul_nt(Q, K) * (1.0 / std::sqrt(5.0));
  const Array<D> trap = softmax(scores * Tensor<D>(keep01), -1).value();
  double leak = 0.0;
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j : {1, 3, 5}) leak = std::max(leak, std::abs(trap(i, j)));
  CHECK(leak > 1e-3);
}

TEST_CASE("np-05 check 4: changing the keys and values after position t does not move the output at t", "[attention]") {
  NoGradGuard no_grad;
  const std::size_t T = 7, t = 3;
  const Tensor<D> Q = randn({2, 2, T, 4}, 40, false);
  const Tensor<D> K = randn({2, 2, T, 4}, 41, false), V = randn({2, 2, T, 3}, 42, false);
  Array<D> K2 = K.value(), V2 = V.value();
  xt::view(K2, xt::all(), xt::all(), xt::range(t + 1, T), xt::all()) =
      randn({2, 2, T - t - 1, 4}, 43, false).value();
  xt::view(V2, xt::all(), xt::all(), xt::range(t + 1, T), xt::all()) =
      randn({2, 2, T - t - 1, 3}, 44, false).value();
  const Mask causal = causal_mask(T);
  const Array<D> a = scaled_dot_product_attention(Q, K, V, causal).out.value();
  const Array<D> b = scaled_dot_product_attention(Q, Tensor<D>(K2), Tensor<D>(V2), causal).out.value();
  auto rows = [](const Array<D>& o, std::size_t from, std::size_t to) {
    return Array<D>(xt::view(o, xt::all(), xt::all(), xt::range(from, to), xt::all()));
  };
  CHECK(max_abs_diff(rows(a, 0, t + 1), rows(b, 0, t + 1)) <= 1e-12);
  CHECK(max_abs_diff(rows(a, t + 1, T), rows(b, t + 1, T)) > 1e-3);  // the change is real

  // The check can fail: the "mask after softmax" trap lets a future key shift the
  // denominator, so out[t] moves.
  Array<D> keep01 = Array<D>::from_shape({T, T});
  std::copy(causal.begin(), causal.end(), keep01.begin());
  auto trap = [&](const Tensor<D>& k, const Tensor<D>& v) {
    const Tensor<D> w = softmax(matmul_nt(Q, k) * 0.5, -1) * Tensor<D>(keep01);
    return matmul(w, v).value();
  };
  CHECK(max_abs_diff(rows(trap(K, V), 0, t + 1), rows(trap(Tensor<D>(K2), Tensor<D>(V2)), 0, t + 1)) > 1e-6);
}

TEST_CASE("np-05 check 5: every row of the weights sums to 1", "[attention]") {
  NoGradGuard no_grad;
  const Tensor<D> Q = randn({2, 3, 6, 8}, 50, false), K = randn({2, 3, 6, 8}, 51, false);
  const Tensor<D> V = randn({2, 3, 6, 4}, 52, false);
  CHECK(max_row_sum_error(scaled_dot_product_attention(Q, K, V).weights.value()) <= 1e-12);
  CHECK(max_row_sum_error(scaled_dot_product_attention(Q, K, V, causal_mask(6)).weights.value()) <= 1e-12);
  CHECK(max_row_sum_error(scaled_dot_product_attention(Q, K, V, random_mask({2, 3, 6, 6}, 53)).weights.value()) <= 1e-12);
  CHECK(max_row_sum_error(scaled_dot_product_attention(Q, K, V, std::nullopt, 1.0).weights.value()) <= 1e-12);
}

TEST_CASE("np-05 check 6: causal_mask is bool and true exactly when j <= i", "[attention]") {
  static_assert(std::is_same<Mask::value_type, bool>::value, "causal_mask must be boolean");
  const Mask one = causal_mask(1);
  CHECK(one.shape().size() == 2);
  CHECK(one.shape()[0] == 1);
  CHECK(one.shape()[1] == 1);
  CHECK(one(0, 0) == true);
  const Mask four = causal_mask(4);
  const Mask expected = mask_from({4, 4}, {1, 0, 0, 0,  //
                                           1, 1, 0, 0,  //
                                           1, 1, 1, 0,  //
                                           1, 1, 1, 1});
  CHECK((four == expected));
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(four(i, j) == (j <= i));
}

TEST_CASE("np-05 check 7: multi-head equals a loop over heads on column slices of the projections", "[attention]") {
  CHECK(check7_distance(mha_library, false) <= 1e-12);
  CHECK(check7_distance(mha_library, true) <= 1e-12);
  // the check can fail: the forgotten transpose is far from the loop
  CHECK(check7_distance(mha_forgot_transpose, false) > 1e-3);
}

TEST_CASE("np-05 check 8: zeroing head 2's input slice leaves head 1's output unchanged", "[attention]") {
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    const auto [head1, head2] = check8_movement(mha_library, causal);
    CHECK(head1 <= 1e-12);
    CHECK(head2 > 1e-3);  // head 2 does see the change: the check is not vacuous
  }
  // the check can fail: with the forgotten transpose, head 1's slice moves
  const auto [buggy_head1, buggy_head2] = check8_movement(mha_forgot_transpose, false);
  CHECK(buggy_head1 > 1e-6);
  CHECK(buggy_head2 > 1e-3);
}

// ---------------------------------------------------------------- causal invariants

TEST_CASE("seed 000: causal MHA rows sum to 1 and the strict upper triangle is exactly 0", "[attention]") {
  NoGradGuard no_grad;
  const Tensor<D> x = randn({2, 6, 16}, 90, false);
  const Tensor<D> Wq = randn({16, 16}, 91, false, 0.1), Wk = randn({16, 16}, 92, false, 0.1);
  const Tensor<D> Wv = randn({16, 16}, 93, false, 0.1), Wo = randn({16, 16}, 94, false, 0.1);
  MultiHeadOptions causal;
  causal.causal = true;
  const auto r = multi_head_attention_with_weights(x, Wq, Wk, Wv, Wo, 4, causal);
  const Array<D>& w = r.weights.value();
  CHECK(max_row_sum_error(w) <= 1e-12);
  bool upper_zero = true;
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t h = 0; h < 4; ++h)
      for (std::size_t i = 0; i < 6; ++i)
        for (std::size_t j = i + 1; j < 6; ++j) upper_zero = upper_zero && w(b, h, i, j) == 0.0;
  CHECK(upper_zero);
  // the plain entry point computes the same y
  CHECK(max_abs_diff(r.out.value(), multi_head_attention(x, Wq, Wk, Wv, Wo, 4, true).value()) == 0.0);
}

TEST_CASE("seed 000: a causal prefix is unaffected by what follows it", "[attention]") {
  NoGradGuard no_grad;
  const Tensor<D> x = randn({2, 6, 16}, 95, false);
  const Tensor<D> Wq = randn({16, 16}, 96, false, 0.1), Wk = randn({16, 16}, 97, false, 0.1);
  const Tensor<D> Wv = randn({16, 16}, 98, false, 0.1), Wo = randn({16, 16}, 99, false, 0.1);
  const Array<D> y = multi_head_attention(x, Wq, Wk, Wv, Wo, 4, true).value();
  const Array<D> x4 = xt::view(x.value(), xt::all(), xt::range(0, 4), xt::all());
  const Array<D> y_short = multi_head_attention(Tensor<D>(x4), Wq, Wk, Wv, Wo, 4, true).value();
  CHECK(max_abs_diff(Array<D>(xt::view(y, xt::all(), xt::range(0, 4), xt::all())), y_short) <= 1e-12);
  // without the mask the prefix does see the future: the check can fail
  const Array<D> y_open = multi_head_attention(x, Wq, Wk, Wv, Wo, 4, false).value();
  const Array<D> y_open_short = multi_head_attention(Tensor<D>(x4), Wq, Wk, Wv, Wo, 4, false).value();
  CHECK(max_abs_diff(Array<D>(xt::view(y_open, xt::all(), xt::range(0, 4), xt::all())), y_open_short) > 1e-6);
}

// ---------------------------------------------------------------- fully masked rows

TEST_CASE("a fully masked row gives zero output zero weights and zero gradients and never NaN", "[attention]") {
  const Tensor<D> Q = randn({3, 4}, 100), K = randn({5, 4}, 101), V = randn({5, 2}, 102);
  const Mask mask = mask_from({3, 5}, {1, 0, 1, 1, 0,  //
                                       0, 0, 0, 0, 0,  // query 1 may attend to nothing
                                       0, 1, 0, 0, 1});
  const Array<D> gout = randn({3, 2}, 103, false).value(), gw = randn({3, 5}, 104, false).value();
  const auto r = scaled_dot_product_attention(Q, K, V, mask);
  CHECK(all_finite(r.out.value()));
  CHECK(all_finite(r.weights.value()));
  CHECK(all_zero(Array<D>(xt::view(r.out.value(), 1, xt::all()))));
  CHECK(all_zero(Array<D>(xt::view(r.weights.value(), 1, xt::all()))));
  (dot_loss(r.out, gout) + dot_loss(r.weights, gw)).backward();
  CHECK(all_finite(Q.grad()));
  CHECK(all_finite(K.grad()));
  CHECK(all_finite(V.grad()));
  CHECK(all_zero(Array<D>(xt::view(Q.grad(), 1, xt::all()))));

  // K and V receive nothing from query 1: their gradients equal those of attention with
  // query 1 removed altogether
  const Tensor<D> Q2(Array<D>(xt::view(Q.value(), xt::keep(0, 2), xt::all())), true);
  const Tensor<D> K2(K.value(), true), V2(V.value(), true);
  const Mask mask2 = mask_from({2, 5}, {1, 0, 1, 1, 0, 0, 1, 0, 0, 1});
  const auto r2 = scaled_dot_product_attention(Q2, K2, V2, mask2);
  (dot_loss(r2.out, Array<D>(xt::view(gout, xt::keep(0, 2), xt::all()))) +
   dot_loss(r2.weights, Array<D>(xt::view(gw, xt::keep(0, 2), xt::all()))))
      .backward();
  CHECK(max_abs_diff(K.grad(), K2.grad()) <= 1e-12);
  CHECK(max_abs_diff(V.grad(), V2.grad()) <= 1e-12);
  CHECK(max_abs_diff(Array<D>(xt::view(Q.grad(), xt::keep(0, 2), xt::all())), Q2.grad()) <= 1e-12);
}

TEST_CASE("every row fully masked in 4-D gives all-zero results and exactly zero gradients", "[attention]") {
  const Tensor<D> Q = randn({2, 2, 3, 4}, 110), K = randn({2, 2, 5, 4}, 111), V = randn({2, 2, 5, 3}, 112);
  Mask none = Mask::from_shape({3, 5});
  none.fill(false);
  const auto r = scaled_dot_product_attention(Q, K, V, none);
  CHECK(all_zero(r.out.value()));
  CHECK(all_zero(r.weights.value()));
  (dot_loss(r.out, randn({2, 2, 3, 3}, 113, false).value()) +
   dot_loss(r.weights, randn({2, 2, 3, 5}, 114, false).value()))
      .backward();
  for (const Tensor<D>* t : {&Q, &K, &V}) {
    REQUIRE(t->has_grad());
    CHECK(all_zero(t->grad()));  // exact zeros, so also no NaN
  }
}

TEST_CASE("no keys at all attends to nothing and an undefined or non-finite scale is an error", "[attention]") {
  // Tk = 0 is the limit of a fully masked row: zero output, zero gradient
  const Tensor<D> Q = randn({3, 4}, 120);
  const auto r = scaled_dot_product_attention(Q, randn({0, 4}, 121), randn({0, 2}, 122));
  CHECK(r.out.shape() == Shape{3, 2});
  CHECK(r.weights.shape() == Shape{3, 0});
  CHECK(all_zero(r.out.value()));
  sum(r.out).backward();
  CHECK(all_zero(Q.grad()));
  const std::string op = "scaled_dot_product_attention";
  require_shape_error([]() { scaled_dot_product_attention(randn({3, 0}, 1), randn({5, 0}, 2), randn({5, 2}, 3)); },
                      {op, "d_k=0", "(3,0)", "(5,0)"});
  require_shape_error([]() { scaled_dot_product_attention(randn({3, 4}, 1), randn({5, 4}, 2), randn({5, 2}, 3),
                                                          std::nullopt, std::nan("")); },
                      {op, "scale", "nan"});
}

// ---------------------------------------------------------------- errors

TEST_CASE("scaled_dot_product_attention rejects bad shapes naming the function and every shape", "[attention]") {
  const std::string op = "scaled_dot_product_attention";
  auto sdpa = [](Shape q, Shape k, Shape v, std::optional<Mask> mask = std::nullopt) {
    return [=]() { scaled_dot_product_attention(randn(q, 1), randn(k, 2), randn(v, 3), mask); };
  };
  // rank < 2 for each of Q, K, V
  require_shape_error(sdpa({4}, {5, 4}, {5, 3}), {op, "(4)", "(5,4)", "(5,3)"});
  require_shape_error(sdpa({3, 4}, {4}, {5, 3}), {op, "(3,4)", "(4)", "(5,3)"});
  require_shape_error(sdpa({3, 4}, {5, 4}, {3}), {op, "(3,4)", "(5,4)", "(3)"});
  // d_k of Q and K differ
  require_shape_error(sdpa({3, 4}, {5, 3}, {5, 2}), {op, "d_k", "(3,4)", "(5,3)", "(5,2)"});
  // K has 5 keys, V has 6 values
  require_shape_error(sdpa({3, 4}, {5, 4}, {6, 2}), {op, "Tk", "(3,4)", "(5,4)", "(6,2)"});
  // leading dimensions that do not broadcast: Q vs K, and V vs both
  require_shape_error(sdpa({2, 3, 4}, {3, 5, 4}, {3, 5, 2}), {op, "(2,3,4)", "(3,5,4)", "(3,5,2)"});
  require_shape_error(sdpa({2, 3, 4}, {2, 5, 4}, {3, 5, 2}), {op, "(2,3,4)", "(2,5,4)", "(3,5,2)"});
  // masks that do not broadcast to the scores (3,5): wrong Tk, and one that would grow them
  Mask wrong = Mask::from_shape({3, 4});
  wrong.fill(true);
  require_shape_error(sdpa({3, 4}, {5, 4}, {5, 2}, wrong), {op, "mask", "(3,4)", "(3,5)", "(5,4)"});
  Mask bigger = Mask::from_shape({2, 3, 5});
  bigger.fill(true);
  require_shape_error(sdpa({3, 4}, {5, 4}, {5, 2}, bigger), {op, "mask", "(2,3,5)", "(3,5)"});
  Mask causal4 = causal_mask(4);  // (4,4) against scores (2,3,4,5)
  require_shape_error(sdpa({2, 3, 4, 8}, {2, 3, 5, 8}, {2, 3, 5, 8}, causal4),
                      {op, "mask", "(4,4)", "(2,3,4,5)"});
}

TEST_CASE("multi_head_attention rejects bad shapes and heads naming the function and the shapes", "[attention]") {
  const std::string op = "multi_head_attention";
  const Tensor<D> W6 = randn({6, 6}, 1);
  auto mha = [&](Shape xs, std::size_t heads, Shape wq = {6, 6}, Shape wo = {6, 6}) {
    return [=]() { multi_head_attention(randn(xs, 2), randn(wq, 3), W6, W6, randn(wo, 4), heads); };
  };
  require_shape_error(mha({3, 6}, 2), {op, "x", "(3,6)"});
  require_shape_error(mha({1, 2, 3, 6}, 2), {op, "x", "(1,2,3,6)"});
  require_shape_error(mha({1, 3, 6}, 2, {6, 5}), {op, "Wq", "(6,5)", "(1,3,6)"});
  require_shape_error(mha({1, 3, 6}, 2, {6, 6}, {5, 6}), {op, "Wo", "(5,6)", "(1,3,6)"});
  require_shape_error([&]() { multi_head_attention(randn({1, 3, 6}, 2), W6, randn({6}, 5), W6, W6, 2); },
                      {op, "Wk", "(6)", "(1,3,6)"});
  require_shape_error([&]() { multi_head_attention(randn({1, 3, 6}, 2), W6, W6, randn({4, 4}, 5), W6, 2); },
                      {op, "Wv", "(4,4)", "(1,3,6)"});
  require_shape_error(mha({1, 3, 6}, 0), {op, "heads", "0", "(1,3,6)"});
  try {
    multi_head_attention(randn({1, 3, 6}, 2), W6, W6, W6, W6, 4);
    FAIL("no ShapeError for heads not dividing D");
  } catch (const ShapeError& e) {
    // the one spec check, on the projections q, k, v = x @ W (each (B, T, D) like x)
    CHECK(std::string(e.what()) ==
          "multi_head_attention: D=6 is not divisible by heads=4 (q is (1,3,6), k is (1,3,6), v is (1,3,6))");
  }
  // the variant with weights names itself
  require_shape_error([&]() { multi_head_attention_with_weights(randn({1, 3, 6}, 2), W6, W6, W6, W6, 4); },
                      {"multi_head_attention_with_weights", "D=6", "heads=4", "(1,3,6)"});
  Tape<D>::active().clear();
}

// ---------------------------------------------------------------- gradcheck (double)

namespace {

struct ErrorTally {
  const char* what;
  double max_abs = 0.0, max_rel = 0.0;
  int cases = 0;
  void add(const GradcheckResult& r) {
    ++cases;
    for (const InputCheck& c : r.inputs) {
      max_abs = std::max(max_abs, c.max_abs_error);
      max_rel = std::max(max_rel, c.max_rel_error);
    }
  }
  ~ErrorTally() {
    std::printf("gradcheck %s: %d cases, max abs error %.3e, max rel error %.3e\n", what, cases,
                max_abs, max_rel);
  }
};

GradcheckResult gradcheck_sdpa(const Shape& q, const Shape& k, const Shape& v,
                               std::optional<Mask> mask, bool loss_on_weights,
                               std::optional<double> scale = std::nullopt) {
  const std::vector<Tensor<D>> inputs = {randn(q, 200), randn(k, 201), randn(v, 202)};
  TensorFunction<D> f = [=](const std::vector<Tensor<D>>& in) {
    const auto r = scaled_dot_product_attention(in[0], in[1], in[2], mask, scale);
    return loss_on_weights ? r.weights : r.out;
  };
  return gradcheck<D>(f, inputs);
}

}  // namespace

TEST_CASE("gradcheck of scaled_dot_product_attention through out and through weights", "[attention][gradcheck]") {
  ErrorTally tally{"scaled_dot_product_attention"};
  struct Case {
    const char* name;
    Shape q, k, v;
    std::optional<Mask> mask;
    std::optional<double> scale;
  };
  Mask with_empty_row = random_mask({2, 3, 4, 5}, 210);
  for (std::size_t k = 0; k < 5; ++k) with_empty_row(1, 2, 1, k) = false;
  const std::vector<Case> cases = {
      {"2-D no mask", {3, 4}, {3, 4}, {3, 4}, std::nullopt, std::nullopt},
      {"2-D Tq != Tk and d_v != d_k", {3, 4}, {5, 4}, {5, 2}, std::nullopt, std::nullopt},
      {"2-D random mask", {4, 3}, {6, 3}, {6, 5}, random_mask({4, 6}, 211), std::nullopt},
      {"2-D causal unscaled", {5, 4}, {5, 4}, {5, 3}, causal_mask(5), 1.0},
      {"4-D no mask", {2, 3, 4, 5}, {2, 3, 6, 5}, {2, 3, 6, 2}, std::nullopt, std::nullopt},
      {"4-D causal", {2, 2, 5, 3}, {2, 2, 5, 3}, {2, 2, 5, 4}, causal_mask(5), std::nullopt},
      {"4-D random mask with a fully masked row", {2, 3, 4, 3}, {2, 3, 5, 3}, {2, 3, 5, 2},
       with_empty_row, std::nullopt},
      {"4-D K and V (1,H,Tk,d) broadcast against Q (B,H,Tq,d)", {2, 3, 4, 3}, {1, 3, 5, 3},
       {1, 3, 5, 2}, random_mask({4, 5}, 212), std::nullopt},
      {"3-D Q (1,Tq,d) against K and V (B,Tk,d)", {1, 4, 3}, {2, 5, 3}, {2, 5, 4}, std::nullopt, 0.7},
  };
  for (const Case& c : cases) {
    for (bool on_weights : {false, true}) {
      INFO(c.name << (on_weights ? " (loss on weights)" : " (loss on out)"));
      const GradcheckResult r = gradcheck_sdpa(c.q, c.k, c.v, c.mask, on_weights, c.scale);
      INFO(r.to_string());
      CHECK(r.passed);
      tally.add(r);
    }
  }
  CHECK(Tape<D>::active().size() == 0);
}

TEST_CASE("gradcheck of multi_head_attention with respect to x and all four weights", "[attention][gradcheck]") {
  ErrorTally tally{"multi_head_attention"};
  for (bool causal : {false, true}) {
    for (std::size_t heads : {std::size_t(1), std::size_t(2), std::size_t(3)}) {
      const std::vector<Tensor<D>> inputs = {randn({2, 4, 6}, 300), randn({6, 6}, 301, true, 0.5),
                                             randn({6, 6}, 302, true, 0.5), randn({6, 6}, 303, true, 0.5),
                                             randn({6, 6}, 304, true, 0.5)};
      TensorFunction<D> f = [=](const std::vector<Tensor<D>>& in) {
        return multi_head_attention(in[0], in[1], in[2], in[3], in[4], heads, causal);
      };
      INFO("causal " << causal << " heads " << heads);
      const GradcheckResult r = gradcheck<D>(f, inputs);
      INFO(r.to_string());
      CHECK(r.passed);
      REQUIRE(r.inputs.size() == 5);
      for (const InputCheck& c : r.inputs) CHECK(c.checked == numel(c.shape));  // every element
      tally.add(r);
    }
  }
  // the variant with weights: through the weights, and unscaled (the saturation study's case)
  for (bool on_weights : {false, true}) {
    const std::vector<Tensor<D>> inputs = {randn({2, 5, 4}, 310), randn({4, 4}, 311, true, 0.5),
                                           randn({4, 4}, 312, true, 0.5), randn({4, 4}, 313, true, 0.5),
                                           randn({4, 4}, 314, true, 0.5)};
    TensorFunction<D> f = [=](const std::vector<Tensor<D>>& in) {
      MultiHeadOptions options;
      options.causal = true;
      options.scale = 1.0;
      const auto r = multi_head_attention_with_weights(in[0], in[1], in[2], in[3], in[4], 2, options);
      return on_weights ? r.weights : r.out;
    };
    INFO("with weights, unscaled, loss on " << (on_weights ? "weights" : "y"));
    const GradcheckResult r = gradcheck<D>(f, inputs);
    INFO(r.to_string());
    CHECK(r.passed);
    tally.add(r);
  }
}

// ---------------------------------------------------------------- PyTorch fixtures

namespace {

const std::string kFixtures = std::string(TAPEGRAD_FIXTURES_DIR) + "/attention/";

Array<D> load(const std::string& c, const std::string& name) {
  const std::string path = kFixtures + c + "/" + name + ".npy";
  INFO("fixture " << path);
  REQUIRE(std::filesystem::exists(path));
  return Array<D>(xt::load_npy<D>(path));
}

std::optional<D> load_scale(const std::string& c) {
  if (!std::filesystem::exists(kFixtures + c + "/scale.npy")) return std::nullopt;
  return load(c, "scale")(0);
}

// max |a - b| / max(1, |b|), b the reference
double rel_error(const Array<D>& a, const Array<D>& b) {
  REQUIRE(shape_of(a) == shape_of(b));
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::abs(a.data()[i] - b.data()[i]) / std::max(1.0, std::abs(b.data()[i]));
    m = std::max(m, std::isnan(e) ? std::numeric_limits<double>::infinity() : e);
  }
  return m;
}

double worst_fixture_error = 0.0;  // printed by the MHA fixture test, for the record

void require_agrees(const char* what, const Array<D>& ours, const Array<D>& torch_value) {
  const double e = rel_error(ours, torch_value);
  worst_fixture_error = std::max(worst_fixture_error, e);
  INFO(what << ": relative error " << e);
  CHECK(e <= 1e-10);
}

}  // namespace

TEST_CASE("scaled_dot_product_attention agrees with PyTorch float64 fixtures forward and backward", "[attention][fixtures]") {
  for (const std::string c : {"sdpa_2d", "sdpa_4d_causal", "sdpa_mask_fully_masked", "sdpa_broadcast"}) {
    INFO("case " << c);
    const Tensor<D> Q(load(c, "Q"), true), K(load(c, "K"), true), V(load(c, "V"), true);
    std::optional<Mask> mask;
    if (std::filesystem::exists(kFixtures + c + "/mask.npy")) {
      const Array<D> m = load(c, "mask");
      mask = Mask::from_shape(m.shape());
      std::transform(m.begin(), m.end(), mask->begin(), [](D v) { return v != 0.0; });
    }
    const auto r = scaled_dot_product_attention(Q, K, V, mask, load_scale(c));
    require_agrees("out", r.out.value(), load(c, "out"));
    require_agrees("weights", r.weights.value(), load(c, "weights"));
    (dot_loss(r.out, load(c, "gout")) + dot_loss(r.weights, load(c, "gweights"))).backward();
    require_agrees("dQ", Q.grad(), load(c, "dQ"));
    require_agrees("dK", K.grad(), load(c, "dK"));
    require_agrees("dV", V.grad(), load(c, "dV"));
  }
}

TEST_CASE("multi_head_attention agrees with PyTorch float64 fixtures forward and backward", "[attention][fixtures]") {
  const std::vector<std::pair<std::string, std::size_t>> cases = {
      {"mha_causal", 2}, {"mha_noncausal", 2}, {"mha_causal_unscaled", 4}};
  const char* names[] = {"x", "Wq", "Wk", "Wv", "Wo"};
  for (const auto& [c, heads] : cases) {
    INFO("case " << c);
    MultiHeadOptions options;
    options.causal = c.find("noncausal") == std::string::npos;
    options.scale = load_scale(c);
    auto leaves = [&]() {
      std::vector<Tensor<D>> in;
      for (const char* n : names) in.emplace_back(load(c, n), true);
      return in;
    };
    // L = sum(y * gy), through the plain entry point when the scale is the default
    std::vector<Tensor<D>> in = leaves();
    const Tensor<D> y = options.scale
                            ? multi_head_attention_with_weights(in[0], in[1], in[2], in[3], in[4], heads, options).out
                            : multi_head_attention(in[0], in[1], in[2], in[3], in[4], heads, options.causal);
    require_agrees("y", y.value(), load(c, "y"));
    dot_loss(y, load(c, "gy")).backward();
    for (std::size_t i = 0; i < 5; ++i) require_agrees(names[i], in[i].grad(), load(c, std::string("d") + names[i]));
    // L = sum(y * gy) + sum(weights * gweights)
    std::vector<Tensor<D>> in2 = leaves();
    const auto r = multi_head_attention_with_weights(in2[0], in2[1], in2[2], in2[3], in2[4], heads, options);
    require_agrees("weights", r.weights.value(), load(c, "weights"));
    (dot_loss(r.out, load(c, "gy")) + dot_loss(r.weights, load(c, "gweights"))).backward();
    for (std::size_t i = 0; i < 5; ++i)
      require_agrees(names[i], in2[i].grad(), load(c, std::string("d") + names[i] + "_yw"));
  }
  std::printf("PyTorch fixtures: max relative error so far %.3e\n", worst_fixture_error);
}

// ---------------------------------------------------------------- float and the tape

TEST_CASE("multi_head_attention in float agrees with double and frees every intermediate", "[attention]") {
  Tape<D>::active().clear();  // leftovers of earlier tests would be freed mid-count
  const long before_d = live_tensors<D>();
  {
    const Tensor<D> x = randn({2, 5, 8}, 400), Wq = randn({8, 8}, 401, true, 0.4);
    const Tensor<D> Wk = randn({8, 8}, 402, true, 0.4), Wv = randn({8, 8}, 403, true, 0.4);
    const Tensor<D> Wo = randn({8, 8}, 404, true, 0.4);
    auto to_float = [](const Tensor<D>& t) {
      return Tensor<float>(Array<float>(xt::cast<float>(t.value())), true);
    };
    const Tensor<float> xf = to_float(x), Wqf = to_float(Wq), Wkf = to_float(Wk),
                        Wvf = to_float(Wv), Wof = to_float(Wo);
    const Array<D> yd = multi_head_attention(x, Wq, Wk, Wv, Wo, 2, true).value();
    const Array<float> yf = multi_head_attention(xf, Wqf, Wkf, Wvf, Wof, 2, true).value();
    CHECK(max_abs_diff(yd, Array<D>(xt::cast<D>(yf))) <= 1e-5);
    Tape<float>::active().clear();
    Tape<D>::active().clear();
    {
      const Tensor<D> loss = sum(multi_head_attention(x, Wq, Wk, Wv, Wo, 2, true));
      loss.backward();
    }
    CHECK(Tape<D>::active().size() == 0);
    CHECK(live_tensors<D>() == before_d + 5);  // only the five leaves are left
  }
  CHECK(live_tensors<D>() == before_d);
}
