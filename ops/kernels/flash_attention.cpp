#include "ops/kernels/flash_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/kernels/attention_band.hpp"
#include "ops/kernels/gemm.hpp"
#include "ops/kernels/parallel.hpp"
#include "ops/kernels/rowwise.hpp"

namespace tapegrad::kernels {

namespace {

constexpr std::size_t BQ = kFlashQueryBlock, BK = kFlashKeyBlock;

double band_flops(const HeadLayout& L) {
  return 2.0 * double(L.B * L.H) * double(L.Tq) * double(L.Tk) * double(L.dh + L.dv);
}

std::size_t query_blocks(const HeadLayout& L) { return (L.Tq + BQ - 1) / BQ; }
std::size_t key_blocks(const HeadLayout& L) { return (L.Tk + BK - 1) / BK; }

// The key blocks [kb0, kb1) that the query rows [r0, r0 + rows) see any key of.
struct Range {
  std::size_t begin = 0, end = 0;
};
Range key_blocks_of(const HeadLayout& L, std::size_t r0, std::size_t rows) {
  const std::size_t klo = L.lo(r0), khi = L.hi(r0 + rows - 1);
  if (khi <= klo) return {};
  return {klo / BK, (khi + BK - 1) / BK};
}

// The keys of key block kb that any of the rows [r0, r0 + rows) sees: the block cut to
// the rows' band, so a causal diagonal block or a window's edge computes no column that is
// masked for every row (begin >= end: the pair is skipped).
Range pair_keys(const HeadLayout& L, std::size_t r0, std::size_t rows, std::size_t kb) {
  const std::size_t a = std::max(kb * BK, L.lo(r0));
  const std::size_t e = std::min({(kb + 1) * BK, L.Tk, L.hi(r0 + rows - 1)});
  return a < e ? Range{a, e} : Range{};
}

// Row r's visible keys inside the key block [j0, j0 + n), as offsets [a, e) into the block
// (a >= e: none).
Range visible(const HeadLayout& L, std::size_t r, std::size_t j0, std::size_t n) {
  const std::size_t a = std::max(L.lo(r), j0), e = std::min(L.hi(r), j0 + n);
  return a < e ? Range{a - j0, e - j0} : Range{};
}

// One task's pointers: head h of batch item b and its kv head.
template <class T>
struct Head {
  const T *q, *k, *v;
  std::size_t h, kv;
};
template <class T>
Head<T> head_of(const HeadLayout& L, std::size_t b, std::size_t h, const T* q, const T* k,
                const T* v) {
  const std::size_t kv = h / L.group();
  return {q + b * L.Tq * L.q_ld() + h * L.dh, k + b * L.Tk * L.k_ld() + kv * L.dh,
          v + b * L.Tk * L.v_ld() + kv * L.dv, h, kv};
}

// s (rows, n) = scale * q[r0:r0+rows] @ k[j0:j0+n]^T
template <class T>
void block_scores(const HeadLayout& L, const Head<T>& hd, std::size_t r0, std::size_t rows,
                  std::size_t j0, std::size_t n, T scale, T* s) {
  if (L.dh == 0) return std::fill(s, s + rows * n, T(0));
  gemm_strided<T>(false, true, rows, n, L.dh, scale, hd.q + r0 * L.q_ld(), L.q_ld(),
                  hd.k + j0 * L.k_ld(), L.k_ld(), T(0), s, n);
}

// The rule's scores on each row's visible keys of the block (the rest is never read). With
// `capped`, the soft-capped scores before the bias are kept there too (the backward's).
template <class T>
void modify_block(const HeadLayout& L, const Head<T>& hd, std::size_t r0, std::size_t rows,
                  std::size_t j0, std::size_t n, T* s, std::vector<T>* capped = nullptr) {
  if (capped) capped->resize(rows * n);  // only each row's visible keys are written and read
  for (std::size_t r = 0; r < rows; ++r) {
    const Range vis = visible(L, r0 + r, j0, n);
    L.cap_scores(s + r * n, j0, j0 + vis.begin, j0 + vis.end,
                 capped ? capped->data() + r * n : nullptr);
  }
  if (!L.adds_bias()) return;
  const T m = L.head_slope<T>(hd.h);
  for (std::size_t r = 0; r < rows; ++r) {
    const Range vis = visible(L, r0 + r, j0, n);
    L.add_bias(s + r * n, j0, j0 + vis.begin, j0 + vis.end, r0 + r, m);
  }
}

// Weights, ds and the rescaled output below kTinyWeight are stored as 0 (rowwise.hpp: why).
template <class T>
T unless_tiny(T x) {
  return std::abs(x) < kTinyWeight<T> ? T(0) : x;
}

// ---------------------------------------------------------------- forward

// Online softmax of one score row against its running max m and sum l: p <- exp(s - m')
// on the visible [a, e) and 0 elsewhere, with m' = max(m, max s). Returns the factor
// exp(m - m') by which the row's earlier output must shrink (0 when it had none).
template <class T>
T online_row(T* s, std::size_t n, Range vis, T& m, T& l) {
  if (vis.begin >= vis.end) {
    std::fill(s, s + n, T(0));
    return T(1);
  }
  const T mx = row_max(s + vis.begin, vis.end - vis.begin);
  const T m_new = std::max(m, mx);
  // m = -inf: exp(-inf) = 0 when m_new is finite; a row of NaN or infinite scores makes
  // alpha, l and the output NaN, as plain softmax would
  const T alpha = std::exp(m - m_new);
  std::fill(s, s + vis.begin, T(0));
  const T sum = exp_shifted_inplace(s + vis.begin, vis.end - vis.begin, m_new, kTinyWeight<T>);
  std::fill(s + vis.end, s + n, T(0));
  l = l * alpha + sum;
  m = m_new;
  return alpha;
}

// Query blocks are taken kQueryGroup at a time: each key block's K and V rows, once read,
// serve the group's four query blocks instead of one (at T 32768 a head's K and V are 8 MiB,
// read from memory once per group).
constexpr std::size_t kQueryGroup = 4;

// The query rows [g0, g0 + rows) of one head, rows <= kQueryGroup * BQ, block by block
// against each key block: acc accumulates P @ V, rescaled as the row maxima grow; y = acc / l
// and lse = m + log l at the end. Each row sees the key blocks in the same order whatever
// the grouping.
template <class T>
void forward_group(const HeadLayout& L, const Head<T>& hd, std::size_t g0, std::size_t rows,
                   T scale, T* y, T* lse) {
  thread_local std::vector<T> s, acc, m, l;
  s.resize(BQ * BK);
  acc.assign(rows * L.dv, T(0));
  m.assign(rows, -std::numeric_limits<T>::infinity());
  l.assign(rows, T(0));
  const Range kbs = key_blocks_of(L, g0, rows);
  for (std::size_t kb = kbs.begin; kb < kbs.end; ++kb)
    for (std::size_t b0 = 0; b0 < rows; b0 += BQ) {
      const std::size_t r0 = g0 + b0, n_rows = std::min(BQ, rows - b0);
      const Range keys = pair_keys(L, r0, n_rows, kb);
      const std::size_t j0 = keys.begin, n = keys.end - keys.begin;
      if (n == 0) continue;
      block_scores(L, hd, r0, n_rows, j0, n, scale, s.data());
      if (L.modifies_scores()) modify_block(L, hd, r0, n_rows, j0, n, s.data());
      for (std::size_t r = 0; r < n_rows; ++r) {
        const std::size_t i = b0 + r;
        const T alpha = online_row(s.data() + r * n, n, visible(L, r0 + r, j0, n), m[i], l[i]);
        if (alpha != T(1))
          for (T* a = acc.data() + i * L.dv; a < acc.data() + (i + 1) * L.dv; ++a)
            *a = unless_tiny(*a * alpha);
      }
      // acc[b0:] (n_rows, dv) += p (n_rows, n) @ v[j0:j0+n] (n, dv)
      if (L.dv)
        gemm_strided<T>(false, false, n_rows, L.dv, n, T(1), s.data(), n,
                        hd.v + j0 * L.v_ld(), L.v_ld(), T(1), acc.data() + b0 * L.dv, L.dv);
    }
  for (std::size_t r = 0; r < rows; ++r) {
    // a row that sees no key (the band, not the values, says so): output 0, lse -inf
    const bool none = L.lo(g0 + r) >= L.hi(g0 + r);
    const T inv = none ? T(0) : T(1) / l[r];
    for (std::size_t c = 0; c < L.dv; ++c) y[(g0 + r) * L.y_ld() + c] = acc[r * L.dv + c] * inv;
    lse[g0 + r] = none ? -std::numeric_limits<T>::infinity() : m[r] + std::log(l[r]);
  }
}

}  // namespace

// Tasks are (b, h, group of query blocks): each writes its own rows of y's head columns and
// of lse. The last groups come first: under a causal mask they see the most keys, and the
// threads take tasks in order, so the long ones are not left for the end.
template <class T>
void flash_attention_forward(const HeadLayout& L, const T* q, const T* k, const T* v, T scale,
                             T* y, T* lse) {
  const std::size_t group_rows = kQueryGroup * BQ, ng = (L.Tq + group_rows - 1) / group_rows;
  parallel_for_if_worth(L.B * L.H * ng, band_flops(L), [&](std::size_t p) {
    const std::size_t bh = p / ng, g0 = (ng - 1 - p % ng) * group_rows, b = bh / L.H, h = bh % L.H;
    forward_group(L, head_of(L, b, h, q, k, v), g0, std::min(group_rows, L.Tq - g0), scale,
                  y + b * L.Tq * L.y_ld() + h * L.dv, lse + bh * L.Tq);
  });
}

namespace {

// ---------------------------------------------------------------- backward

// What the backward of one head reads besides q, k, v: dy's head columns, lse and D rows.
template <class T>
struct HeadGrad {
  const T *dy, *lse, *D;
};

// For the block pair (query rows [r0, r0+rows), keys [j0, j0+n)) of one head:
// p = exp(scores - lse) on each row's visible keys, 0 elsewhere (all of a row that sees no
// key, whose lse is -inf); ds = p * (dy v^T - D), times the soft-cap's 1 - tanh^2.
template <class T>
void block_probs(const HeadLayout& L, const Head<T>& hd, const HeadGrad<T>& g, std::size_t r0,
                 std::size_t rows, std::size_t j0, std::size_t n, T scale, T* p, T* ds) {
  block_scores(L, hd, r0, rows, j0, n, scale, p);
  thread_local std::vector<T> capped;  // the capped scores, for the soft-cap's derivative
  if (L.modifies_scores())
    modify_block(L, hd, r0, rows, j0, n, p, L.softcap > 0 ? &capped : nullptr);
  for (std::size_t r = 0; r < rows; ++r) {
    T* pr = p + r * n;
    const T lse = g.lse[r0 + r];
    const Range vis = visible(L, r0 + r, j0, n);
    std::fill(pr, pr + vis.begin, T(0));  // an empty Range is [0, 0): all zeros
    exp_shifted_inplace(pr + vis.begin, vis.end - vis.begin, lse, kTinyWeight<T>);
    std::fill(pr + vis.end, pr + n, T(0));
  }
  // dp (rows, n) = dy[r0:] (rows, dv) @ v[j0:j0+n]^T (dv, n)
  if (L.dv)
    gemm_strided<T>(false, true, rows, n, L.dv, T(1), g.dy + r0 * L.y_ld(), L.y_ld(),
                    hd.v + j0 * L.v_ld(), L.v_ld(), T(0), ds, n);
  else
    std::fill(ds, ds + rows * n, T(0));
  // exactly 0 on the keys a row does not see (its D may be NaN: never 0 * NaN there)
  for (std::size_t r = 0; r < rows; ++r) {
    const T D = g.D[r0 + r];
    const Range vis = visible(L, r0 + r, j0, n);
    T* dsr = ds + r * n;
    std::fill(dsr, dsr + vis.begin, T(0));
    for (std::size_t j = vis.begin; j < vis.end; ++j)
      dsr[j] = unless_tiny(p[r * n + j] * (dsr[j] - D));
    std::fill(dsr + vis.end, dsr + n, T(0));
    if (L.softcap > 0)
      L.scale_grad_by_softcap(capped.data() + r * n, dsr, j0, j0 + vis.begin, j0 + vis.end);
  }
}

template <class T>
HeadGrad<T> head_grad_of(const HeadLayout& L, std::size_t b, std::size_t h, const T* dy,
                         const T* lse, const T* D) {
  const std::size_t bh = b * L.H + h;
  return {dy + b * L.Tq * L.y_ld() + h * L.dv, lse + bh * L.Tq, D + bh * L.Tq};
}

// D (B, H, Tq) = rowsum(dy * y) per head: the softmax backward's row term.
template <class T>
void row_terms(const HeadLayout& L, const T* y, const T* dy, T* D) {
  parallel_for_if_worth(L.B * L.H, 2.0 * double(L.B * L.H * L.Tq * L.dv), [&](std::size_t bh) {
    const std::size_t b = bh / L.H, h = bh % L.H;
    for (std::size_t i = 0; i < L.Tq; ++i) {
      const std::size_t off = (b * L.Tq + i) * L.y_ld() + h * L.dv;
      T s = 0;
      for (std::size_t c = 0; c < L.dv; ++c) s += dy[off + c] * y[off + c];
      D[bh * L.Tq + i] = s;
    }
  });
}

// Zeroes rows [0, rows) of a head's columns [0, width) in a matrix of leading dimension ld.
template <class T>
void zero_rows(T* x, std::size_t rows, std::size_t ld, std::size_t width) {
  for (std::size_t r = 0; r < rows; ++r) std::fill(x + r * ld, x + r * ld + width, T(0));
}

// Where one task adds its gradients: dk and dv from key row j0 (the pair's key block),
// dq from query row r0 (its query block); a null pointer is a gradient this task leaves.
template <class T>
struct PairGrads {
  T *dk, *dv, *dq;
};

// The block pair (query block at r0, key block kb) of one head: P and dS once, then
// dv += P^T dy, dk += scale dS^T q, dq += scale dS k for the gradients asked for.
template <class T>
void pair_backward(const HeadLayout& L, const Head<T>& hd, const HeadGrad<T>& g, std::size_t r0,
                   std::size_t rows, std::size_t kb, T scale, const PairGrads<T>& out) {
  const Range keys = pair_keys(L, r0, rows, kb);  // empty: outside the band
  const std::size_t a = keys.begin, m = keys.end - keys.begin, off = a - kb * BK;
  if (m == 0) return;
  thread_local std::vector<T> pb, ds;
  pb.resize(BQ * BK);
  ds.resize(BQ * BK);
  block_probs(L, hd, g, r0, rows, a, m, scale, pb.data(), ds.data());
  // dv[a:a+m] (m, dv) += p^T (m, rows) @ dy[r0:] (rows, dv)
  if (out.dv && L.dv)
    gemm_strided<T>(true, false, m, L.dv, rows, T(1), pb.data(), m, g.dy + r0 * L.y_ld(),
                    L.y_ld(), T(1), out.dv + off * L.v_ld(), L.v_ld());
  // dk[a:a+m] (m, dh) += scale * ds^T (m, rows) @ q[r0:] (rows, dh)
  if (out.dk && L.dh)
    gemm_strided<T>(true, false, m, L.dh, rows, scale, ds.data(), m, hd.q + r0 * L.q_ld(),
                    L.q_ld(), T(1), out.dk + off * L.k_ld(), L.k_ld());
  // dq[r0:] (rows, dh) += scale * ds (rows, m) @ k[a:a+m] (m, dh), each row over the keys it sees
  if (out.dq && L.dh)
    visible_keys_product<T>(L, r0, rows, a, m, L.dh, scale, ds.data(), m, hd.k + a * L.k_ld(),
                            L.k_ld(), T(1), out.dq, L.q_ld());
}

// The gradients' memory at batch item b: dk and dv of kv head kv, dq of query head h, each
// from its first row (null where not wanted).
template <class T>
struct HeadGrads {
  const HeadLayout& L;
  T *dq, *dk, *dv;
  T* dk_of(std::size_t b, std::size_t kv, std::size_t j0) const {
    return dk ? dk + (b * L.Tk + j0) * L.k_ld() + kv * L.dh : nullptr;
  }
  T* dv_of(std::size_t b, std::size_t kv, std::size_t j0) const {
    return dv ? dv + (b * L.Tk + j0) * L.v_ld() + kv * L.dv : nullptr;
  }
  T* dq_of(std::size_t b, std::size_t h, std::size_t r0) const {
    return dq ? dq + (b * L.Tq + r0) * L.q_ld() + h * L.dh : nullptr;
  }
};

// Key blocks are visited kKeyGroup at a time: the group's dk and dv rows (512 keys) stay in
// the core's cache while each query block's q, dy and dq rows are read once per group rather
// than once per key block.
constexpr std::size_t kKeyGroup = 4;

// One task per (b, kv): it owns that kv head's dk and dv and the dq of every query head of
// its group, so each block pair's P and dS are computed once and feed all three gradients.
// Sums run in the two-pass order (dk, dv: query head, then query block; dq: key block), so
// both ways give the same bits.
template <class T>
void backward_one_pass(const HeadLayout& L, const T* q, const T* k, const T* v, const T* dy,
                       const T* lse, const T* D, T scale, const HeadGrads<T>& G) {
  const std::size_t nq = query_blocks(L), nk = key_blocks(L);
  parallel_for_if_worth(L.B * L.KV, 1.5 * band_flops(L), [&](std::size_t p) {
    const std::size_t b = p / L.KV, kv = p % L.KV;
    if (G.dk) zero_rows(G.dk_of(b, kv, 0), L.Tk, L.k_ld(), L.dh);
    if (G.dv) zero_rows(G.dv_of(b, kv, 0), L.Tk, L.v_ld(), L.dv);
    for (std::size_t h = kv * L.group(); h < (kv + 1) * L.group(); ++h) {
      if (G.dq) zero_rows(G.dq_of(b, h, 0), L.Tq, L.q_ld(), L.dh);
      const Head<T> hd = head_of(L, b, h, q, k, v);
      const HeadGrad<T> g = head_grad_of(L, b, h, dy, lse, D);
      for (std::size_t kg = 0; kg < nk; kg += kKeyGroup)
        for (std::size_t qb = 0; qb < nq; ++qb)
          for (std::size_t kb = kg; kb < std::min(nk, kg + kKeyGroup); ++kb) {
            const std::size_t r0 = qb * BQ;
            pair_backward(L, hd, g, r0, std::min(BQ, L.Tq - r0), kb, scale,
                          {G.dk_of(b, kv, kb * BK), G.dv_of(b, kv, kb * BK), G.dq_of(b, h, r0)});
          }
    }
  });
}

// Two passes with disjoint writes, for when there are too few (b, kv) heads to keep the
// threads busy. dk, dv: tasks (b, kv, key block) own those rows of the kv head's gradient and
// sum every query head of the group and every query block in a fixed order. dq: tasks
// (b, h, query block) own those rows of dq and sum the key blocks in order. P and dS are
// recomputed in both: 2 of the 7 products are repeated.
template <class T>
void backward_two_passes(const HeadLayout& L, const T* q, const T* k, const T* v, const T* dy,
                         const T* lse, const T* D, T scale, const HeadGrads<T>& G) {
  const std::size_t nq = query_blocks(L), nk = key_blocks(L);
  const double flops = 2.0 * band_flops(L);
  if (G.dk || G.dv)
    parallel_for_if_worth(L.B * L.KV * nk, flops, [&](std::size_t p) {
      const std::size_t b = p / (L.KV * nk), kv = p / nk % L.KV, kb = p % nk, j0 = kb * BK;
      const PairGrads<T> out{G.dk_of(b, kv, j0), G.dv_of(b, kv, j0), nullptr};
      const std::size_t n = std::min(BK, L.Tk - j0);
      if (out.dk) zero_rows(out.dk, n, L.k_ld(), L.dh);
      if (out.dv) zero_rows(out.dv, n, L.v_ld(), L.dv);
      for (std::size_t h = kv * L.group(); h < (kv + 1) * L.group(); ++h) {
        const Head<T> hd = head_of(L, b, h, q, k, v);
        const HeadGrad<T> g = head_grad_of(L, b, h, dy, lse, D);
        for (std::size_t r0 = 0; r0 < L.Tq; r0 += BQ)
          pair_backward(L, hd, g, r0, std::min(BQ, L.Tq - r0), kb, scale, out);
      }
    });
  if (G.dq)
    parallel_for_if_worth(L.B * L.H * nq, flops, [&](std::size_t p) {
      const std::size_t bh = p / nq, r0 = (p % nq) * BQ, b = bh / L.H, h = bh % L.H;
      const std::size_t rows = std::min(BQ, L.Tq - r0);
      const PairGrads<T> out{nullptr, nullptr, G.dq_of(b, h, r0)};
      zero_rows(out.dq, rows, L.q_ld(), L.dh);
      const Head<T> hd = head_of(L, b, h, q, k, v);
      const HeadGrad<T> g = head_grad_of(L, b, h, dy, lse, D);
      const Range kbs = key_blocks_of(L, r0, rows);
      for (std::size_t kb = kbs.begin; kb < kbs.end; ++kb)
        pair_backward(L, hd, g, r0, rows, kb, scale, out);
    });
}

}  // namespace

// One pass unless the (b, kv) tasks would leave threads idle (fewer than two per thread and
// not a multiple of the thread count): the choice changes speed, never the bits.
template <class T>
void flash_attention_backward(const HeadLayout& L, const T* q, const T* k, const T* v,
                              const T* y, const T* lse, const T* dy, T scale, T* dq, T* dk,
                              T* dv) {
  std::vector<T> D(L.B * L.H * L.Tq);
  row_terms(L, y, dy, D.data());
  const HeadGrads<T> G{L, dq, dk, dv};
  const std::size_t tasks = L.B * L.KV, threads = std::size_t(std::max(1, num_threads()));
  if (tasks >= 2 * threads || tasks % threads == 0)
    backward_one_pass(L, q, k, v, dy, lse, D.data(), scale, G);
  else
    backward_two_passes(L, q, k, v, dy, lse, D.data(), scale, G);
}

#define TAPEGRAD_INSTANTIATE(T)                                                                \
  template void flash_attention_forward(const HeadLayout&, const T*, const T*, const T*, T, T*, \
                                        T*);                                                   \
  template void flash_attention_backward(const HeadLayout&, const T*, const T*, const T*,      \
                                         const T*, const T*, const T*, T, T*, T*, T*);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad::kernels
