// examples/generate: loads a checkpoint written by train_tiny_transformer and continues a
// prompt, printing each token as it is produced (stdout, flushed), then one line of
// figures on stderr: prompt tokens, new tokens, prefill and decode tokens/s, KV cache bytes.
//
//   generate --model out/train/model.npz --prompt "To be"            (a text model)
//   generate --model out/sort/model.npz --prompt "5 8 6 4 9 5 2 9"    (a task: the answer)
//
// Text models take the prompt as characters of their vocabulary (empty: a newline); the
// built-in tasks take the input tokens as integers, append the separator and print the
// answer (greedy unless --temperature is given). A checkpoint that records no task is read
// as plain token ids, unless its vocab and context are a task's: then --task names how to
// read the prompt. Past the context the window slides, as the trainer's --sample does
// (apps/common/text_prompt.hpp). Weights that hold NaN or Inf are refused unless
// --allow-nonfinite; a run whose memory estimate exceeds the limit is refused before it
// allocates (apps/common/memory_budget.hpp).
// --patterns DIR also writes the attention patterns of the prompt and the new tokens, one SVG
// heat map per layer (apps/common/attention_svg.hpp).
// Exit codes: 0 done, 1 a file that could not be written, 2 usage error or out of memory (one
// line on stderr, nothing on stdout).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/common/attention_svg.hpp"
#include "apps/common/cli.hpp"
#include "apps/common/program_errors.hpp"
#include "apps/common/memory_budget.hpp"
#include "apps/common/model_file.hpp"
#include "apps/common/model_source.hpp"
#include "apps/common/run_options.hpp"
#include "apps/common/text_prompt.hpp"
#include "tasks/tasks.hpp"
#include "nn/io/checkpoint.hpp"
#include "platform/file_io.hpp"
#include "nn/io/pretrained.hpp"
#include "nn/generation.hpp"
#include "ops/threads.hpp"

using namespace tapegrad;
using namespace tapegrad::tasks;

namespace {

constexpr const char* kProgram = "generate";

using apps::UsageError;

// --task tokens: a checkpoint's tokens as plain ids, whatever its sizes.
constexpr const char* kPlainTokens = "tokens";

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
  std::optional<std::string> task;
  bool allow_nonfinite = false;
  std::optional<double> max_memory;
  std::optional<std::string> patterns;  // folder for the attention heat maps
  std::string precision = "f32";
  std::string kv_dtype = "f32";
  std::set<std::string> given;  // the options on the command line (some depend on others)
};

using Loaded = apps::LoadedModel;

Loaded load(const std::string& path) {
  try {
    Loaded l = apps::load_model(path);
    const std::size_t tokens = l.coder ? l.coder->vocab_size() : 0;
    if (l.task == "text" && !is_pretrained_folder(path) && tokens != l.model.config().vocab)
      throw UsageError("the text vocabulary has " + std::to_string(tokens) + " tokens, the model " +
                       std::to_string(l.model.config().vocab));
    return l;
  } catch (const std::exception& e) {
    throw UsageError("--model " + path + ": " + apps::one_line(e.what()));
  }
}

// The task the prompt is read by: the checkpoint's, or --task for a checkpoint that
// records none. A checkpoint without a task whose vocab and context are a built-in task's
// is refused without --task: its prompt could be either, and plain ids would print raw
// tokens where the user expects the task's answer.
std::string resolve_task(const Loaded& l, const std::optional<std::string>& given,
                         const std::string& path) {
  if (given) {
    if (!l.task.empty() && *given != l.task)
      throw apps::disagreement("--task", *given, "the checkpoint's task " + l.task);
    if (*given == l.task) return l.task;
    if (*given != kPlainTokens && !SequenceTask::known(*given))
      throw UsageError("--task " + *given + ": a checkpoint without a text vocabulary reads "
                       "as a built-in task (sort, reverse, recall) or as plain token ids (tokens)");
    return *given == kPlainTokens ? "" : *given;
  }
  if (!l.task.empty()) return l.task;
  const TransformerConfig& c = l.model.config();
  for (const std::string& name : SequenceTask::names()) {
    const SequenceTask task = SequenceTask::make(name);
    if (task.vocab_size() == c.vocab && task.context() == c.context)
      throw UsageError("--model " + path + " records no task, and its vocab " +
                       std::to_string(c.vocab) + " and context " + std::to_string(c.context) +
                       " are the " + name + " task's: give --task " + name + " to read the prompt "
                       "as its input, or --task tokens for plain token ids");
  }
  return "";
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
  std::function<std::string()> finish;  // what show() held back (a character's first bytes)
  std::function<std::string(std::int64_t)> label;  // one token on a heat map's axes
  std::string shown_prompt;
};

