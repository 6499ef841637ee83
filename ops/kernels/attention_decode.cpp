#include "ops/kernels/attention_decode.hpp"

#include <algorithm>
#include <vector>

#include "ops/kernels/gemm.hpp"
#include "ops/kernels/parallel.hpp"
#include "ops/kernels/rowwise.hpp"

namespace tapegrad::kernels {

namespace {

// A run of consecutive slots holding consecutive positions.
struct Run {
  std::size_t slot, length;
};

// The visible keys [lo, count) as at most two runs of slots, oldest first.
std::size_t visible_runs(const DecodeLayout& L, Run runs[2]) {
  const std::size_t n = L.count - L.lo();
  const std::size_t start = (L.first_slot + L.lo()) % L.capacity;
  const std::size_t first = std::min(n, L.capacity - start);
  runs[0] = {start, first};
  runs[1] = {0, n - first};
  return n;
}

// One kv head of one batch item: its `group` query heads are adjacent columns of q's row,
// so they form a (group, dh) matrix of leading dimension dh, and their outputs a
// (group, dv) block of y's row.
template <class T>
void decode_kv_head(const DecodeLayout& L, std::size_t b, std::size_t kv, const T* q,
                    const T* k, const T* v, T scale, T* y) {
  const std::size_t G = L.group();
  Run runs[2];
  const std::size_t n = visible_runs(L, runs);
  const T* qg = q + b * L.H * L.dh + kv * G * L.dh;
  T* yg = y + b * L.H * L.dv + kv * G * L.dv;
  if (n == 0) return std::fill(yg, yg + G * L.dv, T(0));
  const T* kb = k + b * L.capacity * L.k_ld() + kv * L.dh;
  const T* vb = v + b * L.capacity * L.v_ld() + kv * L.dv;
  thread_local std::vector<T> scores;  // (G, n), reused across steps: no allocation per token
  scores.resize(G * n);
  // scores[:, off:off+len] = scale * q_g (G, dh) @ k_run^T (dh, len)
  for (std::size_t r = 0, off = 0; r < 2; off += runs[r++].length)
    if (runs[r].length)
      gemm_strided<T>(false, true, G, runs[r].length, L.dh, scale, qg, L.dh,
                      kb + runs[r].slot * L.k_ld(), L.k_ld(), T(0), scores.data() + off, n);
  for (std::size_t g = 0; g < G; ++g) softmax_row_inplace(scores.data() + g * n, n);
  // y_g (G, dv) = w (G, n) @ v_runs (n, dv), the second run accumulated onto the first
  for (std::size_t r = 0, off = 0; r < 2; off += runs[r++].length)
    if (runs[r].length)
      gemm_strided<T>(false, false, G, L.dv, runs[r].length, T(1), scores.data() + off, n,
                      vb + runs[r].slot * L.v_ld(), L.v_ld(), r == 0 ? T(0) : T(1), yg, L.dv);
}

}  // namespace

template <class T>
void attention_decode(const DecodeLayout& L, const T* q, const T* k, const T* v, T scale, T* y) {
  const std::size_t pairs = L.B * L.KV;
  const double flops = 4.0 * double(L.B * L.H) * double(L.count) * double(L.dh);
  // (b, kv) pairs write disjoint blocks of y; a short context is not worth a wake-up
  parallel_for_if_worth(
      pairs, flops, [&](std::size_t p) { decode_kv_head(L, p / L.KV, p % L.KV, q, k, v, scale, y); },
      2.0e5);
}

template void attention_decode(const DecodeLayout&, const float*, const float*, const float*,
                               float, float*);
template void attention_decode(const DecodeLayout&, const double*, const double*, const double*,
                               double, double*);

}  // namespace tapegrad::kernels
