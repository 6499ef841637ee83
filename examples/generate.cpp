// examples/generate: loads a checkpoint written by train_tiny_transformer and continues a
// prompt, printing each token as it is produced (stdout, flushed), then one line of
// figures on stderr: prompt tokens, new tokens, prefill and decode tokens/s, KV cache bytes.
//
//   generate --model out/train/model.npz --prompt "To be"            (a text model)
//   generate --model out/sort/model.npz --prompt "5 8 6 4 9 5 2 9"    (a task: the answer)
//
// Text models take the prompt as characters of their vocabulary (empty: a newline); the
// built-in tasks take the input tokens as integers, append the separator and print the
// answer (greedy unless --temperature is given). A model that cannot pass its context
// (anything but a sliding window without learned positions) stops there and says so.
// Exit codes: 0 done, 2 usage error (one line on stderr, nothing on stdout).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "examples/common/cli.hpp"
#include "tasks/tasks.hpp"
#include "nn/checkpoint.hpp"
#include "nn/generation.hpp"
#include "ops/threads.hpp"

using namespace tapegrad;
using namespace tapegrad::tasks;

namespace {

constexpr const char* kProgram = "generate";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Settings {
  std::string model, prompt;
  std::optional<std::size_t> max_new_tokens;
  std::optional<double> temperature;
  long long top_k = 0;
  double top_p = 1.0;
  std::uint64_t seed = 0;
  int threads = 1;
  bool no_cache = false;
  std::size_t prefill_chunk = 0;
};

// What the checkpoint holds besides the weights: the trainer's task and text vocabulary.
struct Loaded {
  TinyGPT<float> model;
  std::string task;                 // "text", "sort", ...; empty: plain token ids
  std::vector<std::uint32_t> vocab;  // text models: the code point of each token id
};

Loaded load(const std::string& path) {
  try {
    Loaded l{load_checkpoint<float>(path), "", {}};
    for (const NpzEntry& e : load_npz(path)) {
      if (!e.holds<std::int64_t>()) continue;
      if (e.name == kTaskKey)
        for (std::int64_t c : e.as<std::int64_t>()) l.task += char(c);
      else if (e.name == kVocabKey)
        for (std::int64_t c : e.as<std::int64_t>()) l.vocab.push_back(std::uint32_t(c));
    }
    if (l.task == "text" && l.vocab.size() != l.model.config().vocab)
      throw UsageError("the text vocabulary has " + std::to_string(l.vocab.size()) +
                       " characters, the model " + std::to_string(l.model.config().vocab));
    return l;
  } catch (const std::exception& e) {
    throw UsageError("--model " + path + ": " + examples::one_line(e.what()));
  }
}

std::string code_point_name(std::uint32_t cp) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "U+%04X", cp);
  return "'" + utf8_encode({cp}) + "' (" + hex + ")";
}

// Characters -> ids; every character must be in the (sorted) vocabulary.
std::vector<std::int64_t> text_prompt(const std::vector<std::uint32_t>& vocab,
                                      const std::string& prompt) {
  std::vector<std::uint32_t> cps = utf8_decode(prompt.empty() ? "\n" : prompt);
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    auto it = std::lower_bound(vocab.begin(), vocab.end(), cps[i]);
    if (it == vocab.end() || *it != cps[i]) {
      if (prompt.empty()) return {0};  // no newline in this vocabulary: start from token 0
      throw UsageError("--prompt: character " + code_point_name(cps[i]) + " at position " +
                       std::to_string(i) + " is not in the model's vocabulary of " +
                       std::to_string(vocab.size()) + " characters");
    }
    ids.push_back(it - vocab.begin());
  }
  return ids;
}

// "5 8 6" -> ids, each an integer in [0, limit).
std::vector<std::int64_t> integer_prompt(const std::string& prompt, std::int64_t limit,
                                         const std::string& what) {
  std::istringstream in(prompt);
  std::vector<std::int64_t> ids;
  std::string word;
  while (in >> word) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || v < 0 || v >= limit)
      throw UsageError("--prompt: token '" + word + "' at position " + std::to_string(ids.size()) +
                       " is not " + what + " (an integer in [0, " + std::to_string(limit) + "))");
    ids.push_back(v);
  }
  return ids;
}

// A task's input tokens, then its separator: the answer is what follows.
std::vector<std::int64_t> task_prompt(const SequenceTask& task, const std::string& prompt) {
  std::vector<std::int64_t> ids = integer_prompt(prompt, task.separator(), "a " + task.name() + " symbol");
  if (ids.size() != task.input_len())
    throw UsageError("--prompt: the " + task.name() + " task needs " +
                     std::to_string(task.input_len()) + " input tokens, got " +
                     std::to_string(ids.size()) + (ids.empty() ? " (an empty prompt)" : ""));
  ids.push_back(task.separator());
  return ids;
}

// How the prompt is read and the tokens printed, by the checkpoint's task.
struct Codec {
  std::vector<std::int64_t> prompt;
  std::size_t default_new_tokens = 0;
  bool greedy_default = false;
  std::function<std::string(std::int64_t, bool first)> show;  // one new token as text
  std::string shown_prompt;
};

