#include "ops/kernels/gemm_bf16.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/kernels/isa/bf16_pairs.hpp"  // the packed layout: kPanel, round_up
#include "ops/kernels/isa/gemm_bf16_avx512.hpp"
#include "ops/kernels/parallel.hpp"

namespace tapegrad::kernels {

std::uint16_t to_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to the even upper half
  return std::uint16_t(u >> 16);
}

namespace {
// The bits of to_bf16 kept in a float32, branch-free so that the loops using it vectorise.
inline float rounded(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const std::uint32_t nearest = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const std::uint32_t nan = (u | 0x00400000u) & 0xffff0000u;  // a quiet NaN stays one
  const std::uint32_t out = (u & 0x7fffffffu) > 0x7f800000u ? nan : nearest;
  float y;
  std::memcpy(&y, &out, sizeof y);
  return y;
}
}  // namespace

void round_to_bf16(const float* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = rounded(src[i]);
}

namespace {
// y (N) = x (K, rounded already) @ op(B), B's numbers rounded as they are read: four rows of B
// per pass over y, or a dot product per row of a transposed B in 16 partial sums.
void gemv_rounded(bool trans_b, std::size_t N, std::size_t K, const float* x, const float* B,
                  std::size_t ldb, float* y) {
  if (!trans_b) {
    std::fill(y, y + N, 0.0f);
    std::size_t k = 0;
    for (; k + 4 <= K; k += 4) {
      const float* row = B + k * ldb;
      for (std::size_t n = 0; n < N; ++n)
        y[n] = y[n] + x[k] * rounded(row[n]) + x[k + 1] * rounded(row[ldb + n]) +
               x[k + 2] * rounded(row[2 * ldb + n]) + x[k + 3] * rounded(row[3 * ldb + n]);
    }
    for (; k < K; ++k)
      for (std::size_t n = 0; n < N; ++n) y[n] += x[k] * rounded(B[k * ldb + n]);
    return;
  }
  constexpr std::size_t kLanes = 16;
  for (std::size_t n = 0; n < N; ++n) {
    const float* row = B + n * ldb;
    float part[kLanes] = {};
    for (std::size_t k = 0; k < K; ++k) part[k % kLanes] += x[k] * rounded(row[k]);
    float sum = 0.0f;
    for (float p : part) sum += p;
    y[n] = sum;
  }
}

}  // namespace

void gemv_bf16_kernel(bool trans_a, bool trans_b, std::size_t N, std::size_t K, float alpha,
                      const float* A, std::size_t lda, const float* B, std::size_t ldb,
                      float beta, float* C, bool pairs) {
  // x: (1, K) @ op(B): (K, N) -> (1, N)
  const auto x_at = [&](std::size_t k) { return trans_a ? A[k * lda] : A[k]; };
  thread_local std::vector<float> y;
  y.resize(N);
#if defined(__x86_64__)
  if (pairs) {
    thread_local std::vector<std::uint32_t> x_pairs;
    x_pairs.assign((K + 31) / 32 * 16, 0);  // whole registers of 16 pairs, zeros past K
    for (std::size_t k = 0; k < K; ++k)
      x_pairs[k / 2] |= std::uint32_t(to_bf16(x_at(k))) << (k % 2 ? 16 : 0);
    avx512_bf16::gemv_pairs(trans_b, N, K, x_pairs.data(), B, ldb, y.data());
  } else
#endif
  {
    thread_local std::vector<float> x;
    x.resize(K);
    for (std::size_t k = 0; k < K; ++k) x[k] = rounded(x_at(k));
    gemv_rounded(trans_b, N, K, x.data(), B, ldb, y.data());
  }
  for (std::size_t n = 0; n < N; ++n) C[n] = alpha * y[n] + (beta == 0.0f ? 0.0f : beta * C[n]);
}

RoundedOperands round_operands(bool trans_a, bool trans_b, std::size_t M, std::size_t N,
                               std::size_t K, const float* A, std::size_t lda, const float* B,
                               std::size_t ldb, std::vector<float>& a, std::vector<float>& b) {
  // a resize that grows zero-fills first, a cost of its own: buffers are kept between calls
  const auto round_matrix = [](std::size_t rows, std::size_t cols, const float* X, std::size_t ld,
                               std::vector<float>& out) {
    if (out.size() < rows * cols) out.resize(rows * cols);
    for (std::size_t r = 0; r < rows; ++r) round_to_bf16(X + r * ld, out.data() + r * cols, cols);
    return cols;
  };
  const std::size_t a_ld = round_matrix(trans_a ? K : M, trans_a ? M : K, A, lda, a);
  const std::size_t b_ld = round_matrix(trans_b ? N : K, trans_b ? K : N, B, ldb, b);
  return {a.data(), a_ld, b.data(), b_ld};
}

