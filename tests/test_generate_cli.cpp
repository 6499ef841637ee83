// examples/generate end to end, on checkpoints written here (random weights, so the test
// needs no training): the tokens it prints are the ones greedy decoding by the plain full
// forward picks (an independent path: no cache, no sampler); --no-cache prints the same;
// the same seed the same text; past the context a full-attention model slides and a window
// model keeps going; every misuse exits 2 with one line and writes nothing.
#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_GENERATE_BIN)
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <xtensor/xadapt.hpp>

#include "autograd/tape.hpp"
#include "tasks/evaluate.hpp"
#include "tasks/tasks.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/generation.hpp"
#include "ops/precision.hpp"
#include "run_program.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::tasks;

namespace {

using tapegrad::test::ProgramRun;
fs::path scratch(const std::string& name) {
  return tapegrad::test::scratch_dir("test_generate_cli", name);
}
ProgramRun run(const std::string& args, const fs::path& dir) {
  return tapegrad::test::run_program(TAPEGRAD_GENERATE_BIN, args, dir);
}

// A checkpoint as the trainer writes it: the config, the task, a text vocabulary.
void write_checkpoint(const fs::path& path, const Transformer<float>& model, const std::string& task,
                      const std::vector<std::uint32_t>& vocab = {}) {
  std::vector<NpzEntry> extra = config_entries(model.config());
  std::vector<std::int64_t> name(task.begin(), task.end());
  extra.emplace_back(kTaskKey, xt::xarray<std::int64_t>(xt::adapt(name, {name.size()})));
  if (!vocab.empty()) {
    std::vector<std::int64_t> cps(vocab.begin(), vocab.end());
    extra.emplace_back(kVocabKey, xt::xarray<std::int64_t>(xt::adapt(cps, {cps.size()})));
  }
  save_parameters(path.string(), model, extra);
}

const std::vector<std::uint32_t> kLetters = {'\n', ' ', 'a', 'b', 'c', 'd', 'e', 'h', 'l', 'o'};

TransformerConfig text_config(std::size_t context, std::size_t window) {
  TransformerConfig c = window ? llama_preset() : gpt2_preset();
  c.vocab = kLetters.size();
  c.context = context;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 2;
  c.window = window;
  c.seed = 4;
  return c;
}

// Greedy continuation by the full forward of the whole sequence, one token at a time.
std::vector<std::int64_t> full_forward_greedy(Transformer<float>& model, std::vector<std::int64_t> seq,
                                              std::size_t n) {
  NoGradGuard no_grad;
  const std::size_t V = model.config().vocab, start = seq.size();
  for (std::size_t i = 0; i < n; ++i) {
    Indices t = Indices::from_shape({std::size_t(1), seq.size()});
    for (std::size_t j = 0; j < seq.size(); ++j) t(0, j) = seq[j];
    const Tensor<float> logits = model.forward(t);
    const float* last = logits.data() + (seq.size() - 1) * V;
    seq.push_back(std::max_element(last, last + V) - last);
  }
  return std::vector<std::int64_t>(seq.begin() + std::ptrdiff_t(start), seq.end());
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

TEST_CASE("generate cli: a task model prints the answer greedy decoding gives", "[cli][generate]") {
  const fs::path dir = scratch("sort");
  const SequenceTask task = SequenceTask::make("sort");
  TransformerConfig c = gpt2_preset();
  c.vocab = task.vocab_size();
  c.context = task.context();
  c.d_model = 16;
  c.heads = 2;
  c.layers = 2;
  c.seed = 11;
  Transformer<float> model(c);
  write_checkpoint(dir / "model.npz", model, "sort");
  const Example ex{{5, 8, 6, 4, 9, 5, 2, 9}, {}};
  const std::vector<std::int64_t> want = greedy_answers(model, task, {ex})[0];
  for (const char* cache : {"", " --no-cache"}) {
    INFO(cache);
    const ProgramRun r = run("--model '" + (dir / "model.npz").string() +
                             "' --prompt '5 8 6 4 9 5 2 9'" + cache, dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out == "5 8 6 4 9 5 2 9 | " + task.format(want) + "\n");
    CHECK(r.err.find("prompt 9 tokens, 8 new tokens") != std::string::npos);
    CHECK(r.err.find("bytes per token") != std::string::npos);
  }
}

TEST_CASE("generate cli: text at temperature 0 is the full forward's greedy text", "[cli][generate]") {
  const fs::path dir = scratch("text");
  Transformer<float> model(text_config(32, 0));
  write_checkpoint(dir / "model.npz", model, "text", kLetters);
  const TextTask text = TextTask::vocabulary_only(TextCoder::characters(kLetters), 32);
  const std::vector<std::int64_t> prompt = text.encode("hello");
  const std::string want = "hello" + text.decode(full_forward_greedy(model, prompt, 20)) + "\n";
  const std::string m = "--model '" + (dir / "model.npz").string() + "' --prompt hello";
  for (const char* extra : {"", " --no-cache", " --prefill-chunk 2"}) {
    INFO(extra);
    const ProgramRun r = run(m + " --temperature 0 --max-new-tokens 20" + extra, dir);
    CHECK(r.code == 0);
    CHECK(r.out == want);
  }
  // sampled: the same seed the same text, with or without the cache
  const ProgramRun a = run(m + " --seed 5 --top-k 4 --top-p 0.9 --max-new-tokens 20", dir);
  const ProgramRun b = run(m + " --seed 5 --top-k 4 --top-p 0.9 --max-new-tokens 20 --no-cache", dir);
  CHECK(a.code == 0);
  CHECK(a.out == b.out);
  CHECK(a.out.size() == want.size());
}

TEST_CASE("generate cli: --precision bf16 is the full forward's greedy text under bf16 products", "[cli][generate][bf16]") {
  const fs::path dir = scratch("bf16");
  const TextTask text = TextTask::vocabulary_only(TextCoder::characters(kLetters), 32);
  const std::vector<std::int64_t> prompt = text.encode("hello");
  // the first initialisation whose greedy text the rounding changes: a run that ignored
  // --precision would print the f32 text
  std::string f32, bf16;
  TransformerConfig c = text_config(32, 0);
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    c.seed = seed;
    Transformer<float> model(c);
    f32 = "hello" + text.decode(full_forward_greedy(model, prompt, 24)) + "\n";
    MatmulPrecisionGuard guard(MatmulPrecision::bf16);
    bf16 = "hello" + text.decode(full_forward_greedy(model, prompt, 24)) + "\n";
    if (bf16 != f32) break;
  }
  REQUIRE(bf16 != f32);
  write_checkpoint(dir / "model.npz", Transformer<float>(c), "text", kLetters);
  const ProgramRun r = run("--model '" + (dir / "model.npz").string() + "' --prompt hello "
                           "--temperature 0 --max-new-tokens 24 --no-cache --precision bf16", dir);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out == bf16);
}

