#pragma once
// gemm_bf16's and gemv_bf16's VDPBF16PS kernels (AVX512_BF16) and their packing into bf16
// pairs (isa/bf16_pairs.hpp's layout). Compiled for that instruction set alone: call them
// only where cpu_features().avx512_bf16 (ops/kernels/dispatch.cpp decides).
#include <cstddef>
#include <cstdint>

namespace tapegrad::kernels::avx512_bf16 {

// A row of K floats as (K + 1) / 2 pairs (an odd K's last pair padded with a zero); returns
// the number of pairs packed: all of them.
std::size_t pack_row_pairs(const float* row, std::size_t K, std::uint32_t* out);

// 16 columns of two rows (`odd` may be null: zeros) as 16 pairs, the even row's bf16 in
// each pair's low half.
void pack_column_pairs(const float* even, const float* odd, std::uint32_t* out);

constexpr std::size_t kTileRows = 8;
// The kTileRows x 32 sums of kTileRows rows of packed A (`pairs` pairs each, one after
// another) against two panels of packed B (16 columns, `pairs` deep each), stored 32 floats
// a row to `tile`; for each pair, the odd k's product is added before the even k's.
void tile(const std::uint32_t* a, std::size_t pairs, const std::uint32_t* b0,
          const std::uint32_t* b1, float* tile);

// y (N) = x @ op(B) for x given as pairs (whole registers of 16 pairs, zeros past K), B's
// numbers rounded as they are loaded: 64 columns of y per pass down B's rows, or four rows
// of a transposed B per pass along x.
void gemv_pairs(bool trans_b, std::size_t N, std::size_t K, const std::uint32_t* x_pairs,
                const float* B, std::size_t ldb, float* y);

}  // namespace tapegrad::kernels::avx512_bf16
