// flash_bench: one attention fwd+bwd (B 1, heads 8, head_dim 32, causal, float) on one path
// at one length, timed, then the process's peak RSS. One configuration per process, so the
// peak RSS is that configuration's own (run it once per path and T).
//   flash_bench <flash|fused> <T> [repeats=3] [threads=0: all cores]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "autograd/tensor.hpp"
#include "ops/attention.hpp"
#include "ops/elementwise.hpp"
#include "ops/kernels/parallel.hpp"
#include "ops/reduce.hpp"

using namespace tapegrad;

namespace {
double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // Linux: KiB
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: flash_bench <flash|fused> <T> [repeats] [threads]\n");
    return 2;
  }
  const std::string name = argv[1];
  const AttentionPath path = name == "flash" ? AttentionPath::flash : AttentionPath::fused;
  const std::size_t T = std::stoul(argv[2]), H = 8, dh = 32;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  kernels::set_num_threads(argc > 4 ? std::atoi(argv[4]) : 0);
  AttentionSpec spec;
  spec.heads = H;
  spec.causal = true;
  Generator gen(1);
  auto leaf = [&] { return Tensor<float>(Tensor<float>::randn({1, T, H * dh}, gen).value(), true); };
  Tensor<float> q = leaf(), k = leaf(), v = leaf();
  const Tensor<float> g = Tensor<float>::randn({1, T, H * dh}, gen);
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    q.zero_grad(), k.zero_grad(), v.zero_grad();
    const auto t0 = std::chrono::steady_clock::now();
    sum(attention(q, k, v, spec, path).out * g).backward();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  // useful work: the standard path's 6 products (q k^T and p v forward; dp, dv, dq, dk
  // backward), 2 T^2 dh flops each per head, causal half only. Flash does 9 (it recomputes
  // q k^T and dp in each of its two backward passes); that extra work is not counted.
  const double flops = 6.0 * 2.0 * double(H) * double(T) * double(T) * double(dh) / 2.0;
  std::printf("%s T=%zu threads=%d best_of_%d=%.4f s  %.2f GFLOP/s useful  peak_rss=%.1f MiB\n",
              name.c_str(), T, kernels::num_threads(), repeats, best, flops / best * 1e-9,
              peak_rss_mib());
  return 0;
}