TEST_CASE("generate cli: --kv-dtype bf16 halves the cache and decodes as the library's bf16 cache", "[cli][generate][bf16]") {
  const fs::path dir = scratch("kv_bf16");
  Transformer<float> model(text_config(32, 0));
  write_checkpoint(dir / "model.npz", model, "text", kLetters);
  const TextTask text = TextTask::vocabulary_only(TextCoder::characters(kLetters), 32);
  GenerateOptions o;
  o.max_new_tokens = 20;
  o.sampling.temperature = 0;
  o.kv_dtype = KVDtype::bf16;
  Generator gen(0);
  const std::string want = "hello" + text.decode(generate(model, text.encode("hello"), o, gen).tokens) + "\n";
  const std::string m = "--model '" + (dir / "model.npz").string() + "' --prompt hello "
                        "--temperature 0 --max-new-tokens 20";
  const ProgramRun f32 = run(m, dir), bf16 = run(m + " --kv-dtype bf16", dir);
  INFO(bf16.err);
  REQUIRE(bf16.code == 0);
  CHECK(bf16.out == want);
  // 24 positions held: 2 x 2 layers x 2 heads x 8 x (4 or 2) bytes per position
  const std::uint64_t per_token = kv_cache_bytes_per_token(model.config(), 4);
  REQUIRE(per_token == 256);
  CHECK(f32.err.find("KV cache 6144 bytes (256 bytes per token)") != std::string::npos);
  CHECK(bf16.err.find("KV cache 3072 bytes (128 bytes per token)") != std::string::npos);
}

