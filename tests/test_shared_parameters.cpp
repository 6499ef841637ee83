// Parameters shared by threads, as docs/RELIABILITY.md's threading contract allows: each
// thread records its own graph on its own tape, reading the same leaf (also through a
// non-const handle, which counts as an edit and bumps the leaf's version), and several
// backwards add into the leaf's gradient at once. The results must be those of the same
// work done one thread after another; the ThreadSanitizer stage of the test command runs
// these tests to show there is no data race on the way.
#include <atomic>
#include <cmath>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

constexpr std::size_t kThreads = 4;
constexpr int kRounds = 25;

// loss_t = sum(tanh(x_t @ W)); dloss/dW = x_t^T (1 - tanh(x_t W)^2)
Array<double> expected_gradient(const Array<double>& w, const std::vector<Tensor<double>>& xs) {
  Array<double> total = xt::zeros<double>(w.shape());
  for (const auto& x : xs) {
    const Tensor<double> own_w(Array<double>(w), true);
    sum(tanh(matmul(x, own_w))).backward();
    total += own_w.grad();
  }
  return total;
}

}  // namespace

TEST_CASE("threads: backwards on several threads add into one shared parameter's gradient", "[threads]") {
  Tensor<double> w = random<double>({6, 5}, 1);
  std::vector<Tensor<double>> xs;
  for (std::size_t t = 0; t < kThreads; ++t) xs.push_back(random<double>({3, 6}, 10 + t, false));
  const Array<double> once = expected_gradient(w.value(), xs);

  for (int round = 0; round < kRounds; ++round) {
    w.zero_grad();
    // Catch2's assertions are not thread-safe: each thread records, the main thread checks.
    std::vector<char> value_unchanged(kThreads, 0);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        Tensor<double> shared = w;         // a non-const handle: value() bumps the version
        const double first = shared.value().data()[0];
        Tensor<double> loss = sum(tanh(matmul(xs[t], shared)));
        value_unchanged[t] = shared.value().data()[0] == first;  // read again after the node saved it
        loss.backward();  // the saved value was only read: no "modified in place" error
      });
    for (auto& th : threads) th.join();
    for (std::size_t t = 0; t < kThreads; ++t) CHECK(value_unchanged[t]);
    const Array<double>& g = w.grad();
    double worst = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
      worst = std::max(worst, std::abs(g.data()[i] - once.data()[i]));
    INFO("round " << round << ": max |grad - sum of the threads' gradients| = " << worst);
    REQUIRE(worst <= 1e-12);  // the same sum, added in another order
  }
}

TEST_CASE("threads: an in-place edit of a shared parameter is still caught on every thread", "[threads]") {
  Tensor<double> w = random<double>({4, 4}, 2);
  std::atomic<std::size_t> recorded{0};
  std::atomic<bool> edited{false};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Tensor<double> x = random<double>({2, 4}, 20 + t, false);
      Tensor<double> shared = w;
      Tensor<double> loss = sum(tanh(matmul(x, shared)));
      shared.value();  // a read through a non-const handle, on several threads at once
      ++recorded;
      while (!edited) std::this_thread::yield();
      try {
        loss.backward();  // on the thread whose tape holds the graph
      } catch (const GraphError& e) {
        errors[t] = e.what();
      }
    });
  while (recorded < kThreads) std::this_thread::yield();
  w.value().data()[0] += 1.0;  // a real edit, after every thread's node saved w
  edited = true;
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < kThreads; ++t) {
    INFO("thread " << t << ": " << errors[t]);
    CHECK(errors[t].find("modified in place") != std::string::npos);
  }
}
