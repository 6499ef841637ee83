#include "ops/kernels/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <cblas.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // _mm_pause
#endif

#include "platform/execution.hpp"  // the caller's settings, which the workers take

namespace tapegrad::kernels {

namespace {

thread_local bool tl_inside_parallel = false;

// Between two parallel regions of a step the caller often works alone for only a few
// microseconds, and waking a sleeping worker through the kernel (a futex) costs about as
// much as the region saves. So a worker that finishes polls for the next region for a
// short while (kPollFor) before it sleeps, and the caller polls as long for the workers to
// finish a region. Unlike OpenMP's default of spinning for up to a fifth of a second, the
// poll is short: a thread idle for longer sleeps and leaves the core to whatever else runs
// on the machine.
constexpr auto kPollFor = std::chrono::microseconds(20);

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_.store(true);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(std::size_t n, const std::function<void(std::size_t)>& body) {
    bool anyone_asleep;
    {
      // under the lock: a worker going to sleep checks the generation under it too, so it
      // either sees this region or is counted as asleep and woken
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      settings_ = thread_settings();  // the workers compute as the caller would
      n_ = n;
      next_.store(0, std::memory_order_relaxed);
      busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
      anyone_asleep = asleep_ > 0;
    }
    if (anyone_asleep) wake_.notify_all();
    drain();
    if (!poll_until([this] { return busy_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      caller_asleep_ = true;
      done_.wait(lock, [this] { return busy_.load(std::memory_order_acquire) == 0; });
      caller_asleep_ = false;
    }
    body_ = nullptr;
  }

 private:
  void drain() {
    tl_inside_parallel = true;
    const ThreadSettings own = thread_settings();
    set_thread_settings(settings_);
    for (std::size_t i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) (*body_)(i);
    set_thread_settings(own);
    tl_inside_parallel = false;
  }

  // Polls `ready` for kPollFor; false if it is still not true.
  template <class Ready>
  static bool poll_until(const Ready& ready) {
    const auto until = std::chrono::steady_clock::now() + kPollFor;
    for (int polls = 1;; ++polls) {
      if (ready()) return true;
      if (polls % 64 == 0 && std::chrono::steady_clock::now() > until) return false;
      relax();
    }
  }

  // Waits for a generation other than `seen`: polls, then sleeps.
  std::size_t next_generation(std::size_t seen) {
    const auto moved = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!poll_until(moved)) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++asleep_;
      wake_.wait(lock, moved);
      --asleep_;
    }
    return generation_.load(std::memory_order_acquire);
  }

  void work() {
    for (std::size_t seen = 0;;) {
      seen = next_generation(seen);
      if (stop_.load()) return;
      drain();
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // the last worker out: the caller may have stopped polling and gone to sleep
        std::lock_guard<std::mutex> lock(mutex_);
        if (caller_asleep_) done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t)>* body_ = nullptr;
  ThreadSettings settings_;  // the caller's, for the region under way
  std::size_t n_ = 0;
  std::atomic<std::size_t> next_{0};
  std::atomic<int> busy_{0};
  std::atomic<std::size_t> generation_{0};
  int asleep_ = 0;              // workers waiting on wake_, under mutex_
  bool caller_asleep_ = false;  // the caller waiting on done_, under mutex_
  std::atomic<bool> stop_{false};
};

std::unique_ptr<Pool>& pool() {
  static std::unique_ptr<Pool> p;
  return p;
}
int g_threads = 1;

struct SingleThreadedBlas {
  SingleThreadedBlas() { openblas_set_num_threads(1); }
} g_single_threaded_blas;

}  // namespace

void set_num_threads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (threads == g_threads && (threads == 1 || pool())) return;
  g_threads = threads;
  pool().reset();
  if (threads > 1) pool() = std::make_unique<Pool>(threads);
}

int num_threads() { return g_threads; }

void parallel_for(std::size_t n, const std::function<void(std::size_t)>& body) {
  if (g_threads <= 1 || n <= 1 || tl_inside_parallel || !pool()) {
    for (std::size_t i = 0; i < n; ++i) body(i);
    return;
  }
  pool()->run(n, body);
}

void parallel_blocks(std::size_t n, std::size_t granule,
                     const std::function<void(std::size_t, std::size_t)>& body) {
  const std::size_t threads = static_cast<std::size_t>(std::max(1, g_threads));
  const std::size_t block = ((n + threads - 1) / threads + granule - 1) / granule * granule;
  parallel_for(threads, [&](std::size_t t) {
    const std::size_t begin = std::min(n, t * block), end = std::min(n, begin + block);
    if (begin < end) body(begin, end);
  });
}

}  // namespace tapegrad::kernels