TEST_CASE("generate cli: full attention slides past the context, a window model goes on", "[cli][generate]") {
  const fs::path dir = scratch("context");
  Transformer<float> full(text_config(16, 0)), windowed(text_config(16, 4));
  write_checkpoint(dir / "full.npz", full, "text", kLetters);
  write_checkpoint(dir / "window.npz", windowed, "text", kLetters);
  const std::string args = "' --prompt hello --max-new-tokens 40 --temperature 0";
  const ProgramRun f = run("--model '" + (dir / "full.npz").string() + args, dir);
  INFO(f.err);
  CHECK(f.code == 0);
  // every token asked for: past the 16 positions the window slides (as the trainer's
  // --sample does; tests/test_cli_guards.cpp compares the two)
  CHECK(f.out.size() == 5 + 40 + 1);
  CHECK(f.err.find("stopped") == std::string::npos);
  const ProgramRun w = run("--model '" + (dir / "window.npz").string() + args, dir);
  INFO(w.err);
  CHECK(w.code == 0);
  CHECK(w.out.size() == 5 + 40 + 1);
  CHECK(w.err.find("stopped") == std::string::npos);
  // the ring holds the window: 2 layers x 4 slots x 2 (k, v) x kv width 2*8 x 4 bytes,
  // the window times the bytes per token, however long the run
  CHECK(w.err.find("KV cache 1024 bytes (256 bytes per token)") != std::string::npos);
  // and without the cache the window model recomputes the last `context` tokens: same text
  const ProgramRun wn = run("--model '" + (dir / "window.npz").string() + args + " --no-cache", dir);
  CHECK(wn.out == w.out);
}

