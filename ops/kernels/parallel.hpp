#pragma once
// The kernels' threads: a small pool whose idle workers poll for new work for 20 us, then
// sleep on a condition variable. OpenMP's default is to spin-wait between parallel regions
// for far longer; on a shared 2-core machine a spinning worker steals the core the next
// region needs, and a step became 12x slower at two threads under load. A sleeping worker
// costs a wake-up (~10 us) per region instead, so only work worth more than that is split.
#include <cstddef>
#include <functional>

namespace tapegrad::kernels {

// Threads used by tapegrad's kernels; 0 means all cores. OpenBLAS is kept at one thread:
// tapegrad splits work over heads, batch items and blocks of a large gemm itself, so two
// thread pools never compete for the cores.
void set_num_threads(int threads);
int num_threads();

// Calls body(i) for i in [0, n), spread over the pool (the caller works too). Runs
// serially with one thread, for n <= 1, or when called from inside another parallel_for.
// Bodies must write disjoint memory and must not throw.
void parallel_for(std::size_t n, const std::function<void(std::size_t)>& body);

// Splits [0, n) into one block per thread, each a multiple of `granule` long (the last may
// be shorter or empty ones skipped), and calls body(begin, end) on every block through
// parallel_for: the one way a range is cut into per-thread blocks.
void parallel_blocks(std::size_t n, std::size_t granule,
                     const std::function<void(std::size_t, std::size_t)>& body);

// parallel_for(n, body) when `flops` of work is worth waking the pool (a wake-up costs about
// 10 us, some 1e5-1e6 flops), a plain loop otherwise: the one place that rule is written.
// Which thread runs a task never changes what it computes.
template <class F>
void parallel_for_if_worth(std::size_t n, double flops, F&& body, double worth = 1.0e6) {
  if (flops < worth) {
    for (std::size_t p = 0; p < n; ++p) body(p);
  } else {
    parallel_for(n, body);
  }
}

// parallel_blocks(n, granule, body) when touching `elements` numbers is worth waking the pool
// (a wake-up is worth some 6e4 numbers read and written), body(0, n) otherwise. For the
// elementwise and row-wise kernels, whose cost is memory traffic rather than flops.
template <class F>
void parallel_blocks_if_worth(std::size_t n, std::size_t granule, std::size_t elements,
                              F&& body) {
  constexpr std::size_t kWorthElements = std::size_t(1) << 16;
  if (elements < kWorthElements || num_threads() <= 1) {
    body(std::size_t(0), n);
  } else {
    parallel_blocks(n, granule, body);
  }
}

}  // namespace tapegrad::kernels
