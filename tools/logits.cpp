// tools/logits: the logits and the loss a checkpoint gives on a token batch, in float32, so
// that another implementation of the same model (tools/to_torch.py) can be held to them.
//
//   logits --model model.npz --tokens batch.npz --out logits.npz [--threads 1]
//
// batch.npz holds `tokens` and `targets`, both (B, T) int64; logits.npz receives `logits`
// (B, T, vocab) float32 and `loss` (the mean next-token cross-entropy, 0-d float32).
// Exit codes: 0 done; 2 a usage error, an input that does not fit, weights that hold NaN or
// Inf (unless --allow-nonfinite) or not enough memory (one line on stderr, nothing written).
#include <cstdint>
#include <cstdio>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "autograd/tape.hpp"
#include "apps/common/cli.hpp"
#include "apps/common/memory_budget.hpp"
#include "apps/common/model_file.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/transformer.hpp"
#include "ops/threads.hpp"

using namespace tapegrad;

namespace {

constexpr const char* kProgram = "logits";

struct Settings {
  std::string model, tokens, out;
  int threads = 1;
  bool allow_nonfinite = false;
  std::optional<double> max_memory;
};

// The (B, T) int64 entry `name` of the batch file, as the model's index type.
Indices batch_entry(const std::vector<NpzEntry>& entries, const std::string& name,
                    const std::string& path) {
  const NpzEntry* e = find_npz_entry(entries, name);
  if (!e) fail("logits", "{} has no entry '{}' (expected tokens and targets, (B, T) int64)",
               path, name);
  if (e->dtype() != NpzDtype::int64 || e->shape().size() != 2)
    fail("logits", "{}: '{}' is {} {}, expected (B, T) int64", path, name,
         npz_dtype_name(e->dtype()), shape_str(e->shape()));
  const xt::xarray<std::int64_t>& a = e->as<std::int64_t>();
  Indices out = Indices::from_shape({a.shape()[0], a.shape()[1]});
  std::copy(a.begin(), a.end(), out.begin());
  return out;
}

int run(const Settings& s) {
  set_num_threads(s.threads);
  const std::vector<NpzEntry> batch = load_npz(s.tokens);
  const Indices tokens = batch_entry(batch, "tokens", s.tokens);
  const Indices targets = batch_entry(batch, "targets", s.tokens);
  apps::check_memory(apps::inference_memory(read_checkpoint_config(s.model), tokens.shape()[0],
                                                    tokens.shape()[1], 0),
                         s.max_memory, "the model on this batch");
  Transformer<float> model = load_checkpoint<float>(s.model);
  apps::require_finite_parameters(model, "--model " + s.model, s.allow_nonfinite);
  NoGradGuard no_grad;
  const Tensor<float> logits = model.forward(tokens);
  const Tensor<float> loss = model.loss(tokens, targets);
  xt::xarray<float> loss_value = xt::xarray<float>::from_shape(std::vector<std::size_t>{});
  loss_value.data()[0] = loss.value().data()[0];
  save_npz(s.out, {NpzEntry("logits", xt::xarray<float>(logits.value())),
                   NpzEntry("loss", std::move(loss_value))});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  apps::prepare_process();
  Settings s;
  CLI::App app{"Logits and loss of a checkpoint on a token batch (float32)."};
  app.add_option("--model", s.model, "checkpoint written by train_tiny_transformer")
      ->required()->check(CLI::ExistingFile);
  app.add_option("--tokens", s.tokens, ".npz with tokens and targets, (B, T) int64")
      ->required()->check(CLI::ExistingFile);
  app.add_option("--out", s.out, ".npz to write: logits (B, T, vocab) and loss")->required();
  app.add_option("--threads", s.threads, "threads for tapegrad's kernels")
      ->check(CLI::Range(1, 256));
  apps::add_allow_nonfinite_option(app, s.allow_nonfinite);
  apps::add_max_memory_option(app, s.max_memory);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "%s: usage error: %s (see --help)\n", kProgram, e.what());
    return 2;
  }
  try {
    return run(s);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: %s\n", kProgram, apps::out_of_memory_message().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::string what = e.what();
    for (char& c : what)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "%s: %s\n", kProgram, what.c_str());
    return 2;
  }
}