TEST_CASE("generate cli: --patterns draws each layer's heads over the printed tokens, nothing above the diagonal", "[cli][generate]") {
  const fs::path dir = scratch("patterns");
  Transformer<float> model(text_config(32, 0));
  write_checkpoint(dir / "model.npz", model, "text", kLetters);
  const ProgramRun r = run("--model '" + (dir / "model.npz").string() + "' --prompt hello "
                           "--temperature 0 --max-new-tokens 3 --patterns '" + (dir / "maps").string() + "'", dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  // the axis labels are the printed text, one character per token (a space drawn as U+2423)
  std::vector<std::string> printed;
  for (char ch : r.out.substr(0, r.out.size() - 1))
    printed.push_back(ch == ' ' ? "\u2423" : ch == '\n' ? "\\n" : std::string(1, ch));
  REQUIRE(printed.size() == 8);
  CHECK_FALSE(fs::exists(dir / "maps" / "layer2.svg"));
  const double cell = 14, T = 8, x_first = 40, y0 = 60, panel = T * cell + 40;
  for (const char* name : {"layer0.svg", "layer1.svg"}) {
    INFO(name);
    std::ifstream f(dir / "maps" / name);
    REQUIRE(f);
    std::vector<std::string> rows;  // the query labels, panel after panel
    std::size_t cells = 0, heads = 0;
    for (std::string line; std::getline(f, line);) {
      heads += line.find(">head ") != std::string::npos;
      const std::size_t end = line.find("text-anchor=\"end\">");
      if (end != std::string::npos) {
        const std::size_t a = line.find('>', end) + 1;
        rows.push_back(line.substr(a, line.find("</text>") - a));
      }
      if (line.rfind("<rect x=", 0) == 0 && line.find("width=\"14\"") != std::string::npos) {
        double x = 0, y = 0;
        REQUIRE(std::sscanf(line.c_str(), "<rect x=\"%lf\" y=\"%lf\"", &x, &y) == 2);
        const double in_panel = std::fmod(x - x_first, panel);
        const long j = std::lround(in_panel / cell), i = std::lround((y - y0) / cell);
        CHECK(j <= i);  // causal: no weight on a later key
        ++cells;
      }
    }
    CHECK(heads == 2);
    REQUIRE(rows.size() == 2 * printed.size());
    for (std::size_t k = 0; k < rows.size(); ++k) CHECK(rows[k] == printed[k % printed.size()]);
    CHECK(cells >= 2 * std::size_t(T));  // at least each row's largest weight is drawn
  }
}

TEST_CASE("generate cli: misuse exits 2 with one line and writes nothing", "[cli][generate]") {
  const fs::path dir = scratch("errors");
  const SequenceTask task = SequenceTask::make("sort");
  TransformerConfig c = gpt2_preset();
  c.vocab = task.vocab_size();
  c.context = task.context();
  c.d_model = 8;
  c.heads = 2;
  c.layers = 1;
  write_checkpoint(dir / "sort.npz", Transformer<float>(c), "sort");
  write_checkpoint(dir / "text.npz", Transformer<float>(text_config(16, 0)), "text", kLetters);
  std::ofstream(dir / "damaged.npz") << "PK\x03\x04 not really a zip";
  const std::string sort = " --model '" + (dir / "sort.npz").string() + "'";
  const std::string text = " --model '" + (dir / "text.npz").string() + "'";
  struct Case { std::string args, message; };
  const std::vector<Case> cases = {
      {"--prompt x", "--model is required"},
      {"--model '" + (dir / "missing.npz").string() + "'", "missing.npz"},
      {"--model '" + (dir / "damaged.npz").string() + "'", "damaged.npz"},
      {text + " --prompt 'hel!'", "character '!' (U+0021) at position 3 is not in the model's vocabulary of 10"},
      {text + " --prompt 'xyz'", "character 'x' (U+0078) at position 0"},
      {sort + " --prompt '5 8 6 4 9 5 2 10'", "token '10' at position 7 is not a sort symbol"},
      {sort + " --prompt '5 8 6 -4 9 5 2 1'", "token '-4' at position 3"},
      {sort + " --prompt '5 8 x'", "token 'x' at position 2"},
      {sort, "the sort task needs 8 input tokens, got 0 (an empty prompt)"},
      {sort + " --prompt '1 2 3'", "needs 8 input tokens, got 3"},
      {text + " --temperature -1", "--temperature must be a finite number >= 0"},
      {text + " --temperature nan", "--temperature"},
      {text + " --top-p 0", "--top-p must be in (0, 1]"},
      {text + " --top-p 1.5", "--top-p must be in (0, 1]"},
      {text + " --top-k -1", "--top-k must be >= 0"},
      {text + " --max-memory -5", "--max-memory: value -5 is not a size"},
      {text + " --max-memory 0", "--max-memory: value 0 is not a size"},
      {text + " --prefill-chunk -1", "--prefill-chunk"},
      {text + " --prompt 'hello hello hello hello'", "tokens do not fit the model's context of 16"},
      {text + " --bogus", "bogus"},
      {text + " --precision f16", "--precision"},
      {text + " --kv-dtype f16", "--kv-dtype"},
      // options that change nothing in the run: sampling's when greedy, the cache's without one
      {sort + " --prompt '5 8 6 4 9 5 2 9' --top-k 3", "--top-k applies to sampling only"},
      {sort + " --prompt '5 8 6 4 9 5 2 9' --seed 2", "--seed applies to sampling only"},
      {text + " --prompt hello --temperature 0 --top-p 0.9", "this run is greedy (--temperature 0)"},
      {text + " --prompt hello --no-cache --prefill-chunk 2", "--prefill-chunk applies to the KV cache only"},
      {text + " --prompt hello --no-cache --kv-dtype bf16", "--kv-dtype applies to the KV cache only"},
      {text + " --prompt hello --patterns '" + (dir / "sort.npz" / "maps").string() + "'",
       "cannot create --patterns directory"},
  };
  for (const Case& k : cases) {
    INFO(k.args);
    const ProgramRun r = run(k.args, dir);
    INFO("stderr: " << r.err);
    CHECK(r.code == 2);
    CHECK(tapegrad::test::count_lines(r.err) == 1);
    CHECK(r.err.rfind("generate:", 0) == 0);
    CHECK(r.err.find(k.message) != std::string::npos);
    CHECK(r.out.empty());
    std::size_t files = 0;
    for (const auto& e : fs::directory_iterator(dir)) files += e.path().extension() == ".npz";
    CHECK(files == std::size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator())));
  }
}
#endif
