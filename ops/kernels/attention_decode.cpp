#include "ops/kernels/attention_decode.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "platform/simd.hpp"
#include "ops/kernels/gemm_bf16.hpp"  // from_bf16
#include "ops/kernels/parallel.hpp"
#include "ops/kernels/rowwise.hpp"

namespace tapegrad::kernels {

namespace {

// Cached rows are read once per step from memory the step's weight products have just
// streamed through the caches, so their loads stall unless asked for ahead: each block
// first asks for the lines of the rows kPrefetchRows ahead (rows of the run only).
constexpr std::size_t kPrefetchRows = 64;

template <class T>
void prefetch_rows(const T* rows, std::size_t first, std::size_t count, std::size_t end,
                   std::size_t ld, std::size_t width) {
  constexpr std::size_t kLine = 64 / sizeof(T);
  for (std::size_t r = first; r < std::min(first + count, end); ++r)
    for (std::size_t c = 0; c < width; c += kLine) __builtin_prefetch(rows + r * ld + c);
}

// A run of consecutive slots holding consecutive positions.
struct Run {
  std::size_t slot, length;
};

// The visible keys [lo, count) as at most two runs of slots, oldest first.
std::size_t visible_runs(const DecodeLayout& L, Run runs[2]) {
  const std::size_t n = L.count() - L.lo(0);
  const std::size_t start = (L.first_slot + L.lo(0)) % L.capacity;
  const std::size_t first = std::min(n, L.capacity - start);
  runs[0] = {start, first};
  runs[1] = {0, n - first};
  return n;
}

// scores[g * ld + j] = scale * q_g . k_j for the `len` keys of one run, g < G. The keys are
// read once each, in place: a general product would first copy the whole run transposed
// (it wants k^T), which at a long context cost more than the dot products themselves. A
// block of W keys gives W partial-sum vectors, which one horizontal add turns into W scores;
// the W sums advance together along the head width, as W independent chains of fused
// multiply-adds (one chain per key would wait on each add's latency).
template <class T>
void run_scores(const T* q, std::size_t G, std::size_t dh, const T* k, std::size_t k_ld,
                std::size_t len, T scale, T* scores, std::size_t ld) {
  using V = xsimd::batch<T>;
  constexpr std::size_t W = V::size;
  const std::size_t d_vec = dh - dh % W;
  std::size_t j = 0;
  for (; j + W <= len; j += W) {
    prefetch_rows(k, j + kPrefetchRows, W, len, k_ld, dh);
    for (std::size_t g = 0; g < G; ++g) {
      const T* qg = q + g * dh;
      const T* kj = k + j * k_ld;
      V partial[W];
      alignas(64) T sums[W];
      for (std::size_t w = 0; w < W; ++w) partial[w] = V(T(0));
      for (std::size_t d = 0; d < d_vec; d += W) {
        const V qd = V::load_unaligned(qg + d);
        for (std::size_t w = 0; w < W; ++w)
          partial[w] = xsimd::fma(qd, V::load_unaligned(kj + w * k_ld + d), partial[w]);
      }
      simd::haddp(partial).store_aligned(sums);
      for (std::size_t w = 0; w < W; ++w) {
        T tail = 0;
        for (std::size_t d = d_vec; d < dh; ++d) tail += qg[d] * k[(j + w) * k_ld + d];
        scores[g * ld + j + w] = scale * (sums[w] + tail);
      }
    }
  }
  for (; j < len; ++j)
    for (std::size_t g = 0; g < G; ++g) {
      T dot = 0;
      for (std::size_t d = 0; d < dh; ++d) dot += q[g * dh + d] * k[j * k_ld + d];
      scores[g * ld + j] = scale * dot;
    }
}

// y_g += sum_j w[g * ld + j] * v_j for the `len` values of one run: each value row is read
// once, four at a time, so y's G rows (a few hundred bytes, in L1) are updated a quarter as
// often as one row at a time would.
template <class T>
void run_values(const T* w, std::size_t ld, std::size_t G, const T* v, std::size_t v_ld,
                std::size_t len, std::size_t dv, T* y) {
  std::size_t j = 0;
  for (; j + 4 <= len; j += 4) {
    prefetch_rows(v, j + kPrefetchRows, 4, len, v_ld, dv);
    const T* v0 = v + j * v_ld;
    const T *v1 = v0 + v_ld, *v2 = v1 + v_ld, *v3 = v2 + v_ld;
    for (std::size_t g = 0; g < G; ++g) {
      const T* wg = w + g * ld + j;
      const T w0 = wg[0], w1 = wg[1], w2 = wg[2], w3 = wg[3];
      T* yg = y + g * dv;
#pragma omp simd
      for (std::size_t d = 0; d < dv; ++d)
        yg[d] += (w0 * v0[d] + w1 * v1[d]) + (w2 * v2[d] + w3 * v3[d]);
    }
  }
  for (; j < len; ++j)
    for (std::size_t g = 0; g < G; ++g) {
      const T wgj = w[g * ld + j];
      T* yg = y + g * dv;
#pragma omp simd
      for (std::size_t d = 0; d < dv; ++d) yg[d] += wgj * v[j * v_ld + d];
    }
}

// Rows of bf16 bits are widened to float32 a block at a time into a buffer that stays in L1,
// then read by the same loops as float32 rows: memory is read at half the bytes.
constexpr std::size_t kWidenRows = 64;

// f(rows, ld, first, len) over rows [0, len) of a run: in place when they hold T ...
template <class T, class F>
void over_rows(const T* rows, std::size_t ld, std::size_t len, std::size_t, F&& f) {
  f(rows, ld, std::size_t(0), len);
}

// ... and widened, kWidenRows at a time, when they hold bf16 bits (`width` columns each).
template <class F>
void over_rows(const std::uint16_t* rows, std::size_t ld, std::size_t len, std::size_t width,
               F&& f) {
  thread_local std::vector<float> block;
  block.resize(kWidenRows * width);
  for (std::size_t j = 0; j < len; j += kWidenRows) {
    const std::size_t n = std::min(kWidenRows, len - j);
    for (std::size_t r = 0; r < n; ++r) {
      const std::uint16_t* src = rows + (j + r) * ld;
      float* dst = block.data() + r * width;
#pragma omp simd
      for (std::size_t c = 0; c < width; ++c) dst[c] = from_bf16(src[c]);
    }
    f(static_cast<const float*>(block.data()), width, j, n);
  }
}

// One kv head of one batch item: its `group` query heads are adjacent columns of q's row,
// so they form a (group, dh) matrix of leading dimension dh, and their outputs a
// (group, dv) block of y's row.
template <class T, class Stored>
void decode_kv_head(const DecodeLayout& L, std::size_t b, std::size_t kv, const T* q,
                    const Stored* k, const Stored* v, T scale, T* y) {
  const std::size_t G = L.group();
  Run runs[2];
  const std::size_t n = visible_runs(L, runs);
  const T* qg = q + b * L.H * L.dh + kv * G * L.dh;
  T* yg = y + b * L.H * L.dv + kv * G * L.dv;
  std::fill(yg, yg + G * L.dv, T(0));
  if (n == 0) return;
  const Stored* kb = k + b * L.capacity * L.k_ld() + kv * L.dh;
  const Stored* vb = v + b * L.capacity * L.v_ld() + kv * L.dv;
  thread_local std::vector<T> scores;  // (G, n), reused across steps: no allocation per token
  scores.resize(G * n);
  // scores[:, off:off+len] = scale * q_g (G, dh) . k_run (len, dh), row by row
  for (std::size_t r = 0, off = 0; r < 2; off += runs[r++].length)
    over_rows(kb + runs[r].slot * L.k_ld(), L.k_ld(), runs[r].length, L.dh,
              [&](const T* keys, std::size_t ld, std::size_t first, std::size_t len) {
                run_scores(qg, G, L.dh, keys, ld, len, scale, scores.data() + off + first, n);
              });
  // the held keys [lo, count) are scores[g * n + 0 .. n): key j at j - lo
  if (L.modifies_scores())
    for (std::size_t g = 0; g < G; ++g)
      L.modify_scores(scores.data() + g * n, L.lo(0), L.lo(0), L.count(), 0,
                      L.head_slope<T>(kv * G + g));
  // far keys' weights below kTinyWeight as 0: under ALiBi many are subnormal, and every
  // product with them in run_values would take a microcode assist
  for (std::size_t g = 0; g < G; ++g)
    softmax_row_inplace(scores.data() + g * n, n, kTinyWeight<T>);
  // y_g (G, dv) = w (G, n) @ v_runs (n, dv), both runs accumulated
  for (std::size_t r = 0, off = 0; r < 2; off += runs[r++].length)
    over_rows(vb + runs[r].slot * L.v_ld(), L.v_ld(), runs[r].length, L.dv,
              [&](const T* values, std::size_t ld, std::size_t first, std::size_t len) {
                run_values(scores.data() + off + first, n, G, values, ld, len, L.dv, yg);
              });
}

}  // namespace

template <class T, class Stored>
void attention_decode(const DecodeLayout& L, const T* q, const Stored* k, const Stored* v, T scale,
                      T* y) {
  const std::size_t pairs = L.B * L.KV;
  const double flops = 4.0 * double(L.B * L.H) * double(L.count()) * double(L.dh);
  // (b, kv) pairs write disjoint blocks of y; a short context is not worth a wake-up
  parallel_for_if_worth(
      pairs, flops, [&](std::size_t p) { decode_kv_head(L, p / L.KV, p % L.KV, q, k, v, scale, y); },
      2.0e5);
}

template void attention_decode(const DecodeLayout&, const float*, const float*, const float*,
                               float, float*);
template void attention_decode(const DecodeLayout&, const double*, const double*, const double*,
                               double, double*);
template void attention_decode(const DecodeLayout&, const float*, const std::uint16_t*,
                               const std::uint16_t*, float, float*);

}  // namespace tapegrad::kernels