namespace {

constexpr std::size_t kRows = avx512_bf16::kTileRows;  // rows of C per tile
using bf16_pairs::kPanel;
using bf16_pairs::round_up;
constexpr std::size_t kCols = 2 * kPanel;  // columns of C per tile: two panels

// Two bf16 in one 32-bit word: k = 2p in the low half, k = 2p + 1 in the high half, the
// order VDPBF16PS reads a pair in.
std::uint32_t pair(float even, float odd) {
  return std::uint32_t(to_bf16(even)) | std::uint32_t(to_bf16(odd)) << 16;
}

// The operands packed once: A as rows of K/2 pairs (rows padded to a multiple of kRows with
// zeros), B as panels of kPanel columns, each K/2 pairs deep (columns padded to kCols).
struct Packed {
  std::size_t pairs = 0, rows = 0, cols = 0;
  std::vector<std::uint32_t> a, b;
};

// Pairs [0, P.pairs) of the rows m0 .. m0 + 15 of a transposed A (A[k * lda + m]): each
// pair of rows of A, 16 columns wide, gives one pair for each of the 16 rows of the
// packed A. Returns the first pair it did not pack (an odd K's last).
std::size_t pack_transposed_rows(const float* A, std::size_t lda, std::size_t K, std::size_t m0,
                                 Packed& P, bool fast) {
  std::size_t p = 0;
#if defined(__x86_64__)
  if (!fast) return 0;
  alignas(64) std::uint32_t pairs[kPanel];
  for (; 2 * p + 1 < K; ++p) {
    avx512_bf16::pack_column_pairs(A + 2 * p * lda + m0, A + (2 * p + 1) * lda + m0, pairs);
    for (std::size_t i = 0; i < kPanel; ++i) P.a[(m0 + i) * P.pairs + p] = pairs[i];
  }
#else
  (void)A, (void)lda, (void)K, (void)m0, (void)P, (void)fast;
#endif
  return p;
}

// Column n of a transposed B (B[n * ldb + k]) into its panel: its K values are one
// contiguous row. Returns the first pair it did not pack.
std::size_t pack_transposed_column(const float* B, std::size_t ldb, std::size_t K, std::size_t n,
                                   Packed& P, bool fast, std::vector<std::uint32_t>& row) {
  std::size_t p = 0;
#if defined(__x86_64__)
  if (!fast) return 0;
  p = avx512_bf16::pack_row_pairs(B + n * ldb, K, row.data());
  std::uint32_t* panel = P.b.data() + (n / kPanel) * P.pairs * kPanel + n % kPanel;
  for (std::size_t q = 0; q < p; ++q) panel[q * kPanel] = row[q];
#else
  (void)B, (void)ldb, (void)K, (void)n, (void)P, (void)fast, (void)row;
#endif
  return p;
}

Packed pack(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
            const float* A, std::size_t lda, const float* B, std::size_t ldb, bool fast) {
  Packed P;
  P.pairs = (K + 1) / 2;
  P.rows = round_up(M, kRows);
  P.cols = round_up(N, kCols);
  const auto a_at = [&](std::size_t m, std::size_t k) {
    return k < K ? (trans_a ? A[k * lda + m] : A[m * lda + k]) : 0.0f;
  };
  const auto b_at = [&](std::size_t k, std::size_t n) {
    return k < K ? (trans_b ? B[n * ldb + k] : B[k * ldb + n]) : 0.0f;
  };
  P.a.assign(P.rows * P.pairs, 0);
  // the pairs already packed in each row of A (the rest: one by one below)
  std::vector<std::size_t> a_done(M, 0);
#if defined(__x86_64__)
  if (fast && !trans_a)
    for (std::size_t m = 0; m < M; ++m)
      a_done[m] = avx512_bf16::pack_row_pairs(A + m * lda, K, P.a.data() + m * P.pairs);
  if (fast && trans_a)
    for (std::size_t m0 = 0; m0 + kPanel <= M; m0 += kPanel)
      std::fill_n(a_done.begin() + long(m0), kPanel, pack_transposed_rows(A, lda, K, m0, P, fast));
#endif
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t p = a_done[m]; p < P.pairs; ++p)
      P.a[m * P.pairs + p] = pair(a_at(m, 2 * p), a_at(m, 2 * p + 1));
  P.b.assign(P.cols * P.pairs, 0);
  std::vector<std::size_t> b_done(N, 0);
#if defined(__x86_64__)
  if (fast && !trans_b)  // whole panels, 16 columns at a time
    for (std::size_t n0 = 0; n0 + kPanel <= N; n0 += kPanel) {
      for (std::size_t p = 0; 2 * p + 1 < K; ++p)
        avx512_bf16::pack_column_pairs(B + 2 * p * ldb + n0, B + (2 * p + 1) * ldb + n0,
                                       P.b.data() + (n0 / kPanel * P.pairs + p) * kPanel);
      std::fill_n(b_done.begin() + long(n0), kPanel, K / 2);
    }
  if (fast && trans_b) {
    std::vector<std::uint32_t> row(P.pairs);
    for (std::size_t n = 0; n < N; ++n) b_done[n] = pack_transposed_column(B, ldb, K, n, P, fast, row);
  }
#endif
  for (std::size_t n = 0; n < N; ++n) {
    std::uint32_t* panel = P.b.data() + (n / kPanel) * P.pairs * kPanel + n % kPanel;
    for (std::size_t p = b_done[n]; p < P.pairs; ++p)
      panel[p * kPanel] = pair(b_at(2 * p, n), b_at(2 * p + 1, n));
  }
  return P;
}

