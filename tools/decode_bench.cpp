// tools/decode_bench: decode tokens/s with the KV cache against recomputing the whole
// sequence per token, at several context lengths, for a small decode model (llama preset,
// d_model 256, 4 layers, 8 heads, 2 KV heads, random weights, float); and, with --rss, the
// resident set while a window-256 model generates 4,096 tokens through the engine.
//
//   decode_bench --csv out/decode.csv --svg out/decode.svg   contexts 64, 256, 1024, 4096
//   decode_bench --rss                           RSS at 256, 512, ..., 4096 tokens
//
// Cached: the context is prefilled once, then `--steps` single-token forwards are timed
// (the context grows by that many during the run). Uncached: one forward over context + 1
// tokens per new token, which is what generation without a cache costs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "autograd/tape.hpp"
#include "apps/common/svg_plot.hpp"
#include "nn/generation.hpp"
#include "ops/kernels/parallel.hpp"

using namespace tapegrad;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TransformerConfig bench_config(std::size_t context, std::size_t window) {
  TransformerConfig c = llama_preset();
  c.vocab = 256;
  c.context = context;
  c.d_model = 256;
  c.layers = 4;
  c.heads = 8;
  c.kv_heads = 2;
  c.window = window;
  c.seed = 1;
  return c;
}

Indices random_row(std::size_t n, std::size_t vocab, Generator& gen) {
  Indices t = Indices::from_shape({std::size_t(1), n});
  for (auto& v : t) v = std::int64_t(gen.integer(vocab));
  return t;
}

// Single-token forwards per second after a prefill of `context` tokens.
double cached_rate(Transformer<float>& model, std::size_t context, std::size_t steps) {
  Generator gen(2);
  KVCacheSet<float> caches(model.config(), 1, context + steps);
  model.forward(random_row(context, model.config().vocab, gen), caches);
  const Clock::time_point t0 = Clock::now();
  for (std::size_t i = 0; i < steps; ++i) model.forward(random_row(1, model.config().vocab, gen), caches);
  return double(steps) / since(t0);
}

// New tokens per second when each one re-runs the whole sequence of context + 1 tokens.
double uncached_rate(Transformer<float>& model, std::size_t context, double budget_seconds) {
  Generator gen(3);
  const Indices tokens = random_row(context + 1, model.config().vocab, gen);
  std::size_t reps = 0;
  const Clock::time_point t0 = Clock::now();
  do {
    model.forward(tokens);
    ++reps;
  } while (since(t0) < budget_seconds);
  return double(reps) / since(t0);
}

// Milliseconds per new token against the context, both ways, on log-log axes: a slope of
// 1 is linear growth (the cache), 2 quadratic (recompute).
void write_plot(const std::string& path, const std::vector<double>& contexts,
                const std::vector<double>& cached, const std::vector<double>& uncached) {
  auto ms = [](std::vector<double> rate) {
    for (double& r : rate) r = r > 0 ? 1000.0 / r : 0.0;
    return rate;
  };
  plot::PlotOptions o;
  o.title = "Decode cost per token: llama preset, d_model 256, 4 layers, 8 heads / 2 KV heads";
  o.x_label = "context (tokens)";
  o.y_label = "milliseconds per new token";
  o.x_scale = o.y_scale = plot::Scale::Log;
  plot::LinePlot p(o);
  p.add({"KV cache (one query per step)", contexts, ms(cached), "", false, true});
  p.add({"recompute the whole sequence", contexts, ms(uncached), "", true, true});
  p.write(path);
}

void decode_curves(const std::string& csv, const std::string& svg,
                   const std::vector<std::size_t>& contexts, std::size_t steps, double budget,
                   bool recompute) {
  Transformer<float> model(bench_config(8192, 0));
  std::ofstream out(csv);
  out << "context,cached_tokens_per_s,uncached_tokens_per_s,speedup\n";
  std::printf("%8s %16s %18s %9s\n", "context", "cached tok/s", "recompute tok/s", "speedup");
  std::vector<double> xs, cached_rates, uncached_rates;
  for (std::size_t context : contexts) {
    const double cached = cached_rate(model, context, steps);
    const double uncached = recompute ? uncached_rate(model, context, budget) : 0.0;
    out << context << ',' << cached << ',' << uncached << ',' << cached / uncached << '\n';
    std::printf("%8zu %16.1f %18.2f %8.1fx\n", context, cached, uncached, cached / uncached);
    std::fflush(stdout);
    xs.push_back(double(context));
    cached_rates.push_back(cached);
    uncached_rates.push_back(uncached);
  }
  if (!svg.empty()) write_plot(svg, xs, cached_rates, uncached_rates);
}

long status_kb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string k(key);
  while (std::getline(in, line))
    if (line.rfind(k, 0) == 0) return std::stol(line.substr(k.size()));
  return -1;
}

// Generation through the engine with a window (256 by default; 0: full attention, for
// contrast): VmRSS and VmHWM as it goes.
void rss_run(std::size_t tokens, std::size_t window) {
  Transformer<float> model(bench_config(window ? 512 : tokens + 1, window));
  GenerateOptions o;
  o.max_new_tokens = tokens;
  Generator gen(4);
  std::size_t produced = 0;
  std::printf("%8s %12s %12s\n", "tokens", "VmRSS KiB", "VmHWM KiB");
  generate(model, {1}, o, gen, [&](std::int64_t) {
    ++produced;
    if (produced % 256 == 0)
      std::printf("%8zu %12ld %12ld\n", produced, status_kb("VmRSS:"), status_kb("VmHWM:"));
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"KV-cache decode against recompute, and the RSS of a windowed generation."};
  std::string csv = "decode.csv", svg;
  std::size_t steps = 32, rss_tokens = 4096, rss_window = 256;
  double budget = 2.0;
  int threads = 1;
  bool rss = false, cached_only = false;
  std::vector<std::size_t> contexts = {64, 256, 1024, 4096};
  app.add_option("--contexts", contexts, "context lengths (at most 8000)")->check(CLI::Range(1, 8000));
  app.add_option("--csv", csv, "where the decode curves go");
  app.add_option("--svg", svg, "a log-log plot of the cost per token (none by default)");
  app.add_option("--steps", steps, "timed cached decode steps per context")->check(CLI::Range(1, 100000));
  app.add_option("--seconds", budget, "time spent on each recompute measurement")->check(CLI::Range(0.0, 600.0));
  app.add_option("--threads", threads, "kernel threads")->check(CLI::Range(0, 256));
  app.add_flag("--cached-only", cached_only, "skip the recompute measurement (for profiling)");
  app.add_flag("--rss", rss, "measure RSS of a window-256 generation instead");
  app.add_option("--rss-tokens", rss_tokens, "tokens generated with --rss")->check(CLI::Range(1, 1 << 20));
  app.add_option("--rss-window", rss_window, "the window of the --rss model (0: full attention)")
      ->check(CLI::Range(0, 1 << 20));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string why = e.what();
    std::replace(why.begin(), why.end(), '\n', ' ');
    std::fprintf(stderr, "decode_bench: usage error: %s (see --help)\n", why.c_str());
    return 2;
  }
  if (!rss && !std::ofstream(csv)) {
    std::fprintf(stderr, "decode_bench: usage error: cannot write --csv %s\n", csv.c_str());
    return 2;
  }
  kernels::set_num_threads(threads);
  NoGradGuard no_grad;
  try {
    if (rss) rss_run(rss_tokens, rss_window);
    else decode_curves(csv, svg, contexts, steps, budget, !cached_only);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
