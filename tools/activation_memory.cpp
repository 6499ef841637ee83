// tools/activation_memory: what a training step of a GPT-2-shaped Transformer holds in
// tensors, with and without activation checkpointing (checkpoint_activations) and the
// chunked head, at several layer counts. For each configuration one step on random tokens
// (the loss forward, then backward) and, from autograd/memory's tensor byte counters:
//   kept      the tensors alive after the forward beyond the model's parameters: what the
//             tape keeps for the backward (the activations);
//   peak      the most tensor storage alive at once during forward and backward, beyond
//             the parameters (the activations plus the gradients and the backward's
//             temporaries);
//   peak - grads  the same less the parameters' gradients (as large as the parameters,
//             whatever the step keeps);
// and the step's wall time. The weights are GPT-2 small's shapes by default (width 768,
// 12 heads, vocabulary 50,257, tied head), the tokens a batch of 4 x 256; the chunked head
// takes 256 rows at a time.
//
//   activation_memory [--layers 1,4,12] [--batch 4] [--tokens 256] [--d-model 768]
//                     [--heads 12] [--vocab 50257] [--threads 1]
//
// Exit codes: 0 done; 2 a usage error.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "autograd/memory.hpp"
#include "autograd/tape.hpp"
#include "nn/transformer.hpp"
#include "ops/threads.hpp"

using namespace tapegrad;

namespace {

struct Measured {
  double kept = 0, peak = 0, grads = 0, seconds = 0;
};

Measured measure(const TransformerConfig& c, std::size_t batch, std::size_t tokens,
                 std::optional<std::size_t> chunk_rows) {
  Transformer<float> model(c);
  Generator gen(3);
  Indices x = Indices::from_shape({batch, tokens}), y = Indices::from_shape({batch, tokens});
  for (auto& v : x) v = static_cast<std::int64_t>(gen.integer(c.vocab));
  for (auto& v : y) v = static_cast<std::int64_t>(gen.integer(c.vocab));
  const double base = double(tensor_bytes_in_use());
  reset_peak_tensor_bytes();
  const auto start = std::chrono::steady_clock::now();
  Measured m;
  {
    Tensor<float> loss = model.loss(x, y, -100, chunk_rows);
    m.kept = double(tensor_bytes_in_use()) - base;
    loss.backward();
  }
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.peak = double(peak_tensor_bytes()) - base;
  m.grads = double(model.parameter_count()) * sizeof(float);
  return m;
}

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tensor memory of one Transformer training step, with and without activation "
               "checkpointing and the chunked head, at several layer counts."};
  std::vector<std::size_t> layers = {1, 4, 12};
  std::size_t batch = 4, tokens = 256, d_model = 768, heads = 12, vocab = 50257;
  int threads = 1;
  app.add_option("--layers", layers, "layer counts to measure")->delimiter(',')
      ->check(CLI::Range(std::size_t(1), std::size_t(96)));
  app.add_option("--batch", batch, "sequences")->check(CLI::Range(std::size_t(1), std::size_t(64)));
  app.add_option("--tokens", tokens, "tokens per sequence (the context)")
      ->check(CLI::Range(std::size_t(1), std::size_t(8192)));
  app.add_option("--d-model", d_model, "model width")->check(CLI::Range(std::size_t(8), std::size_t(4096)));
  app.add_option("--heads", heads, "heads (must divide --d-model)")
      ->check(CLI::Range(std::size_t(1), std::size_t(64)));
  app.add_option("--vocab", vocab, "vocabulary")->check(CLI::Range(std::size_t(2), std::size_t(1 << 20)));
  app.add_option("--threads", threads, "kernel threads (0: all cores)")->check(CLI::Range(0, 256));
  try {
    app.parse(argc, argv);
    if (d_model % heads != 0) throw CLI::ValidationError("--heads", "must divide --d-model");
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "activation_memory: %s (see --help)\n", e.what());
    return 2;
  }
  set_num_threads(threads);
  std::printf("activation_memory: width %zu, %zu heads, vocabulary %zu, batch %zu x %zu tokens, "
              "float32, %d thread(s); MiB of tensors beyond the parameters\n", d_model, heads,
              vocab, batch, tokens, threads);
  std::printf("%6s  %-13s  %-9s  %10s  %10s  %13s  %8s\n", "layers", "checkpointed", "head",
              "kept", "peak", "peak - grads", "seconds");
  const double block_input = double(batch * tokens * d_model * sizeof(float));
  for (std::size_t L : layers) {
    TransformerConfig c = gpt2_preset();
    c.vocab = vocab;
    c.context = tokens;
    c.d_model = d_model;
    c.heads = heads;
    c.layers = L;
    c.tie_embeddings = true;  // as GPT-2
    c.seed = 1;
    for (bool checkpointed : {false, true})
      for (bool chunked : {false, true}) {
        c.checkpoint_activations = checkpointed;
        c.validate();
        const Measured m = measure(c, batch, tokens,
                                   chunked ? std::optional<std::size_t>(256) : std::optional<std::size_t>(0));
        std::printf("%6zu  %-13s  %-9s  %10.1f  %10.1f  %13.1f  %8.2f\n", L,
                    checkpointed ? "yes" : "no", chunked ? "chunked" : "whole", mib(m.kept),
                    mib(m.peak), mib(m.peak - m.grads), m.seconds);
        std::fflush(stdout);
      }
  }
  std::printf("a block's input is %.2f MiB\n", mib(block_input));
  return 0;
}