Codec make_codec(const Loaded& l, const std::string& task_name, const std::string& prompt) {
  Codec c;
  if (task_name == "text") {
    // a BPE token may end inside a character: shown once the character is whole
    const TextCoder coder = *l.coder;
    const auto stream = std::make_shared<Utf8Stream>();
    c.prompt = apps::encode_text_prompt(coder, prompt);
    c.default_new_tokens = 200;
    c.shown_prompt = stream->push(coder.decode_bytes(c.prompt));
    c.show = [coder, stream](std::int64_t t, bool) { return stream->push(coder.decode_bytes({t})); };
    c.finish = [stream] { return stream->finish(); };
    c.label = [coder](std::int64_t t) { return apps::token_label(coder.decode_bytes({t})); };
  } else if (SequenceTask::known(task_name)) {
    const SequenceTask task = SequenceTask::make(task_name);
    c.prompt = task_prompt(task, prompt);
    c.default_new_tokens = task.answer_len();
    c.greedy_default = true;
    c.shown_prompt = task.format(c.prompt) + " ";
    c.show = [task](std::int64_t t, bool first) { return (first ? "" : " ") + task.format({t}); };
    c.label = [task](std::int64_t t) { return task.format({t}); };
  } else {
    const std::int64_t V = std::int64_t(l.model.config().vocab);
    c.prompt = integer_prompt(prompt, V, "a token id");
    if (c.prompt.empty()) throw UsageError("--prompt: this model needs at least one token id");
    c.default_new_tokens = 16;
    c.shown_prompt = prompt + " ";
    c.show = [](std::int64_t t, bool first) { return (first ? "" : " ") + std::to_string(t); };
  }
  if (!c.label) c.label = [](std::int64_t t) { return std::to_string(t); };
  return c;
}

GenerateOptions options_from(const Settings& s, const Codec& codec, const Transformer<float>& model) {
  GenerateOptions o;
  o.max_new_tokens = s.max_new_tokens.value_or(codec.default_new_tokens);
  o.sampling.temperature = s.temperature.value_or(codec.greedy_default ? 0.0 : 1.0);
  o.sampling.top_k = std::size_t(s.top_k);
  o.sampling.top_p = s.top_p;
  o.use_cache = !s.no_cache;
  o.prefill_chunk = s.prefill_chunk;
  o.kv_dtype = kv_dtype_from_name(s.kv_dtype);
  // options that would change nothing in this run are refused rather than ignored
  const auto unused = inapplicable_generate_options(
      o, [&](const std::string& name) { return s.given.count(apps::option_name(name)) > 0; });
  if (!unused.empty()) {
    const std::string option = apps::option_name(unused.front().name);
    if (unused.front().needs == InapplicableOption::Needs::cache)
      throw UsageError(option + " applies to the KV cache only, not --no-cache");
    throw UsageError(option + " applies to sampling only, and this run is greedy (" +
                     (s.temperature ? "--temperature 0"
                                    : "a task's default: give --temperature > 0 to sample") + ")");
  }
  o.at_context = apps::kAtContext;
  apps::require_prompt_fits(codec.prompt.size(), model.config());
  return o;
}

// The model, its KV cache (the positions this run holds: a window model's ring, else at
// most the context) and one forward pass's activations: a prefill chunk with the cache, the
// whole sequence without it.
apps::MemoryNeed generation_memory(const TransformerConfig& c, const GenerateOptions& o,
                                       std::size_t prompt) {
  const std::size_t held = std::min<std::size_t>(prompt + o.max_new_tokens, c.context);
  std::size_t cached = 0, chunk = held;
  if (o.use_cache) {
    cached = past_context_ok(c) ? std::min(c.window, held) : held;
    chunk = std::min(o.prefill_chunk ? o.prefill_chunk : c.context, held);
  }
  return apps::inference_memory(c, 1, std::max<std::size_t>(chunk, 1), cached,
                                    kv_value_bytes<float>(o.kv_dtype));
}

void print_summary(const GenerateResult& r, const TransformerConfig& c, const GenerateOptions& o) {
  const double prefill = r.prefill_seconds > 0 ? double(r.prompt_tokens) / r.prefill_seconds : 0;
  // the first new token comes from the prefill's logits: decode runs the others
  const std::size_t steps = r.tokens.size() > 1 ? r.tokens.size() - 1 : 0;
  const double decode = r.decode_seconds > 0 ? double(steps) / r.decode_seconds : 0;
  std::fprintf(stderr, "%s: prompt %zu tokens, %zu new tokens, prefill %.0f tokens/s, decode "
               "%.0f tokens/s, KV cache %zu bytes (%llu bytes per token)%s\n", kProgram,
               r.prompt_tokens, r.tokens.size(), prefill, decode, r.cache_bytes,
               (unsigned long long)kv_cache_bytes_per_token(c, kv_value_bytes<float>(o.kv_dtype)),
               o.use_cache ? "" : ", --no-cache: recomputed every step");
}

