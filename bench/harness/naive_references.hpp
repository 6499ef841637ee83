#pragma once
// Naive double-precision references, against which each framework's answer is checked
// once at start-up: attention rows and the 1,000-op chain.
// Part of bench/harness.hpp (which says what the harness is for).
#include "inputs.hpp"

namespace bench {

// Causal multi-head attention (the textbook composition) for output rows `rows` of batch item b, by plain
// loops in double: y[b, t, :] for each t in rows, row after row. With s.KV < s.H, query
// head h reads K/V head h / (H / KV) (grouped-query attention, repeat_interleave order).
inline std::vector<double> naive_mha_rows(const MhaInputs& in, const MhaShape& s, std::size_t b,
                                          const std::vector<std::size_t>& rows) {
  const std::size_t T = s.T, D = s.D, H = s.H, dh = D / H, W = s.kv_width(), group = H / s.kv();
  std::size_t tmax = 0;
  for (auto t : rows) tmax = std::max(tmax, t);
  auto project = [&](const std::vector<double>& Wm, std::size_t cols, std::size_t t, double* out) {
    const double* xr = &in.x[(b * T + t) * D];
    for (std::size_t j = 0; j < cols; ++j) out[j] = 0;
    for (std::size_t i = 0; i < D; ++i)
      for (std::size_t j = 0; j < cols; ++j) out[j] += xr[i] * Wm[i * cols + j];
  };
  std::vector<double> K((tmax + 1) * W), V((tmax + 1) * W);
  for (std::size_t t = 0; t <= tmax; ++t) {
    project(in.Wk, W, t, &K[t * W]);
    project(in.Wv, W, t, &V[t * W]);
  }
  std::vector<double> out;
  std::vector<double> q(D), o(D), w(tmax + 1);
  for (auto t : rows) {
    project(in.Wq, D, t, q.data());
    for (std::size_t h = 0; h < H; ++h) {
      const std::size_t kv = (h / group) * dh;  // this head's columns of K and V
      double m = -INFINITY;
      for (std::size_t j = 0; j <= t; ++j) {  // causal: keys 0..t only
        double sc = 0;
        for (std::size_t d = 0; d < dh; ++d) sc += q[h * dh + d] * K[j * W + kv + d];
        w[j] = sc / std::sqrt(double(dh));
        m = std::max(m, w[j]);
      }
      double z = 0;
      for (std::size_t j = 0; j <= t; ++j) z += (w[j] = std::exp(w[j] - m));
      for (std::size_t d = 0; d < dh; ++d) {
        double acc = 0;
        for (std::size_t j = 0; j <= t; ++j) acc += w[j] / z * V[j * W + kv + d];
        o[h * dh + d] = acc;
      }
    }
    for (std::size_t j = 0; j < D; ++j) {
      double acc = 0;
      for (std::size_t i = 0; i < D; ++i) acc += o[i] * in.Wo[i * D + j];
      out.push_back(acc);
    }
  }
  return out;
}

// The rows whose forward value is checked at every shape: the first, one in the middle,
// the last (the longest causal sum), all in the last batch item.
inline std::vector<std::size_t> check_rows(const MhaShape& s) {
  return {0, s.T / 3, s.T - 1};
}

template <class R>
double max_rel_error(const std::vector<R>& got, const std::vector<double>& want) {
  double scale = 0, err = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < want.size(); ++i) err = std::max(err, std::abs(double(got[i]) - want[i]));
  return err / std::max(scale, 1e-300);
}