// One tile's sums, tile[r][c] for the kRows x kCols block at (row r0, panel j0), in the
// instruction's order: for each pair, the odd k's product, then the even k's.
void tile_portable(const Packed& P, std::size_t r0, std::size_t j0, float* tile) {
  std::fill(tile, tile + kRows * kCols, 0.0f);
  for (std::size_t r = 0; r < kRows; ++r) {
    const std::uint32_t* a = P.a.data() + (r0 + r) * P.pairs;
    for (std::size_t c = 0; c < kCols; ++c) {
      const std::uint32_t* b = P.b.data() + (j0 + c / kPanel) * P.pairs * kPanel + c % kPanel;
      float sum = 0;
      for (std::size_t p = 0; p < P.pairs; ++p) {
        const std::uint32_t x = a[p], y = b[p * kPanel];
        sum += from_bf16(std::uint16_t(x >> 16)) * from_bf16(std::uint16_t(y >> 16));
        sum += from_bf16(std::uint16_t(x)) * from_bf16(std::uint16_t(y));
      }
      tile[r * kCols + c] = sum;
    }
  }
}

}  // namespace

void store_tile(const float* tile, std::size_t r0, std::size_t rows, std::size_t c0,
                std::size_t M, std::size_t N, float alpha, float beta, float* C,
                std::size_t ldc) {
  const std::size_t width = std::min(N, c0 + kCols) - c0;
  for (std::size_t r = r0; r < std::min(M, r0 + rows); ++r) {
    const float* t = tile + (r - r0) * kCols;
    float* out = C + r * ldc + c0;
    if (beta == 0.0f)
      for (std::size_t c = 0; c < width; ++c) out[c] = alpha * t[c];
    else
      for (std::size_t c = 0; c < width; ++c) out[c] = alpha * t[c] + beta * out[c];
  }
}

void gemm_bf16_pairs(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                     float alpha, const float* A, std::size_t lda, const float* B,
                     std::size_t ldb, float beta, float* C, std::size_t ldc, bool vdpbf16ps) {
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const Packed P = pack(trans_a, trans_b, M, N, K, A, lda, B, ldb, vdpbf16ps);
  const std::size_t row_tiles = P.rows / kRows, col_tiles = P.cols / kCols;
  const auto run_tile = [&](std::size_t t) {
    const std::size_t r0 = (t % row_tiles) * kRows, j0 = (t / row_tiles) * (kCols / kPanel);
    alignas(64) float tile[kRows * kCols];
#if defined(__x86_64__)
    if (vdpbf16ps) {
      const std::uint32_t* b0 = P.b.data() + j0 * P.pairs * kPanel;
      avx512_bf16::tile(P.a.data() + r0 * P.pairs, P.pairs, b0, b0 + P.pairs * kPanel, tile);
    } else
#endif
      tile_portable(P, r0, j0, tile);
    store_tile(tile, r0, kRows, j0 * kPanel, M, N, alpha, beta, C, ldc);
  };
  parallel_for_if_worth(row_tiles * col_tiles, flops, run_tile);
}

}  // namespace tapegrad::kernels