// --patterns DIR: the attention patterns of the prompt and the new tokens (the last
// `context` of them), one SVG per layer, layer<l>.svg.
void write_patterns(const std::string& dir, Transformer<float>& model, const Codec& codec,
                    const std::vector<std::int64_t>& generated) {
  std::vector<std::int64_t> tokens = codec.prompt;
  tokens.insert(tokens.end(), generated.begin(), generated.end());
  const std::size_t context = model.config().context;
  if (tokens.size() > context) tokens.erase(tokens.begin(), tokens.end() - std::ptrdiff_t(context));
  std::vector<std::string> labels;
  for (std::int64_t t : tokens) labels.push_back(codec.label(t));
  const std::vector<std::string> svgs = apps::attention_pattern_svgs(model, tokens, labels);
  for (std::size_t l = 0; l < svgs.size(); ++l) {
    const std::string path = (std::filesystem::path(dir) / ("layer" + std::to_string(l) + ".svg")).string();
    detail::write_file_atomically(path, svgs[l], "--patterns " + path);
  }
  std::fprintf(stderr, "%s: attention patterns of %zu tokens, %zu layers: %s/layer<l>.svg\n",
               kProgram, tokens.size(), svgs.size(), dir.c_str());
}

int run(const Settings& s) {
  if (s.top_k < 0) throw UsageError("--top-k must be >= 0 (0: off), got " + std::to_string(s.top_k));
  if (!(s.top_p > 0 && s.top_p <= 1))
    throw UsageError("--top-p must be in (0, 1], got " + std::to_string(s.top_p));
  if (s.temperature && !(*s.temperature >= 0 && std::isfinite(*s.temperature)))
    throw UsageError("--temperature must be a finite number >= 0 (0: greedy), got " +
                     std::to_string(*s.temperature));
  Loaded l = load(s.model);
  apps::require_finite_parameters(l.model, "--model " + s.model, s.allow_nonfinite);
  const Codec codec = make_codec(l, resolve_task(l, s.task, s.model), s.prompt);
  const GenerateOptions o = options_from(s, codec, l.model);
  apps::check_memory(generation_memory(l.model.config(), o, codec.prompt.size()), s.max_memory,
                         "this generation");
  if (s.patterns) apps::prepare_out_dir(*s.patterns, "--patterns");
  set_num_threads(s.threads);
  apps::use_precision(s.precision);
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
  if (codec.finish) std::fputs(codec.finish().c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);
  print_summary(r, l.model.config(), o);
  if (s.patterns) write_patterns(*s.patterns, l.model, codec, r.tokens);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  apps::prepare_process();
  Settings s;
  CLI::App app{"Continue a prompt with a trained model, streaming the tokens (KV cache).",
               kProgram};
  app.add_option("--model", s.model, "checkpoint written by train_tiny_transformer, or a Hugging Face model folder "
                 "(config.json, model.safetensors, tokenizer.json)")->required();
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
  app.add_option("--seed", s.seed, "seed of the draws")->check(apps::unsigned_integer());
  app.add_option("--threads", s.threads, "threads for tapegrad's kernels (0: all cores)")
      ->check(CLI::Range(0, 256));
  app.add_flag("--no-cache", s.no_cache, "recompute the whole sequence per token (quadratic)");
  app.add_option("--prefill-chunk", s.prefill_chunk,
                 "prompt positions per prefill step (0: the context)")
      ->check(apps::unsigned_integer());
  app.add_option("--task", s.task, "how to read the prompt of a checkpoint that records no task: "
                 "sort, reverse, recall (the task's input tokens) or tokens (plain token ids); "
                 "must agree with a task the checkpoint records");
  app.add_option("--patterns", s.patterns,
                 "also write the attention patterns of the prompt and the new tokens to this "
                 "folder, one SVG heat map per layer (heads side by side)");
  apps::add_precision_option(app, s.precision);
  app.add_option("--kv-dtype", s.kv_dtype, "what the KV cache stores: f32, or bf16 (keys and "
                 "values rounded to bfloat16: half the memory per token)")
      ->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  apps::add_allow_nonfinite_option(app, s.allow_nonfinite);
  apps::add_max_memory_option(app, s.max_memory);
  if (std::optional<int> code = apps::parse_command_line(app, argc, argv, kProgram))
    return *code;
  s.given = apps::given_options(app);
  return apps::run_reporting_errors(kProgram, [&] { return run(s); });
}
