#pragma once
// Long-context (flash) attention: its inputs and the check of a framework's output and
// gradients against naive rows.
// Part of bench/harness.hpp (which says what the harness is for).
#include "naive_references.hpp"

namespace bench {

// q, k, v and the upstream gradient dO, each (B, T, H * dh) ~ N(0, 1): with the 1/sqrt(dh)
// scale the scores are of unit variance, so the softmax is neither flat nor saturated.
struct FlashInputs {
  std::vector<double> q, k, v, dO;
};
inline FlashInputs make_flash_inputs(const FlashShape& s) {
  Rng r(43);
  FlashInputs in;
  in.q = r.normals(s.size(), 1.0);
  in.k = r.normals(s.size(), 1.0);
  in.v = r.normals(s.size(), 1.0);
  in.dO = r.normals(s.size(), 1.0);
  return in;
}

// One query row of causal attention in double: the weights P over keys 0..i, the output o,
// and the row's score gradient dS = P * (dO v^T - rowsum(dO * o)) (the standard backward).
struct FlashRow {
  std::vector<double> P, o, dS;
};
inline FlashRow naive_flash_row(const FlashShape& s, const FlashInputs& in, std::size_t b,
                                std::size_t h, std::size_t i) {
  const std::size_t W = s.width(), dh = s.dh;
  auto at = [&](const std::vector<double>& x, std::size_t t) { return &x[(b * s.T + t) * W + h * dh]; };
  const double scale = 1.0 / std::sqrt(double(dh));
  FlashRow r;
  r.P.resize(i + 1);
  double m = -INFINITY, z = 0;
  for (std::size_t j = 0; j <= i; ++j) {
    double d = 0;
    for (std::size_t c = 0; c < dh; ++c) d += at(in.q, i)[c] * at(in.k, j)[c];
    m = std::max(m, r.P[j] = scale * d);
  }
  for (double& p : r.P) z += (p = std::exp(p - m));
  for (double& p : r.P) p /= z;
  r.o.assign(dh, 0.0);
  for (std::size_t j = 0; j <= i; ++j)
    for (std::size_t c = 0; c < dh; ++c) r.o[c] += r.P[j] * at(in.v, j)[c];
  double D = 0;
  for (std::size_t c = 0; c < dh; ++c) D += at(in.dO, i)[c] * r.o[c];
  r.dS.resize(i + 1);
  for (std::size_t j = 0; j <= i; ++j) {
    double dp = 0;
    for (std::size_t c = 0; c < dh; ++c) dp += at(in.dO, i)[c] * at(in.v, j)[c];
    r.dS[j] = r.P[j] * (dp - D);
  }
  return r;
}

// Checks a framework's causal fwd+bwd (out, dq, dk, dv, each (B, T, H * dh)) against the
// naive rows in double, in the last batch item and every head: the output and dq of query
// rows 0, T/3 and T-1, and dk, dv of key rows T-1, T-64 and T-129 (block edges of any
// power-of-two blocking), which sum over every later query row.
template <class R>
void check_flash(const FlashShape& s, const FlashInputs& in, const std::vector<R>& out,
                 const std::vector<R>& dq, const std::vector<R>& dk, const std::vector<R>& dv,
                 Result& r) {
  const std::size_t W = s.width(), dh = s.dh, b = s.B - 1, T = s.T;
  const double scale = 1.0 / std::sqrt(double(dh));
  require(out.size() == s.size() && dq.size() == s.size() && dk.size() == s.size() && dv.size() == s.size(),
          "flash: output or gradient of the wrong size");
  auto idx = [&](std::size_t t, std::size_t h) { return (b * T + t) * W + h * dh; };
  std::vector<double> want_o, want_dq, want_dk, want_dv;
  std::vector<R> got_o, got_dq, got_dk, got_dv;
  const std::vector<std::size_t> keys = {T - 1, T >= 64 ? T - 64 : 0, T >= 129 ? T - 129 : 0};
  const std::size_t first = *std::min_element(keys.begin(), keys.end());
  for (std::size_t h = 0; h < s.H; ++h) {
    for (std::size_t i : {std::size_t(0), T / 3, T - 1}) {
      const FlashRow row = naive_flash_row(s, in, b, h, i);
      for (std::size_t c = 0; c < dh; ++c) {
        double g = 0;
        for (std::size_t j = 0; j <= i; ++j) g += scale * row.dS[j] * in.k[idx(j, h) + c];
        want_o.push_back(row.o[c]), want_dq.push_back(g);
        got_o.push_back(out[idx(i, h) + c]), got_dq.push_back(dq[idx(i, h) + c]);
      }
    }
    std::vector<double> dkh(keys.size() * dh, 0.0), dvh(keys.size() * dh, 0.0);
    for (std::size_t i = first; i < T; ++i) {
      const FlashRow row = naive_flash_row(s, in, b, h, i);
      for (std::size_t n = 0; n < keys.size(); ++n) {
        const std::size_t j = keys[n];
        if (j > i) continue;
        for (std::size_t c = 0; c < dh; ++c) {
          dkh[n * dh + c] += scale * row.dS[j] * in.q[idx(i, h) + c];
          dvh[n * dh + c] += row.P[j] * in.dO[idx(i, h) + c];
        }
      }
    }
    for (std::size_t n = 0; n < keys.size(); ++n)
      for (std::size_t c = 0; c < dh; ++c) {
        want_dk.push_back(dkh[n * dh + c]), want_dv.push_back(dvh[n * dh + c]);
        got_dk.push_back(dk[idx(keys[n], h) + c]), got_dv.push_back(dv[idx(keys[n], h) + c]);
      }
  }
  const double fwd_err = max_rel_error(got_o, want_o);
  const double bwd_err = std::max({max_rel_error(got_dq, want_dq), max_rel_error(got_dk, want_dk),
                                   max_rel_error(got_dv, want_dv)});
  r.add("check_fwd_rel_err", fwd_err);
  r.add("check_bwd_rel_err", bwd_err);
  require(fwd_err < 1e-4, "flash output differs from the naive rows by " + std::to_string(fwd_err));
  require(bwd_err < 1e-3, "flash gradients differ from the naive rows by " + std::to_string(bwd_err));
}

}  // namespace bench
