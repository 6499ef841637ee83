#include "examples/saturation/positions.hpp"

#include <algorithm>
#include <cmath>

#include "autograd/tape.hpp"  // NoGradGuard
#include "autograd/tensor.hpp"
#include "ops/attention.hpp"
#include "ops/elementwise.hpp"
#include "ops/matmul.hpp"
#include "ops/norm.hpp"
#include "ops/rope.hpp"

namespace tapegrad::saturation {
namespace {

using Tn = Tensor<double>;

// Rows of x (T, d) in the order `order`: row r of the result is row order[r] of x.
Tn rows_in_order(const Tn& x, const std::vector<std::size_t>& order) {
  const std::size_t d = x.shape()[1];
  Tn out = Tn::zeros({order.size(), d});
  for (std::size_t r = 0; r < order.size(); ++r)
    std::copy_n(x.data() + order[r] * d, d, out.value().data() + r * d);
  return out;
}

// Rows first..first+n-1 of a table (rows, d).
Tn slots(const Tn& table, std::size_t first, std::size_t n) {
  return rows_in_order(table, [&] {
    std::vector<std::size_t> o(n);
    for (std::size_t i = 0; i < n; ++i) o[i] = first + i;
    return o;
  }());
}

double max_gap(const Tn& a, const Tn& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a.data()[i] - b.data()[i]));
  return m;
}

double norm(const Tn& v) {
  double s = 0;
  for (std::size_t i = 0; i < v.size(); ++i) s += v.data()[i] * v.data()[i];
  return std::sqrt(s);
}

double cosine(const Tn& a, const Tn& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a.data()[i] * b.data()[i];
  return s / (norm(a) * norm(b));
}

// Unmasked single-head attention of X (T, d) with the given projections.
Tn attend(const Tn& X, const Tn& Wq, const Tn& Wk, const Tn& Wv) {
  return scaled_dot_product_attention(matmul(X, Wq), matmul(X, Wk), matmul(X, Wv)).out;
}

void permutation_checks(Generator& gen, PositionResults& r) {
  const std::size_t d = 8, T = 4;
  const double s = 1 / std::sqrt(double(d));
  const Tn Wq = Tn::randn({d, d}, gen, 0, s), Wk = Tn::randn({d, d}, gen, 0, s),
           Wv = Tn::randn({d, d}, gen, 0, s);
  const Tn X = Tn::randn({T, d}, gen);
  const std::vector<std::size_t> order{3, 0, 2, 1};
  r.no_position_gap = max_gap(rows_in_order(attend(X, Wq, Wk, Wv), order),
                              attend(rows_in_order(X, order), Wq, Wk, Wv));
  const Tn P = Tn::randn({T, d}, gen, 0, 0.5);  // one vector per slot
  r.learned_gap = max_gap(rows_in_order(attend(X + P, Wq, Wk, Wv), order),
                          attend(rows_in_order(X, order) + P, Wq, Wk, Wv));
}

void shift_checks(Generator& gen, PositionResults& r) {
  const std::size_t T = 16, dh = 64, shift = 37;
  const Tn q = Tn::randn({T, dh}, gen), k = Tn::randn({T, dh}, gen);
  const RopeSpec spec;
  r.rope_shift_gap = max_gap(matmul_nt(rope(q, 0, spec), rope(k, 0, spec)),
                             matmul_nt(rope(q, shift, spec), rope(k, shift, spec)));
  const Tn table = Tn::randn({T + shift, dh}, gen, 0, 0.5);
  const Tn at0 = slots(table, 0, T), at_shift = slots(table, shift, T);
  r.learned_shift_gap = max_gap(matmul_nt(q + at0, k + at0), matmul_nt(q + at_shift, k + at_shift));
}

void residual_table(Generator& gen, PositionResults& r) {
  const std::size_t D = 256, L = 32;
  const Tn h0 = Tn::randn({1, D}, gen);
  const Tn gain = Tn::ones({D});
  Tn plain = h0, res = h0;
  r.input_norm = norm(h0);
  for (std::size_t layer = 1; layer <= L; ++layer) {
    const Tn A = Tn::randn({D, D}, gen, 0, 1 / std::sqrt(double(D)));
    plain = tanh(matmul(plain, A));
    res = res + tanh(matmul(rms_norm(res, gain, 1e-6), A));
    if (layer == 1 || layer == 2 || layer == 4 || layer == 8 || layer == 16 || layer == 32)
      r.residual.push_back({layer, cosine(plain, h0), norm(plain), cosine(res, h0), norm(res)});
  }
}

}  // namespace

PositionResults run_position_checks(std::uint64_t seed) {
  NoGradGuard no_grad;
  Generator gen(seed);
  PositionResults r;
  permutation_checks(gen, r);
  shift_checks(gen, r);
  residual_table(gen, r);
  return r;
}

}  // namespace tapegrad::saturation
