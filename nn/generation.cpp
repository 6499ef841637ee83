#include "nn/generation.hpp"

#include <algorithm>
#include <chrono>

#include "autograd/tape.hpp"

namespace tapegrad {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Indices row(const std::vector<std::int64_t>& ids, std::size_t begin, std::size_t end) {
  Indices t = Indices::from_shape({std::size_t(1), end - begin});
  for (std::size_t i = begin; i < end; ++i) t(0, i - begin) = ids[i];
  return t;
}

// logits (1, Tn, V): the last position's row
template <class T>
const T* last_row(const Tensor<T>& logits) {
  const std::size_t Tn = logits.shape()[1], V = logits.shape()[2];
  return logits.data() + (Tn - 1) * V;
}

// The number of new tokens the context allows: all of them past_context_ok or sliding;
// else the positions left, plus one: the last new token is drawn from the logits of the
// context's last position and never fed back.
std::size_t new_token_budget(const TransformerConfig& c, const GenerateOptions& o,
                             std::size_t prompt) {
  if (past_context_ok(c) || o.at_context == AtContext::slide) return o.max_new_tokens;
  return std::min(o.max_new_tokens, c.context + 1 - prompt);
}

// True when the model must not see more than its context of positions at once.
bool bounded(const TransformerConfig& c) { return !past_context_ok(c); }

// The tokens a bounded model sees when sliding: seq[start, n). When the previous step's
// view already held `context` tokens, the newest context/2 start a new one, as advance()
// refills the cache, so a run without the cache sees what a run with it sees.
std::size_t slide_start(std::size_t context, std::size_t start, std::size_t n) {
  if (n - 1 - start < context) return start;
  return n - std::max<std::size_t>(context / 2, 1);
}

// The quadratic reference: every step re-runs its view, seq[start, n), from position 0.
// Exact for full attention within the context; for a window model past it (unbounded),
// the last `context` tokens: RoPE's angles are relative and the window sees only the last
// `window` <= context keys, so the logits are the cached run's too.
template <class T>
Tensor<T> recompute(Transformer<T>& model, const std::vector<std::int64_t>& seq,
                    std::size_t& start) {
  const std::size_t C = model.config().context, n = seq.size();
  if (!bounded(model.config())) return model.forward(row(seq, n > C ? n - C : 0, n));
  start = slide_start(C, start, n);
  return model.forward(row(seq, start, n));
}

// Feeds seq[begin, end) into the caches in chunks -> the logits of the last chunk.
template <class T>
Tensor<T> prefill(Transformer<T>& model, KVCacheSet<T>& caches,
                  const std::vector<std::int64_t>& seq, std::size_t begin, std::size_t end,
                  std::size_t chunk) {
  Tensor<T> logits;
  for (std::size_t i = begin; i < end; i += chunk)
    logits = model.forward(row(seq, i, std::min(end, i + chunk)), caches);
  return logits;
}

// The next logits after seq's newest token: fed through the cache; or, when a bounded
// cache is full (sliding), the newest context/2 tokens prefilled again from position 0.
template <class T>
Tensor<T> advance(Transformer<T>& model, KVCacheSet<T>& caches,
                  const std::vector<std::int64_t>& seq, std::size_t chunk) {
  const std::size_t C = model.config().context, n = seq.size();
  if (!bounded(model.config()) || caches.length() < C)
    return model.forward(row(seq, n - 1, n), caches);
  caches.reset();
  return prefill(model, caches, seq, slide_start(C, n - 1 - C, n), n, chunk);
}

}  // namespace

template <class T>
GenerateResult generate(Transformer<T>& model, const std::vector<std::int64_t>& prompt,
                        const GenerateOptions& o, Generator& gen,
                        const std::function<void(std::int64_t)>& on_token) {
  const TransformerConfig& c = model.config();
  check_sampling_options(o.sampling);
  if (prompt.empty()) fail("generate", "the prompt must hold at least one token");
  const bool slide = o.at_context == AtContext::slide;
  if (prompt.size() > c.context && bounded(c) && !slide)
    fail("generate", "the prompt has {} tokens, more than the model's context of {}",
         prompt.size(), c.context);
  NoGradGuard no_grad;
  GenerateResult r;
  r.prompt_tokens = prompt.size();
  const std::size_t budget = new_token_budget(c, o, prompt.size());
  r.stopped_at_context = budget < o.max_new_tokens;
  std::vector<std::int64_t> seq = prompt;
  auto emit = [&](const T* logits) {
    const std::int64_t t = sample_token(logits, c.vocab, o.sampling, gen);
    seq.push_back(t);
    r.tokens.push_back(t);
    if (on_token) on_token(t);
  };
  Clock::time_point t0 = Clock::now();
  const std::size_t first = bounded(c) && prompt.size() > c.context ? prompt.size() - c.context : 0;
  if (!o.use_cache) {
    std::size_t start = first;
    for (std::size_t i = 0; i < budget; ++i) {
      emit(last_row(recompute(model, seq, start)));
      if (i == 0) r.prefill_seconds = seconds_since(t0), t0 = Clock::now();
    }
    r.decode_seconds = budget > 1 ? seconds_since(t0) : 0.0;
    return r;
  }
  // one allocation for every position this run will hold (a window model: a ring)
  std::size_t positions = prompt.size() + (budget ? budget - 1 : 0);
  if (bounded(c)) positions = std::min(positions, c.context);
  KVCacheSet<T> caches(c, 1, positions, o.kv_dtype);
  r.cache_bytes = caches.bytes();
  const std::size_t chunk = o.prefill_chunk ? o.prefill_chunk : c.context;
  Tensor<T> logits = prefill(model, caches, prompt, first, prompt.size(), chunk);
  r.prefill_seconds = seconds_since(t0);
  t0 = Clock::now();
  for (std::size_t i = 0; i < budget; ++i) {
    emit(last_row(logits));
    if (i + 1 < budget) logits = advance(model, caches, seq, chunk);
  }
  r.decode_seconds = seconds_since(t0);
  return r;
}

#define TAPEGRAD_INSTANTIATE(T)                                                              \
  template GenerateResult generate(Transformer<T>&, const std::vector<std::int64_t>&,        \
                                   const GenerateOptions&, Generator&,                       \
                                   const std::function<void(std::int64_t)>&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

std::vector<InapplicableOption> inapplicable_generate_options(
    const GenerateOptions& o, const std::function<bool(const std::string&)>& given) {
  using Needs = InapplicableOption::Needs;
  std::vector<InapplicableOption> found;
  if (o.sampling.temperature == 0)
    for (const char* name : {"top_k", "top_p", "seed"})
      if (given(name)) found.push_back({name, Needs::sampling});
  if (!o.use_cache)
    for (const char* name : {"prefill_chunk", "kv_dtype"})
      if (given(name)) found.push_back({name, Needs::cache});
  return found;
}

}  // namespace tapegrad
