#pragma once
// Independent jobs (training runs) on a few threads: the models are small, so whole runs in
// parallel use the cores better than threads inside one run's small products.
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "ops/precision.hpp"

namespace tapegrad::saturation {

// Calls job(i) for every i in [0, n), `workers` at a time, in the order given by `order`
// (empty: 0..n-1). The first exception stops the remaining jobs and is rethrown here.
// `done(i)` runs after each job, serialised (for progress lines and storing results).
// Every worker multiplies at the caller's matrix-product precision (a per-thread setting).
inline void run_parallel(std::size_t n, int workers, const std::vector<std::size_t>& order,
                         const std::function<void(std::size_t)>& job,
                         const std::function<void(std::size_t)>& done = {}) {
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::exception_ptr error;
  const MatmulPrecision precision = matmul_precision();
  auto worker = [&] {
    MatmulPrecisionGuard same_precision(precision);
    for (;;) {
      const std::size_t k = next.fetch_add(1);
      if (k >= n) return;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (error) return;
      }
      const std::size_t i = order.empty() ? k : order[k];
      try {
        job(i);
        std::lock_guard<std::mutex> lock(mutex);
        if (done) done(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  const int count = std::max(1, std::min<int>(workers, int(n)));
  std::vector<std::thread> threads;
  for (int i = 1; i < count; ++i) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace tapegrad::saturation
