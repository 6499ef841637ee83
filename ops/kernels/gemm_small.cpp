#include "ops/kernels/gemm_small.hpp"

#if defined(__SSE__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "platform/simd.hpp"

namespace tapegrad::kernels {

namespace {

template <class T>
using Batch = xsimd::batch<T>;

// Rows of C per register tile: 8 x 2 vectors is 16 accumulators, which fits AVX-512's 32
// registers with the two B vectors and the broadcast A value; 6 x 2 fits the 16 of AVX2.
template <class T>
constexpr int kTileRows = sizeof(Batch<T>) >= 64 ? 8 : 6;

// Columns of C per block: the (K, 128) slice of the B panel stays in L1 while every row
// tile of A passes over it.
constexpr std::size_t kBlockColumns = 128;

// Results at least this large bypass the cache (see the header). Measured on the benchmark
// shapes: from 64 KiB on (a (128, 128) float block) streaming was as fast or faster, also
// inside the fused attention, whose softmax reads the block right after.
constexpr std::size_t kStreamBytes = std::size_t(64) << 10;

// A non-temporal store of one vector to a vector-aligned address.
template <class T>
inline void store_streaming(T* p, const Batch<T>& v) {
  constexpr bool is_float = std::is_same_v<T, float>;
#if defined(__AVX512F__)
  if constexpr (sizeof(Batch<T>) == 64) {
    if constexpr (is_float) _mm512_stream_ps(p, v);
    else _mm512_stream_pd(p, v);
    return;
  }
#endif
#if defined(__AVX__)
  if constexpr (sizeof(Batch<T>) == 32) {
    if constexpr (is_float) _mm256_stream_ps(p, v);
    else _mm256_stream_pd(p, v);
    return;
  }
#endif
#if defined(__SSE2__)
  if constexpr (sizeof(Batch<T>) == 16) {
    if constexpr (is_float) _mm_stream_ps(p, v);
    else _mm_stream_pd(p, v);
    return;
  }
#endif
  v.store_aligned(p);
}

inline void fence_streaming_stores() {
#if defined(__SSE__)
  _mm_sfence();
#endif
}

#if defined(__AVX__)
// dst (8, 8) = src (8, 8)^T in registers; row strides lds and ldd.
inline void transpose_block(const float* src, std::size_t lds, float* dst, std::size_t ldd) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

// dst (4, 4) = src (4, 4)^T in registers; row strides lds and ldd.
inline void transpose_block(const double* src, std::size_t lds, double* dst, std::size_t ldd) {
  __m256d r[4], t[4];
  for (int i = 0; i < 4; ++i) r[i] = _mm256_loadu_pd(src + i * lds);
  for (int i = 0; i < 4; i += 2) {
    t[i] = _mm256_unpacklo_pd(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_pd(r[i], r[i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    _mm256_storeu_pd(dst + i * ldd, _mm256_permute2f128_pd(t[i], t[i + 2], 0x20));
    _mm256_storeu_pd(dst + (i + 2) * ldd, _mm256_permute2f128_pd(t[i], t[i + 2], 0x31));
  }
}
#endif

// panel (K, N) = B^T for B (N, K) with row stride ldb. In register blocks where AVX has
// them: copied element by element, the transpose cost a tenth of a whole
// (128, 16) @ (16, 128) product.
template <class T>
void transpose_into_panel(const T* B, std::size_t ldb, std::size_t N, std::size_t K, T* panel) {
  std::size_t j_blocked = 0, k_blocked = 0;  // B's block [0, j_blocked) x [0, k_blocked)
#if defined(__AVX__)
  constexpr std::size_t block = 32 / sizeof(T);  // one AVX register of T
  j_blocked = N - N % block;
  k_blocked = K - K % block;
  for (std::size_t j0 = 0; j0 < j_blocked; j0 += block)
    for (std::size_t k0 = 0; k0 < k_blocked; k0 += block)
      transpose_block(B + j0 * ldb + k0, ldb, panel + k0 * N + j0, N);
#endif
  for (std::size_t j = 0; j < N; ++j)  // what the blocks left, element by element
    for (std::size_t k = j < j_blocked ? k_blocked : 0; k < K; ++k)
      panel[k * N + j] = B[j * ldb + k];
}

// The operands of one product, with B given as a (K, N) row-major panel: B itself when
// op(B) = B, or B^T copied when op(B) = B^T.
template <class T>
struct Operands {
  const T* A;
  std::size_t lda;
  const T* panel;
  std::size_t ldp;
  T* C;
  std::size_t ldc;
  std::size_t K;
  T alpha;
  Triangle structure;
};

// op(A)'s element (i, k): A is read in place, transposed or not.
template <bool TransA, class T>
inline T a_at(const Operands<T>& o, std::size_t i, std::size_t k) {
  return TransA ? o.A[k * o.lda + i] : o.A[i * o.lda + k];
}

// One tile: rows [i, i + R) of C against NV vectors of columns from column j. With a
// triangular op(A), the k outside [k_begin, k_end) meet only zeros of these R rows.
template <class T, int R, int NV, bool Stream, bool TransA>
inline void tile(const Operands<T>& o, std::size_t i, std::size_t j) {
  constexpr std::size_t W = Batch<T>::size;
  const std::size_t k_begin = o.structure == Triangle::a_upper ? std::min(i, o.K) : 0;
  const std::size_t k_end = o.structure == Triangle::a_lower ? std::min(i + R, o.K) : o.K;
  // The loops over the tile's registers are unrolled by pragma: left to itself, GCC kept acc
  // on the stack before and after the loop over k, which cost 12 % of a product with K = 16.
  Batch<T> acc[R][NV];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[r][v] = Batch<T>(T(0));
  for (std::size_t k = k_begin; k < k_end; ++k) {
    Batch<T> b[NV];
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) b[v] = Batch<T>::load_unaligned(o.panel + k * o.ldp + j + v * W);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const Batch<T> a(a_at<TransA>(o, i + r, k));
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(a, b[v], acc[r][v]);
    }
  }
  const Batch<T> scale(o.alpha);
  T* c = o.C + i * o.ldc + j;
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      if constexpr (Stream) store_streaming(c + r * o.ldc + v * W, acc[r][v] * scale);
      else (acc[r][v] * scale).store_unaligned(c + r * o.ldc + v * W);
    }
}

// Rows [i, i + R) of C, columns [j0, j1) (a multiple of the SIMD width). For c_lower,
// the tiles that start right of the last row's diagonal (column i + R - 1) are skipped.
template <class T, int R, bool Stream, bool TransA>
inline void row_tile(const Operands<T>& o, std::size_t i, std::size_t j0, std::size_t j1) {
  constexpr std::size_t W = Batch<T>::size;
  const std::size_t needed = o.structure == Triangle::c_lower ? std::min(j1, i + R) : j1;
  std::size_t j = j0;
  for (; j + 2 * W <= j1 && j < needed; j += 2 * W) tile<T, R, 2, Stream, TransA>(o, i, j);
  for (; j + W <= j1 && j < needed; j += W) tile<T, R, 1, Stream, TransA>(o, i, j);
}

template <class T, bool Stream, bool TransA>
void all_tiles(const Operands<T>& o, std::size_t M, std::size_t N) {
  constexpr int R = kTileRows<T>;
  for (std::size_t j0 = 0; j0 < N; j0 += kBlockColumns) {
    const std::size_t j1 = std::min(N, j0 + kBlockColumns);
    std::size_t i = 0;
    for (; i + R <= M; i += R) row_tile<T, R, Stream, TransA>(o, i, j0, j1);
    for (; i < M; ++i) row_tile<T, 1, Stream, TransA>(o, i, j0, j1);
  }
}

template <class T, bool TransA>
void run(const Operands<T>& o, std::size_t M, std::size_t N) {
  constexpr std::size_t vector_bytes = sizeof(Batch<T>);
  const bool aligned = reinterpret_cast<std::uintptr_t>(o.C) % vector_bytes == 0 &&
                       (o.ldc * sizeof(T)) % vector_bytes == 0;
  if (aligned && M * N * sizeof(T) >= kStreamBytes) {
    all_tiles<T, true, TransA>(o, M, N);
    fence_streaming_stores();  // the streamed lines are visible before anyone reads C
  } else {
    all_tiles<T, false, TransA>(o, M, N);
  }
}

}  // namespace

template <class T>
bool gemm_small_applies(bool trans_a, bool trans_b, std::size_t M, std::size_t N,
                        std::size_t K, T beta, Triangle structure) {
  (void)trans_a;
  if (beta != T(0) || M == 0 || N == 0 || K == 0 || N % Batch<T>::size != 0) return false;
  if (trans_b) return K <= kSmallK;
  return structure != Triangle::none || M * N * K <= kSmallWork;
}

template <class T>
void gemm_small(bool trans_a, bool trans_b, std::size_t M, std::size_t N, std::size_t K,
                T alpha, const T* A, std::size_t lda, const T* B, std::size_t ldb, T* C,
                std::size_t ldc, Triangle structure) {
  Operands<T> o{A, lda, B, ldb, C, ldc, K, alpha, structure};
  if (trans_b) {
    // B^T as a (K, N) row-major panel, so that each step over K reads whole vectors of
    // columns.
    thread_local std::vector<T> panel;
    panel.resize(K * N);
    transpose_into_panel(B, ldb, N, K, panel.data());
    o.panel = panel.data();
    o.ldp = N;
  }
  if (trans_a) run<T, true>(o, M, N);
  else run<T, false>(o, M, N);
}

template bool gemm_small_applies(bool, bool, std::size_t, std::size_t, std::size_t, float,
                                 Triangle);
template bool gemm_small_applies(bool, bool, std::size_t, std::size_t, std::size_t, double,
                                 Triangle);
template void gemm_small(bool, bool, std::size_t, std::size_t, std::size_t, float, const float*,
                         std::size_t, const float*, std::size_t, float*, std::size_t, Triangle);
template void gemm_small(bool, bool, std::size_t, std::size_t, std::size_t, double,
                         const double*, std::size_t, const double*, std::size_t, double*,
                         std::size_t, Triangle);

}  // namespace tapegrad::kernels