Codec make_codec(const Loaded& l, const std::string& prompt) {
  Codec c;
  if (l.task == "text") {
    const TextTask text = TextTask::vocabulary_only(l.vocab, l.model.config().context);
    c.prompt = text_prompt(l.vocab, prompt);
    c.default_new_tokens = 200;
    c.shown_prompt = text.decode(c.prompt);
    c.show = [text](std::int64_t t, bool) { return text.decode({t}); };
  } else if (SequenceTask::known(l.task)) {
    const SequenceTask task = SequenceTask::make(l.task);
    c.prompt = task_prompt(task, prompt);
    c.default_new_tokens = task.answer_len();
    c.greedy_default = true;
    c.shown_prompt = task.format(c.prompt) + " ";
    c.show = [task](std::int64_t t, bool first) { return (first ? "" : " ") + task.format({t}); };
  } else {
    const std::int64_t V = std::int64_t(l.model.config().vocab);
    c.prompt = integer_prompt(prompt, V, "a token id");
    if (c.prompt.empty()) throw UsageError("--prompt: this model needs at least one token id");
    c.default_new_tokens = 16;
    c.shown_prompt = prompt + " ";
    c.show = [](std::int64_t t, bool first) { return (first ? "" : " ") + std::to_string(t); };
  }
  return c;
}

GenerateOptions options_from(const Settings& s, const Codec& codec, const TinyGPT<float>& model) {
  GenerateOptions o;
  o.max_new_tokens = s.max_new_tokens.value_or(codec.default_new_tokens);
  o.sampling.temperature = s.temperature.value_or(codec.greedy_default ? 0.0 : 1.0);
  o.sampling.top_k = std::size_t(s.top_k);
  o.sampling.top_p = s.top_p;
  o.use_cache = !s.no_cache;
  o.prefill_chunk = s.prefill_chunk;
  const TransformerConfig& c = model.config();
  if (codec.prompt.size() > c.context && !past_context_ok(c))
    throw UsageError("--prompt: " + std::to_string(codec.prompt.size()) +
                     " tokens do not fit the model's context of " + std::to_string(c.context));
  return o;
}

void print_summary(const GenerateResult& r, const TransformerConfig& c, bool cached) {
  const double prefill = r.prefill_seconds > 0 ? double(r.prompt_tokens) / r.prefill_seconds : 0;
  // the first new token comes from the prefill's logits: decode runs the others
  const std::size_t steps = r.tokens.size() > 1 ? r.tokens.size() - 1 : 0;
  const double decode = r.decode_seconds > 0 ? double(steps) / r.decode_seconds : 0;
  if (r.stopped_at_context)
    std::fprintf(stderr, "%s: stopped after %zu new tokens: the sequence fills the model's "
                 "context of %zu positions (only a sliding-window model without learned "
                 "positions can go past it)\n", kProgram, r.tokens.size(), c.context);
  std::fprintf(stderr, "%s: prompt %zu tokens, %zu new tokens, prefill %.0f tokens/s, decode "
               "%.0f tokens/s, KV cache %zu bytes (%llu bytes per token)%s\n", kProgram,
               r.prompt_tokens, r.tokens.size(), prefill, decode, r.cache_bytes,
               (unsigned long long)kv_cache_bytes_per_token(c, sizeof(float)),
               cached ? "" : ", --no-cache: recomputed every step");
}

int run(const Settings& s) {
  if (s.top_k < 0) throw UsageError("--top-k must be >= 0 (0: off), got " + std::to_string(s.top_k));
  if (!(s.top_p > 0 && s.top_p <= 1))
    throw UsageError("--top-p must be in (0, 1], got " + std::to_string(s.top_p));
  if (s.temperature && !(*s.temperature >= 0 && std::isfinite(*s.temperature)))
    throw UsageError("--temperature must be a finite number >= 0 (0: greedy), got " +
                     std::to_string(*s.temperature));
  Loaded l = load(s.model);
  const Codec codec = make_codec(l, s.prompt);
  const GenerateOptions o = options_from(s, codec, l.model);
  set_num_threads(s.threads);
  // every check is done: from here on the output streams
  std::fputs(codec.shown_prompt.c_str(), stdout);
  std::fflush(stdout);
  bool first = true;
  Generator gen(s.seed);
  const GenerateResult r = generate(l.model, codec.prompt, o, gen, [&](std::int64_t t) {
    std::fputs(codec.show(t, first).c_str(), stdout);
    std::fflush(stdout);
    first = false;
  });
  std::fputs("\n", stdout);
  std::fflush(stdout);
  print_summary(r, l.model.config(), o.use_cache);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"Continue a prompt with a trained model, streaming the tokens (KV cache).",
               kProgram};
  app.add_option("--model", s.model, "checkpoint written by train_tiny_transformer")->required();
  app.add_option("--prompt", s.prompt,
                 "text (a text model; empty: a newline) or the input tokens of a task "
                 "(\"5 8 6 4 9 5 2 9\")");
  app.add_option("--max-new-tokens", s.max_new_tokens,
                 "tokens to generate (default: 200 for text, the answer's length for a task)")
      ->check(CLI::Range(std::size_t(0), std::size_t(1) << 24));
  app.add_option("--temperature", s.temperature,
                 "softmax temperature, 0 = greedy (default: 1 for text, 0 for a task)");
  app.add_option("--top-k", s.top_k, "keep the k most likely tokens, ties kept (0: off)");
  app.add_option("--top-p", s.top_p, "keep the smallest set whose mass reaches p, in (0, 1]");
  app.add_option("--seed", s.seed, "seed of the draws")->check(examples::unsigned_integer());
  app.add_option("--threads", s.threads, "threads for tapegrad's kernels (0: all cores)")
      ->check(CLI::Range(0, 256));
  app.add_flag("--no-cache", s.no_cache, "recompute the whole sequence per token (quadratic)");
  app.add_option("--prefill-chunk", s.prefill_chunk,
                 "prompt positions per prefill step (0: the context)");
  if (std::optional<int> code = examples::parse_command_line(app, argc, argv, kProgram))
    return *code;
  try {
    return run(s);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: usage error: %s\n", kProgram, e.what());
    return 2;
  }
}
