// bf16_bench: the bf16 matrix product (kernels::gemm_bf16) against float32 sgemm
// (kernels::gemm, OpenBLAS) in GFLOP/s, the machine's VDPBF16PS and 256- and 512-bit FMA
// peaks per core, measured with independent chains of the instruction, and AMX's TDPBF16PS
// peak where the process may use AMX.
//   bf16_bench [--threads N] [--repeat R]
// A row per shape: M N K, sgemm GFLOP/s and its share of the FMA-512 peak times the
// threads, bf16 GFLOP/s (the VDPBF16PS path where the CPU has it, else the portable one),
// the ratio, bf16's share of the VDPBF16PS peak times the threads, and the AMX path's
// GFLOP/s, its ratio to sgemm and its share of the TDPBF16PS peak times the threads, where
// the process may use AMX.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "ops/kernels/cpu_features.hpp"
#include "ops/kernels/dispatch.hpp"
#include "ops/kernels/gemm.hpp"
#include "ops/kernels/parallel.hpp"

using namespace tapegrad::kernels;

namespace {

template <class F>
double best_seconds(int repeat, F&& f) {
  double best = 1e300;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// The peaks below are compiled for the instructions they time, and run only where the CPU
// has them (an AVX512_BF16 CPU has AVX2 and FMA too). A `target` attribute on a function is
// not inherited by the lambdas and templates it uses, so a baseline build (TAPEGRAD_NATIVE
// off) could not inline the intrinsics into them; a target region covers every function
// defined in it, lambdas and instantiations of its templates included.
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512bf16")

// Twelve independent chains of `step` (a = step(a)) hide the instruction's latency on two
// ports. The chains are indexed by constants (a fold over I...), so they live in registers:
// a loop over an array of accumulators compiled to a load and a store per instruction and
// measured half the FMA peak. Returns the seconds of the best of `repeat` runs.
template <class V, class Step, std::size_t... I>
double chains_seconds(int repeat, long iterations, V start, Step step,
                      std::index_sequence<I...>) {
  V sink = start;
  const double s = best_seconds(repeat, [&] {
    V a[sizeof...(I)] = {(start + float(I))...};  // distinct, or the compiler merges them
    for (long i = 0; i < iterations; ++i) ((a[I] = step(a[I])), ...);
    sink = (a[I] + ...);  // every chain's result is used, so none is dropped
  });
  volatile float keep = reinterpret_cast<const float*>(&sink)[0];
  (void)keep;
  return s;
}
constexpr std::size_t kChains = 12;

// flops: 2 per bf16 product, 32 products and 32 additions per instruction
double vdpbf16ps_peak(int repeat) {
  const long iterations = 20'000'000;
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  const double s = chains_seconds(
      repeat, iterations, _mm512_setzero_ps(),
      [x](__m512 a) { return _mm512_dpbf16_ps(a, x, x); }, std::make_index_sequence<kChains>());
  return double(kChains) * iterations * 64 / s / 1e9;
}

double fma256_peak(int repeat) {
  const long iterations = 20'000'000;
  const __m256 x = _mm256_set1_ps(1.0f), y = _mm256_set1_ps(1e-9f);
  const double s = chains_seconds(
      repeat, iterations, _mm256_setzero_ps(),
      [x, y](__m256 a) { return _mm256_fmadd_ps(x, y, a); }, std::make_index_sequence<kChains>());
  return double(kChains) * iterations * 16 / s / 1e9;
}

double fma512_peak(int repeat) {
  const long iterations = 20'000'000;
  const __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(1e-9f);
  const double s = chains_seconds(
      repeat, iterations, _mm512_setzero_ps(),
      [x, y](__m512 a) { return _mm512_fmadd_ps(x, y, a); }, std::make_index_sequence<kChains>());
  return double(kChains) * iterations * 32 / s / 1e9;
}

#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16")

// Six independent tiles of sums, fed by two resident tiles: 16 x 16 sums of 32 products
// each per instruction, no loads. gemm_bf16's own tiles are the library's business; this
// configuration (eight tiles of 16 rows of 64 bytes) is the same.
double tdpbf16ps_peak(int repeat) {
  struct {
    std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
  } config alignas(64);
  for (int t = 0; t < 8; ++t) config.colsb[t] = 64, config.rows[t] = 16;
  __asm__ volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
  alignas(64) std::uint16_t ones[16 * 32];
  std::fill(std::begin(ones), std::end(ones), std::uint16_t(0x3f80));
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  const long iterations = 2'000'000;
  const double s = best_seconds(repeat, [&] {
    for (long i = 0; i < iterations; ++i) {
      _tile_dpbf16ps(0, 6, 7);
      _tile_dpbf16ps(1, 6, 7);
      _tile_dpbf16ps(2, 6, 7);
      _tile_dpbf16ps(3, 6, 7);
      _tile_dpbf16ps(4, 6, 7);
      _tile_dpbf16ps(5, 6, 7);
    }
  });
  _tile_release();
  return 6.0 * iterations * (16 * 16 * 32 * 2) / s / 1e9;
}

#pragma GCC pop_options

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, repeat = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") threads = std::atoi(argv[i + 1]);
    else if (flag == "--repeat") repeat = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "bf16_bench: unknown option %s (use --threads N, --repeat R)\n", argv[i]);
      return 2;
    }
  }
  if (threads < 1 || repeat < 1) {
    std::fprintf(stderr, "bf16_bench: --threads and --repeat must be at least 1\n");
    return 2;
  }
  set_num_threads(threads);
  const bool fast = cpu_features().avx512_bf16, amx = cpu_features().amx_bf16;
  const double peak = fast ? vdpbf16ps_peak(3) : 0;
  const Bf16Path own = resolve_bf16_path(Bf16Path::automatic);
  std::printf("cpu AVX512_BF16: %s  AMX-BF16: %s  threads %d  bf16 precision's own path here: %s\n",
              fast ? "yes (the VDPBF16PS kernel is timed)" : "no (the portable path is timed)",
              amx ? "yes (timed)" : "no", threads,
              own == Bf16Path::amx           ? "AMX"
              : own == Bf16Path::avx512_bf16 ? "VDPBF16PS"
                                             : "rounded operands, float32 product");
  const double amx_peak = amx ? tdpbf16ps_peak(3) : 0;
  const double fma_peak = fast ? fma512_peak(3) : 0;
  if (fast)
    std::printf("peak per core: VDPBF16PS %.0f GFLOP/s, FMA-256 %.0f GFLOP/s, FMA-512 %.0f GFLOP/s",
                peak, fma256_peak(3), fma_peak);
  if (amx) std::printf(", TDPBF16PS %.0f GFLOP/s", amx_peak);
  if (fast) std::printf("\n");
  std::printf("%6s %6s %6s %12s %9s %12s %7s %9s %10s %9s %9s\n", "M", "N", "K", "sgemm GF/s",
              "sgemm %pk", "bf16 GF/s", "ratio", "% peak", "amx GF/s", "amx/sgemm", "amx %pk");
  const std::size_t shapes[][3] = {{1024, 1024, 1024}, {512, 256, 64}, {512, 64, 256},
                                   {2048, 256, 256}, {2048, 1024, 256}, {256, 2048, 1024}};
  for (const auto& s : shapes) {
    const std::size_t M = s[0], N = s[1], K = s[2];
    std::vector<float> A(M * K, 0.5f), B(K * N, 0.25f), C(M * N);
    const double flops = 2.0 * double(M) * double(N) * double(K);
    const double f32 = best_seconds(repeat, [&] {
      gemm<float>(false, false, M, N, K, 1.0f, A.data(), B.data(), 0.0f, C.data());
    });
    // the kernel itself where the CPU has it (automatic may take the rounded path instead:
    // dispatch.hpp), the portable path elsewhere
    const Bf16Path path = fast ? Bf16Path::avx512_bf16 : Bf16Path::portable;
    const double bf16 = best_seconds(repeat, [&] {
      gemm_bf16(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N, path);
    });
    const double tiles = amx ? best_seconds(repeat, [&] {
      gemm_bf16(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N,
                Bf16Path::amx);
    }) : 0.0;
    std::printf("%6zu %6zu %6zu %12.1f %8.1f%% %12.1f %7.2f %8.1f%% %10.1f %9.2f %8.1f%%\n", M,
                N, K, flops / f32 / 1e9, fast ? 100 * flops / f32 / 1e9 / (fma_peak * threads) : 0.0,
                flops / bf16 / 1e9, f32 / bf16,
                fast ? 100 * flops / bf16 / 1e9 / (peak * threads) : 0.0,
                amx ? flops / tiles / 1e9 : 0.0, amx ? f32 / tiles : 0.0,
                amx ? 100 * flops / tiles / 1e9 / (amx_peak * threads) : 0.0);
  }
}
