// nn/generation: the engine behind examples/generate and the trainer's --sample. Greedy
// tokens are checked against argmax of the plain full forward (no cache, no sampler), with
// the context policy re-derived here: stop names the limit; slide re-reads the newest
// context/2 tokens from position 0; a window model goes on.
#include <algorithm>
#include <vector>

#include "helpers.hpp"
#include "autograd/tape.hpp"
#include "nn/generation.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

TransformerConfig model_config() {
  TransformerConfig c = gpt2_preset();
  c.vocab = 9;
  c.context = 8;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 2;
  c.seed = 3;
  return c;
}

// argmax of the full forward's last row over seq[begin, end)
std::int64_t full_argmax(Transformer<double>& model, const std::vector<std::int64_t>& seq,
                         std::size_t begin, std::size_t end) {
  NoGradGuard no_grad;
  Indices t = Indices::from_shape({std::size_t(1), end - begin});
  for (std::size_t i = begin; i < end; ++i) t(0, i - begin) = seq[i];
  const Tensor<double> logits = model.forward(t);
  const std::size_t V = model.config().vocab;
  const double* last = logits.data() + (end - begin - 1) * V;
  return std::max_element(last, last + V) - last;
}

}  // namespace

TEST_CASE("generation: a full-attention model stops at its context", "[generation]") {
  Transformer<double> model(model_config());
  GenerateOptions o;
  o.max_new_tokens = 20;
  o.sampling.temperature = 0;
  Generator gen(1);
  const std::vector<std::int64_t> prompt = {1, 2, 3};
  const GenerateResult r = generate(model, prompt, o, gen);
  CHECK(r.stopped_at_context);
  REQUIRE(r.tokens.size() == 8 + 1 - 3);  // 8 positions, the last one's logits give one more
  std::vector<std::int64_t> seq = prompt;
  for (std::int64_t t : r.tokens) {
    CHECK(t == full_argmax(model, seq, 0, seq.size()));
    seq.push_back(t);
  }
  CHECK(r.cache_bytes == 8 * kv_cache_bytes_per_token(model.config(), sizeof(double)));
}

TEST_CASE("generation: sliding re-reads the newest context/2 tokens, with the cache or without",
          "[generation]") {
  Transformer<double> model(model_config());
  GenerateOptions o;
  o.max_new_tokens = 25;
  o.sampling.temperature = 0;
  o.at_context = AtContext::slide;
  o.prefill_chunk = 3;
  const std::vector<std::int64_t> short_prompt = {4, 0, 7}, long_prompt = {4, 0, 7, 1, 1, 5, 2, 8, 3, 6, 0};
  for (const bool use_cache : {true, false})
    for (const std::vector<std::int64_t>& prompt : {short_prompt, long_prompt}) {
      INFO("use_cache " << use_cache << ", prompt of " << prompt.size());
      o.use_cache = use_cache;
      Generator gen(1);
      const GenerateResult r = generate(model, prompt, o, gen);
      CHECK_FALSE(r.stopped_at_context);
      REQUIRE(r.tokens.size() == 25);
      // the policy, independently: the model reads seq[start, n), a long prompt's last 8
      // first; when that span is the whole context and a token must be fed, the span
      // restarts at the newest context/2 tokens
      std::vector<std::int64_t> seq = prompt;
      std::size_t start = prompt.size() > 8 ? prompt.size() - 8 : 0;
      for (std::int64_t t : r.tokens) {
        CHECK(t == full_argmax(model, seq, start, seq.size()));
        seq.push_back(t);
        if (seq.size() - start > 8) start = seq.size() - 4;
      }
    }
}

TEST_CASE("generation: the engine's errors name generate", "[generation]") {
  Transformer<double> model(model_config());
  Generator gen(1);
  GenerateOptions o;
  require_shape_error([&] { generate(model, {}, o, gen); }, {"generate", "at least one token"});
  require_shape_error([&] { generate(model, std::vector<std::int64_t>(9, 1), o, gen); },
                      {"generate", "9 tokens", "context of 8"});
  o.sampling.top_p = 0;
  require_shape_error([&] { generate(model, {1}, o, gen); }, {"sample", "top-p"});
}
