#pragma once
// Autoregressive generation: prefill the prompt into a KV cache (in chunks), then decode
// one token at a time, each drawn by nn/sampling from the logits of the last position.
// The trainer's --sample and examples/generate both call generate().
//
// At the context limit: a model for which past_context_ok (a sliding window without
// learned positions) keeps going, its caches being rings of `window` positions. Any other
// model stops when the sequence fills its context and the result says so (AtContext::stop,
// the default: the user asked this model for text it cannot condition on its own start,
// and should hear so rather than get it silently). AtContext::slide instead keeps the
// newest context/2 tokens, prefills them again from position 0 and goes on, with the cache
// or without it alike: the trainer's --sample and the generate program use it for samples
// longer than the context.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/sampling.hpp"
#include "nn/transformer.hpp"

namespace tapegrad {

enum class AtContext { stop, slide };

struct GenerateOptions {
  std::size_t max_new_tokens = 0;
  AtContext at_context = AtContext::stop;
  SamplingOptions sampling;
  bool use_cache = true;        // false: recompute the whole sequence per token (quadratic)
  std::size_t prefill_chunk = 0;  // prompt positions per prefill call (0: the context)
  KVDtype kv_dtype = KVDtype::model;  // bf16: half the cache's memory (float32 models)
};

// Of generate's options "top_k", "top_p", "seed", "prefill_chunk" and "kv_dtype", those that
// given(name) says were set and that change nothing under o, in that order, each with what
// it needs: the cuts and the seed need sampling (o is greedy at temperature 0), the cache's
// options need the cache. Programs refuse them, Python warns.
struct InapplicableOption {
  std::string name;
  enum class Needs { sampling, cache } needs;
};
std::vector<InapplicableOption> inapplicable_generate_options(
    const GenerateOptions& o, const std::function<bool(const std::string&)>& given);

struct GenerateResult {
  std::vector<std::int64_t> tokens;  // the new tokens only
  std::size_t prompt_tokens = 0;
  bool stopped_at_context = false;   // fewer than max_new_tokens: the context is full
  double prefill_seconds = 0, decode_seconds = 0;
  std::size_t cache_bytes = 0;       // the KV cache's storage (0 without a cache)
};

// Continues `prompt` (at least one token; ids checked by the model) of batch 1. on_token,
// when given, is called with each new token as soon as it is drawn (for streaming).
// ShapeError "generate: ..." for an empty prompt, a prompt longer than the context of a
// model that cannot pass it, or bad sampling options. Runs under no-grad.
template <class T>
GenerateResult generate(Transformer<T>& model, const std::vector<std::int64_t>& prompt,
                        const GenerateOptions& options, Generator& gen,
                        const std::function<void(std::int64_t)>& on_token = {});

extern template GenerateResult generate(Transformer<float>&, const std::vector<std::int64_t>&,
                                        const GenerateOptions&, Generator&,
                                        const std::function<void(std::int64_t)>&);
extern template GenerateResult generate(Transformer<double>&, const std::vector<std::int64_t>&,
                                        const GenerateOptions&, Generator&,
                                        const std::function<void(std::int64_t)>&);

}  // namespace tapegrad
