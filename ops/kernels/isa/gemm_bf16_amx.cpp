#include "ops/kernels/isa/gemm_bf16_amx.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/kernels/gemm_bf16.hpp"  // store_tile
#include "ops/kernels/isa/bf16_pairs.hpp"
#include "ops/kernels/parallel.hpp"

// GCC 12 warns of the register the unpack intrinsics leave undefined on purpose, once
// inlined here (bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace tapegrad::kernels {

#if defined(__x86_64__)
namespace {

// The tiles read A as rows of bf16 pairs (k = 2p in the low half, 2p + 1 in the high half:
// a bf16 row as stored) and B as panels of 16 columns, each pair one 64-byte row of the
// panel's 16 pairs. A block of C is 32 x 32: tiles 0-3 hold its sums, 4-5 two 16-row
// tiles of A and 6-7 two panels of B, 16 pairs deep. A task is a band of 32 rows of C
// across every column: it packs its own rows of A and configures the tiles once.
using bf16_pairs::kPanel;
using bf16_pairs::round_up;
constexpr std::size_t kBand = 32, kDepth = 16, kBlockCols = 2 * kPanel;
// The tiles run a product of this many flops in some 30 us on one core: smaller ones lose
// more to starting the pool twice (packing, then the bands) than a second core saves. With
// 5e7 the products of K and V under grouped-query attention and of the head stayed on one
// core, and llama_step_bf16 took 9 % longer at two threads (1e7 gains nothing more).
constexpr double kParallelFlops = 2.0e7;

// op(X) as stored: X[row * ld + col], or X[col * ld + row] when transposed.
struct Operand {
  const float* data;
  std::size_t ld;
  bool trans;
};

#define TAPEGRAD_AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))

using bf16_pairs::column_pairs;
using bf16_pairs::left;
using bf16_pairs::row_pairs;

// v[i][j] <- v[j][i] for a 16 x 16 block of 32-bit words: within each 128-bit lane a 4 x 4
// transpose of four rows, then of the lanes of four registers.
TAPEGRAD_BF16_PAIRS_TARGET void transpose16(__m512i v[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // u[g + j]: rows g..g+3 of the lane's column j
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int j = 0; j < 4; ++j) {  // column 4 L + j gathers lane L of u[j], u[4 + j], ...
    const __m512i a01 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
    const __m512i a23 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i b01 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i b23 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    v[j] = _mm512_shuffle_i32x4(a01, b01, 0x88);
    v[4 + j] = _mm512_shuffle_i32x4(a01, b01, 0xDD);
    v[8 + j] = _mm512_shuffle_i32x4(a23, b23, 0x88);
    v[12 + j] = _mm512_shuffle_i32x4(a23, b23, 0xDD);
  }
}

// Rows r0 .. r0 + 31 of op(A) (M x K; zeros beyond M and K) as 32 rows of `pairs` pairs.
TAPEGRAD_BF16_PAIRS_TARGET void pack_band(const Operand& A, std::size_t M, std::size_t K,
                                    std::size_t pairs, std::size_t r0, std::uint32_t* out) {
  if (!A.trans) {
    for (std::size_t i = 0; i < kBand; ++i)
      for (std::size_t p0 = 0; p0 < pairs; p0 += 16) {
        const std::size_t n = r0 + i < M ? left(K, 2 * p0) : 0;
        _mm512_storeu_si512(out + i * pairs + p0, row_pairs(A.data + (r0 + i) * A.ld + 2 * p0, n));
      }
    return;
  }
  __m512i v[16];
  for (std::size_t g = 0; g < kBand; g += 16) {
    const std::size_t m0 = r0 + g, width = left(M, m0);
    for (std::size_t p0 = 0; p0 < pairs; p0 += 16) {
      for (std::size_t i = 0; i < 16; ++i) {  // v[i]: pair p0 + i of the 16 rows
        const std::size_t k = 2 * (p0 + i);
        v[i] = column_pairs(k < K ? A.data + k * A.ld + m0 : nullptr,
                            k + 1 < K ? A.data + (k + 1) * A.ld + m0 : nullptr, width);
      }
      transpose16(v);
      for (std::size_t j = 0; j < 16; ++j) _mm512_storeu_si512(out + (g + j) * pairs + p0, v[j]);
    }
  }
}

// Columns 16 panel .. 16 panel + 15 of op(B) (K x N; zeros beyond K and N) as `pairs` rows
// of 16 pairs.
TAPEGRAD_BF16_PAIRS_TARGET void pack_panel(const Operand& B, std::size_t K, std::size_t N,
                                     std::size_t pairs, std::size_t panel, std::uint32_t* out) {
  const std::size_t n0 = panel * kPanel, width = left(N, n0);
  if (!B.trans) {
    for (std::size_t p = 0; p < pairs; ++p) {
      const std::size_t k = 2 * p;
      _mm512_storeu_si512(out + p * kPanel,
                          column_pairs(k < K ? B.data + k * B.ld + n0 : nullptr,
                                       k + 1 < K ? B.data + (k + 1) * B.ld + n0 : nullptr, width));
    }
    return;
  }
  __m512i v[16];
  for (std::size_t p0 = 0; p0 < pairs; p0 += 16) {
    const std::size_t n = left(K, 2 * p0);
    for (std::size_t i = 0; i < 16; ++i)  // v[i]: column n0 + i's 16 pairs
      v[i] = row_pairs(B.data + (n0 + i) * B.ld + 2 * p0, i < width ? n : 0);
    transpose16(v);
    for (std::size_t q = 0; q < 16; ++q) _mm512_storeu_si512(out + (p0 + q) * kPanel, v[q]);
  }
}

struct TileConfig {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// Eight tiles of 16 rows of 64 bytes. Loaded by every task: another library on this thread
// may have configured the tiles otherwise since.
__attribute__((target("amx-tile"))) void configure_tiles() {
  alignas(64) TileConfig config;
  for (int t = 0; t < 8; ++t) config.colsb[t] = 64, config.rows[t] = 16;
  // the intrinsic's memory operand covers only the first 8 bytes of the configuration, so
  // GCC would drop the stores to the rest without this
  __asm__ volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
}

__attribute__((target("amx-tile"))) void release_tiles() { _tile_release(); }

// The 32 x 32 block of sums of the band `a` and the two panels from `b`, stored to `to`
// (`ld` floats a row).
TAPEGRAD_AMX_TARGET void block(const std::uint32_t* a, const std::uint32_t* b, std::size_t pairs,
                               float* to, std::size_t ld) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const std::size_t a_stride = pairs * sizeof(std::uint32_t);
  const std::size_t b_stride = kPanel * sizeof(std::uint32_t);
  for (std::size_t p = 0; p < pairs; p += kDepth) {
    _tile_loadd(4, a + p, a_stride);
    _tile_loadd(5, a + 16 * pairs + p, a_stride);
    _tile_loadd(6, b + p * kPanel, b_stride);
    _tile_loadd(7, b + (pairs + p) * kPanel, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  const std::size_t stride = ld * sizeof(float);
  _tile_stored(0, to, stride);
  _tile_stored(1, to + kPanel, stride);
  _tile_stored(2, to + 16 * ld, stride);
  _tile_stored(3, to + 16 * ld + kPanel, stride);
}

}  // namespace

void gemm_bf16_amx(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                   float alpha, const float* A, std::size_t lda, const float* B, std::size_t ldb,
                   float beta, float* C, std::size_t ldc) {
  const Operand a{A, lda, trans_a}, b{B, ldb, trans_b};
  const std::size_t pairs = round_up((K + 1) / 2, kDepth);
  const std::size_t bands = round_up(M, kBand) / kBand, panels = round_up(N, kBlockCols) / kPanel;
  const double flops = 2.0 * double(M) * double(N) * double(K);
  // kept between calls (a fresh buffer costs its zero-fill and page faults every call)
  thread_local std::vector<std::uint32_t> packed_b;
  if (packed_b.size() < panels * pairs * kPanel) packed_b.resize(panels * pairs * kPanel);
  std::uint32_t* const panels_b = packed_b.data();
  parallel_for_if_worth(panels, flops, [&](std::size_t j) {
    pack_panel(b, K, N, pairs, j, panels_b + j * pairs * kPanel);
  }, kParallelFlops);
  // with beta 0, full blocks go straight to C (scaled there by alpha); the rest through a copy
  const bool in_place = beta == 0.0f;
  parallel_for_if_worth(bands, flops, [&](std::size_t band) {
    thread_local std::vector<std::uint32_t> packed_a;
    if (packed_a.size() < kBand * pairs) packed_a.resize(kBand * pairs);
    const std::size_t r0 = band * kBand;
    pack_band(a, M, K, pairs, r0, packed_a.data());
    alignas(64) float tile[kBand * kBlockCols];
    configure_tiles();
    for (std::size_t j = 0; j < panels; j += 2) {
      const std::size_t c0 = j * kPanel;
      const std::uint32_t* panel = panels_b + j * pairs * kPanel;
      if (in_place && r0 + kBand <= M && c0 + kBlockCols <= N) {
        float* out = C + r0 * ldc + c0;
        block(packed_a.data(), panel, pairs, out, ldc);
        if (alpha != 1.0f)
          for (std::size_t r = 0; r < kBand; ++r)
            for (std::size_t c = 0; c < kBlockCols; ++c) out[r * ldc + c] *= alpha;
      } else {
        block(packed_a.data(), panel, pairs, tile, kBlockCols);
        store_tile(tile, r0, kBand, c0, M, N, alpha, beta, C, ldc);
      }
    }
    release_tiles();
  }, kParallelFlops);
}
#else
void gemm_bf16_amx(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*,
                   std::size_t, const float*, std::size_t, float, float*, std::size_t) {}
#endif

}  // namespace tapegrad::kernels
