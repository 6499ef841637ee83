// tools/rss_growth: does memory grow while tapegrad trains? Trains a small Transformer on
// random tokens (forward, backward, clip, AdamW) for --steps steps and reads the
// process's resident set size from /proc/self/status after every step. Reports the peak
// (VmHWM), the mean RSS over the first and the last 100 steps and their difference (the
// growth), the change over the second half of the run, RSS at every tenth of the run, and
// the live tensors and tape nodes at the end. Step 0 (which allocates the optimiser state)
// is excluded from the first window.
//
//   rss_growth [--steps 1000] [--threads 1] [--max-growth-kb N]
//
// Exit codes: 0 done; 1 the growth exceeded --max-growth-kb; 2 a usage error.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "autograd/tape.hpp"
#include "nn/optim.hpp"
#include "nn/transformer.hpp"
#include "ops/threads.hpp"

using namespace tapegrad;

namespace {

// VmRSS and VmHWM (peak) of this process in KiB.
struct Rss {
  long current_kb = 0, peak_kb = 0;
};
Rss read_rss() {
  std::ifstream in("/proc/self/status");
  Rss r;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) r.current_kb = std::stol(line.substr(6));
    if (line.rfind("VmHWM:", 0) == 0) r.peak_kb = std::stol(line.substr(6));
  }
  return r;
}

double mean(const std::vector<long>& v, std::size_t from, std::size_t to) {
  double s = 0;
  for (std::size_t i = from; i < to; ++i) s += static_cast<double>(v[i]);
  return s / static_cast<double>(to - from);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Peak RSS and RSS growth of Transformer training steps (random tokens)."};
  std::size_t steps = 1000, batch = 32, d_model = 64, layers = 2;
  int threads = 1;
  long max_growth_kb = -1;
  app.add_option("--steps", steps, "training steps (at least 200: two windows of 100)")
      ->check(CLI::Range(std::size_t(200), std::size_t(10000000)));
  app.add_option("--threads", threads, "kernel threads (0: all cores)")->check(CLI::Range(0, 256));
  app.add_option("--batch", batch, "sequences of 16 tokens per step")
      ->check(CLI::Range(std::size_t(1), std::size_t(4096)));
  app.add_option("--d-model", d_model, "model width (4 heads)")
      ->check(CLI::Range(std::size_t(4), std::size_t(1024)));
  app.add_option("--layers", layers, "transformer blocks")->check(CLI::Range(std::size_t(1), std::size_t(16)));
  app.add_option("--max-growth-kb", max_growth_kb,
                 "exit 1 if the last 100 steps' mean RSS exceeds the first 100's by more")
      ->check(CLI::Range(0L, 1L << 40));
  try {
    app.parse(argc, argv);
    if (d_model % 4 != 0) throw CLI::ValidationError("--d-model", "must be a multiple of 4 (heads)");
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "rss_growth: %s (see --help)\n", e.what());
    return 2;
  }
  set_num_threads(threads);

  TransformerConfig c;
  c.vocab = 16;
  c.context = 16;
  c.d_model = d_model;
  c.heads = 4;
  c.layers = layers;
  c.mlp_ratio = 4;
  c.seed = 1;
  Transformer<float> model(c);
  AdamW<float> opt(model.parameters(), {1e-3, 0.9, 0.999, 1e-8, 0.01});
  Generator gen(7);
  const Rss start = read_rss();
  std::vector<long> rss(steps);
  double last_loss = 0;
  for (std::size_t step = 0; step < steps; ++step) {
    Indices x = Indices::from_shape({batch, c.context}), y = Indices::from_shape({batch, c.context});
    for (auto& v : x) v = static_cast<std::int64_t>(gen.integer(c.vocab));
    for (auto& v : y) v = static_cast<std::int64_t>(gen.integer(c.vocab));
    opt.zero_grad();
    Tensor<float> loss = model.loss(x, y);
    loss.backward();
    clip_grad_norm(model.parameters(), 1.0);
    opt.step();
    last_loss = loss.item();
    rss[step] = read_rss().current_kb;
  }
  const Rss end = read_rss();
  const double first = mean(rss, 1, 101), last = mean(rss, steps - 100, steps);
  const double growth = last - first;
  std::printf("rss_growth: %zu steps, Transformer d_model %zu, %zu layers, batch %zu x %zu tokens, "
              "%d thread(s), final loss %.4f\n", steps, d_model, layers, batch, c.context,
              num_threads(), last_loss);
  std::printf("  RSS before training   %8ld KiB\n", start.current_kb);
  std::printf("  RSS after step 0      %8ld KiB\n", rss[0]);
  std::printf("  mean RSS, steps 1-100 %8.0f KiB\n", first);
  std::printf("  mean RSS, last 100    %8.0f KiB\n", last);
  std::printf("  growth                %+8.0f KiB (%+.2f%%)\n", growth, 100.0 * growth / first);
  // the heap settles during the first few hundred steps; after that any growth is a leak
  std::printf("  step %zu to the end   %+8ld KiB\n", steps / 2, rss[steps - 1] - rss[steps / 2 - 1]);
  std::printf("  peak RSS (VmHWM)      %8ld KiB\n", end.peak_kb);
  std::printf("  RSS every %zu steps (KiB):", steps / 10);
  for (std::size_t k = 1; k <= 10; ++k) std::printf(" %ld", rss[k * (steps / 10) - 1]);
  std::printf("\n");
  std::printf("  live tensors %ld (parameters %zu), tape nodes %zu\n", live_tensors<float>(),
              model.parameters().size(), Tape<float>::active().size());
  if (max_growth_kb >= 0 && growth > static_cast<double>(max_growth_kb)) {
    std::fprintf(stderr, "rss_growth: RSS grew by %.0f KiB, over --max-growth-kb %ld\n", growth,
                 max_growth_kb);
    return 1;
  }
  return 0;
}