// Checks a framework's MHA: `forward(inputs) -> y (B,T,D)` against the naive loop on
// sampled rows, and, when `backward(inputs) -> {dx, dWq, dWk, dWv, dWo}` (for the loss
// <y, G>) is given, the gradients against a central difference of <y, G> along one random
// direction through all five inputs at once (any wrong gradient moves the sum).
// R is the workload's element type; the tolerances are set for it. Adds the errors to r.
template <class R>
void check_mha(const MhaShape& s, const MhaInputs& in,
               const std::function<std::vector<R>(const MhaInputs&)>& forward,
               const std::function<std::vector<std::vector<R>>(const MhaInputs&)>& backward,
               Result& r) {
  const bool dbl = sizeof(R) == 8;
  const std::vector<std::size_t> rows = check_rows(s);
  const std::vector<R> y = forward(in);
  require(y.size() == s.B * s.T * s.D, "MHA output has the wrong size");
  std::vector<R> got;
  for (auto t : rows)
    for (std::size_t j = 0; j < s.D; ++j) got.push_back(y[((s.B - 1) * s.T + t) * s.D + j]);
  const double fwd_err = max_rel_error(got, naive_mha_rows(in, s, s.B - 1, rows));
  r.add("check_fwd_rel_err", fwd_err);
  require(fwd_err < (dbl ? 1e-10 : 1e-4),
          "MHA forward differs from the naive loop by " + std::to_string(fwd_err));
  if (!backward) return;

  // d<y,G> along U = sum_i <grad_i, U_i>, versus (L(p + eps U) - L(p - eps U)) / 2 eps.
  const std::vector<std::vector<R>> g = backward(in);
  require(g.size() == 5, "MHA backward must return 5 gradients");
  Rng rng(7);
  MhaInputs u = in;
  std::vector<double>* parts[5] = {&u.x, &u.Wq, &u.Wk, &u.Wv, &u.Wo};
  const std::vector<double>* base[5] = {&in.x, &in.Wq, &in.Wk, &in.Wv, &in.Wo};
  std::vector<std::vector<double>> dir(5);
  double analytic = 0;
  for (int i = 0; i < 5; ++i) {
    require(g[i].size() == base[i]->size(), "MHA gradient " + std::to_string(i) + " has the wrong size");
    dir[i] = rng.normals(base[i]->size(), i == 0 ? 1.0 : 1.0 / std::sqrt(double(s.D)));
    for (std::size_t k = 0; k < dir[i].size(); ++k) analytic += double(g[i][k]) * dir[i][k];
  }
  const double eps = dbl ? 1e-5 : 1e-2;
  auto loss_at = [&](double sign) {
    for (int i = 0; i < 5; ++i)
      for (std::size_t k = 0; k < dir[i].size(); ++k)
        (*parts[i])[k] = (*base[i])[k] + sign * eps * dir[i][k];
    const std::vector<R> yy = forward(u);
    double L = 0;
    for (std::size_t k = 0; k < yy.size(); ++k) L += double(yy[k]) * in.G[k];
    return L;
  };
  const double numeric = (loss_at(+1) - loss_at(-1)) / (2 * eps);
  const double bwd_err = std::abs(numeric - analytic) / std::max(std::abs(numeric), 1e-12);
  r.add("check_bwd_rel_err", bwd_err);
  require(bwd_err < (dbl ? 1e-6 : 2e-2),
          "MHA gradients disagree with a central difference: analytic " + std::to_string(analytic) +
              ", numeric " + std::to_string(numeric));
}

// The 1,000-op chain: y = x; op i % 3: 0 -> y * 0.9, 1 -> y + b, 2 -> tanh(y); loss = sum(y).
// Returns {loss, dloss/dx, dloss/db} computed by plain loops in double.
struct ChainReference {
  double loss = 0;
  std::vector<double> dx, db;
};
// x ~ N(0, 1); b ~ N(0, 0.01), small so that y stays near 0 where tanh' ~ 1: dloss/dx then
// shrinks by about 0.9 per three ops (to ~1e-16 after 1,000) and never reaches float
// denormals, which would time the FPU's slow path instead of the framework.
inline std::pair<std::vector<double>, std::vector<double>> make_chain_inputs() {
  Rng r(11);
  auto x = r.normals(kChainLen, 1.0);
  auto b = r.normals(kChainLen, 0.01);
  return {x, b};
}
inline ChainReference naive_chain(const std::vector<double>& x, const std::vector<double>& b) {
  const std::size_t n = x.size();
  ChainReference ref;
  ref.dx.assign(n, 0);
  ref.db.assign(n, 0);
  for (std::size_t e = 0; e < n; ++e) {
    std::vector<double> ys(kChainOps + 1);  // y after each op, for the backward sweep
    ys[0] = x[e];
    for (std::size_t i = 0; i < kChainOps; ++i) {
      const double y = ys[i];
      ys[i + 1] = i % 3 == 0 ? y * 0.9 : i % 3 == 1 ? y + b[e] : std::tanh(y);
    }
    ref.loss += ys[kChainOps];
    double g = 1;
    for (std::size_t i = kChainOps; i-- > 0;) {
      if (i % 3 == 0) g *= 0.9;
      else if (i % 3 == 1) ref.db[e] += g;
      else g *= 1 - ys[i + 1] * ys[i + 1];
    }
    ref.dx[e] = g;
  }
  return ref;
}

}  // namespace bench
