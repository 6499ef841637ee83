// What the programs refuse instead of answering wrongly, growing without bound or ignoring
// an option: NaN weights in every program that loads a model, configurations whose memory
// estimate exceeds the limit, a --text that is no regular file or too large, an allocation
// that fails anyway (run under `ulimit -v`), options that disagree with what a checkpoint or
// a task fixes, a text whose characters the checkpoint's vocabulary lacks, an MPI launch
// without --data-parallel, a task prompt on a model that records no task. Every refusal is
// exit 2 with one line on stderr and leaves no --out behind. Models are written here with
// random weights (no training needed); the trainer runs a handful of steps at most.
#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_TRAIN_BIN) && defined(TAPEGRAD_GENERATE_BIN)
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <xtensor/xadapt.hpp>

#include "apps/common/memory_budget.hpp"
#include "nn/io/checkpoint.hpp"
#include "resume_helpers.hpp"
#include "tasks/tasks.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::test;

namespace {

fs::path scratch(const std::string& name) { return scratch_dir("test_cli_guards", name); }

ProgramRun run_generate(const std::string& args, const fs::path& dir) {
  return run_program(TAPEGRAD_GENERATE_BIN, args, dir);
}

// The trainer under `ulimit -v kib`: an allocation past it fails (std::bad_alloc) at once,
// without the memory ever being touched.
// AddressSanitizer reserves terabytes of address space for its shadow memory, so a
// sanitizer build runs the trainer without the limit.
ProgramRun run_trainer_limited(std::size_t kib, const std::string& args, const fs::path& dir) {
#ifdef __SANITIZE_ADDRESS__
  (void)kib;
  return run_trainer(args, dir);
#else
  return run_program("/bin/sh", "-c \"ulimit -v " + std::to_string(kib) + "; exec '" +
                                    TAPEGRAD_TRAIN_BIN + "' " + args + "\"", dir);
#endif
}

// a run of a few milliseconds per step; kTiny adds the model's sizes
const std::string kQuick = "--batch 8 --eval-size 40 --quiet --skip-gradcheck --threads 1";
const std::string kTiny = "--d-model 16 --heads 2 --layers 1 " + kQuick;

// A checkpoint as the trainer writes it: the config, the task (none when empty), a text
// vocabulary.
void write_model(const fs::path& path, const Transformer<float>& model, const std::string& task,
                 const std::vector<std::uint32_t>& vocab = {}) {
  std::vector<NpzEntry> extra = config_entries(model.config());
  if (!task.empty()) {
    std::vector<std::int64_t> name(task.begin(), task.end());
    extra.emplace_back(tasks::kTaskKey, xt::xarray<std::int64_t>(xt::adapt(name, {name.size()})));
  }
  if (!vocab.empty()) {
    std::vector<std::int64_t> cps(vocab.begin(), vocab.end());
    extra.emplace_back(tasks::kVocabKey, xt::xarray<std::int64_t>(xt::adapt(cps, {cps.size()})));
  }
  save_parameters(path.string(), model, extra);
}

TransformerConfig sort_config(const std::string& arch) {
  const tasks::SequenceTask task = tasks::SequenceTask::make("sort");
  TransformerConfig c = preset(arch);
  c.vocab = task.vocab_size();
  c.context = task.context();
  c.d_model = 16;
  c.heads = 2;
  c.layers = 1;
  finish_preset(arch, c);
  c.seed = 7;
  return c;
}

const std::vector<std::uint32_t> kLetters = {'\n', ' ', 'a', 'b', 'c', 'd', 'e', 'h', 'l', 'o'};

TransformerConfig text_config(std::size_t context) {
  TransformerConfig c = gpt2_preset();
  c.vocab = kLetters.size();
  c.context = context;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 1;
  c.seed = 4;
  return c;
}

// A copy of `model` with one NaN in its token embedding.
void write_nan_model(const fs::path& path, const Transformer<float>& model, const std::string& task,
                     const std::vector<std::uint32_t>& vocab = {}) {
  Transformer<float> copy(model.config());
  copy.parameter("tok_emb.weight").value().data()[3] = std::numeric_limits<float>::quiet_NaN();
  write_model(path, copy, task, vocab);
}

void check_refused(const ProgramRun& r, const std::string& program, const std::string& message) {
  INFO("stderr: " << r.err);
  CHECK(r.code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.rfind(program, 0) == 0);
  CHECK(r.err.find(message) != std::string::npos);
}

}  // namespace

TEST_CASE("guards: every program that loads a model refuses NaN weights unless --allow-nonfinite",
          "[cli][guards]") {
  const fs::path dir = scratch("nonfinite");
  const Transformer<float> sort_model(sort_config("gpt2"));
  write_nan_model(dir / "sort_nan.npz", sort_model, "sort");
  write_nan_model(dir / "text_nan.npz", Transformer<float>(text_config(16)), "text", kLetters);
  const std::string sort = " --model " + quoted(dir / "sort_nan.npz");
  const std::string text = " --model " + quoted(dir / "text_nan.npz");
  check_refused(run_generate(sort + " --prompt '5 8 6 4 9 5 2 9'", dir), "generate",
                "parameter 'tok_emb.weight' (11,16) holds nan at element 3");
  check_refused(run_generate(text + " --prompt hello", dir), "generate", "--allow-nonfinite");
  const ProgramRun allowed = run_generate(text + " --prompt hello --allow-nonfinite --max-new-tokens 3", dir);
  CHECK(allowed.code == 0);
  // the trainer refuses the same file the same way
  check_refused(run_trainer("--resume " + quoted(dir / "sort_nan.npz") + " --steps 2 --out " +
                                quoted(dir / "never"), dir),
                "train_tiny_transformer", "parameter 'tok_emb.weight' (11,16) holds nan at element 3");
  CHECK_FALSE(fs::exists(dir / "never"));
#ifdef TAPEGRAD_SATURATION_BIN
  const ProgramRun ablate = run_program(TAPEGRAD_SATURATION_BIN, "--ablate " + quoted(dir / "sort_nan.npz"), dir);
  check_refused(ablate, "saturation", "holds nan");
  CHECK(ablate.out.empty());
  // a checkpoint that is not there is a usage error too
  const ProgramRun missing = run_program(TAPEGRAD_SATURATION_BIN, "--ablate " + quoted(dir / "missing.npz"), dir);
  check_refused(missing, "saturation", "missing.npz");
#endif
#ifdef TAPEGRAD_LOGITS_BIN
  {
    xt::xarray<std::int64_t> ids = xt::zeros<std::int64_t>({std::size_t(1), std::size_t(4)});
    save_npz((dir / "batch.npz").string(), {NpzEntry("tokens", ids), NpzEntry("targets", ids)});
    const ProgramRun r = run_program(TAPEGRAD_LOGITS_BIN, "--model " + quoted(dir / "sort_nan.npz") +
                                     " --tokens " + quoted(dir / "batch.npz") + " --out " +
                                     quoted(dir / "logits.npz"), dir);
    check_refused(r, "logits", "holds nan");
    CHECK_FALSE(fs::exists(dir / "logits.npz"));
  }
#endif
}

TEST_CASE("guards: a configuration that needs more memory than allowed is refused before "
          "anything is allocated or written", "[cli][guards][memory]") {
  const fs::path dir = scratch("memory");
  const fs::path out = dir / "never";
  const std::string o = " --out " + quoted(out);
  // --max-memory below a tiny run's estimate: the sizes are named
  check_refused(run_trainer(std::string(kTiny) + " --steps 2 --max-memory 1M" + o, dir),
                "train_tiny_transformer", "out of memory: ");
  const ProgramRun tiny = run_trainer(std::string(kTiny) + " --steps 2 --max-memory 1M" + o, dir);
  for (const char* part : {"parameters", "AdamW moments", "activations", "--max-memory"}) {
    INFO(part);
    CHECK(tiny.err.find(part) != std::string::npos);
  }
  CHECK_FALSE(fs::exists(out));
  // far past any machine's memory, against the memory available (6 TiB and 3 TiB
  // estimated; nothing is allocated)
  check_refused(run_trainer("--d-model 100000 --steps 2 --skip-gradcheck --quiet" + o, dir),
                "train_tiny_transformer", "out of memory: ");
  check_refused(run_trainer("--layers 100000 --steps 2 --skip-gradcheck --quiet" + o, dir),
                "train_tiny_transformer", "out of memory: ");
  CHECK_FALSE(fs::exists(out));
  // a generous limit lets the same tiny run through
  const ProgramRun ok = run_trainer(std::string(kTiny) + " --steps 2 --max-memory 4G" + o, dir);
  INFO(ok.err);
  CHECK(ok.code == 0);
  // generate: the model, its KV cache and a step's activations
  write_model(dir / "text.npz", Transformer<float>(text_config(16)), "text", kLetters);
  check_refused(run_generate("--model " + quoted(dir / "text.npz") + " --max-memory 100K", dir),
                "generate", "out of memory: ");
}

TEST_CASE("guards: --text reads only a regular file of at most the stated size", "[cli][guards][memory]") {
  const fs::path dir = scratch("text_input");
  const fs::path out = dir / "never";
  // /dev/zero never ends: the old reader grew until an allocation failed
  check_refused(run_trainer_limited(2000000, std::string(kTiny) + " --steps 1 --text /dev/zero --out " + quoted(out), dir),
                "train_tiny_transformer", "--text /dev/zero is not a regular file");
  CHECK_FALSE(fs::exists(out));
  const fs::path big = dir / "big.txt";
  std::ofstream(big).close();
  fs::resize_file(big, (std::uintmax_t(64) << 20) + 1);  // sparse: costs no disk
  check_refused(run_trainer_limited(2000000, std::string(kTiny) + " --steps 1 --text " + quoted(big) + " --out " + quoted(out), dir),
                "train_tiny_transformer", "larger than the limit of 64 MiB");
  CHECK_FALSE(fs::exists(out));
  const ProgramRun help = run_trainer("--help", dir);
  CHECK(help.out.find("at most 64 MiB") != std::string::npos);
}

TEST_CASE("guards: an allocation that fails anyway is exit 2 'out of memory' and removes the "
          "--out this run created", "[cli][guards][memory]") {
#ifndef __SANITIZE_ADDRESS__  // there the 4 GiB would be allocated (see run_trainer_limited)
  const fs::path dir = scratch("bad_alloc");
  const fs::path out = dir / "created" / "by_the_run";
  // a feed-forward matrix of 64 x 2^24 floats (4 GiB): its allocation fails at once under a
  // 1 GiB address space, before a byte of it is touched
  const ProgramRun r = run_trainer_limited(
      1 << 20, "--d-model 64 --mlp-hidden 16777216 --batch 1 --steps 1 --skip-gradcheck --threads 1 "
               "--max-memory 1000G --out " + quoted(out), dir);
  check_refused(r, "train_tiny_transformer", "out of memory: ");
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(fs::exists(dir / "created"));
#endif
}

TEST_CASE("guards: a model option that disagrees with the --resume checkpoint is refused, one "
          "that agrees is accepted", "[cli][guards][resume]") {
  const fs::path dir = scratch("resume_arch");
  write_model(dir / "llama.npz", Transformer<float>(sort_config("llama")), "sort");
  write_model(dir / "gpt2.npz", Transformer<float>(sort_config("gpt2")), "sort");
  const std::string llama = "--resume " + quoted(dir / "llama.npz") + " " + kQuick + " --steps 2";
  const std::string gpt2 = "--resume " + quoted(dir / "gpt2.npz") + " " + kQuick + " --steps 2";
  const fs::path out = dir / "never";
  const std::string o = " --out " + quoted(out);
  check_refused(run_trainer(llama + " --arch gpt2" + o, dir), "train_tiny_transformer",
                "--arch gpt2 disagrees with the checkpoint's llama");
  check_refused(run_trainer(gpt2 + " --d-model 32" + o, dir), "train_tiny_transformer",
                "--d-model 32 disagrees with the checkpoint's d_model 16");
  check_refused(run_trainer(llama + " --norm layer" + o, dir), "train_tiny_transformer",
                "--norm layer disagrees with the checkpoint's norm rms");
  check_refused(run_trainer(gpt2 + " --qk-norm" + o, dir), "train_tiny_transformer",
                "--qk-norm true disagrees with the checkpoint's qk_norm false");
  CHECK_FALSE(fs::exists(out));
  const ProgramRun same = run_trainer(llama + " --arch llama --d-model 16 --heads 2 --norm rms --out " +
                                      quoted(dir / "agrees"), dir);
  INFO(same.err);
  CHECK(same.code == 0);
}

TEST_CASE("guards: a task fixes its context and a checkpoint its vocabulary: options that "
          "disagree are refused", "[cli][guards]") {
  const fs::path dir = scratch("fixed");
  const fs::path out = dir / "never";
  const std::string o = std::string(" ") + kTiny + " --steps 2 --out " + quoted(out);
  const std::size_t sort_context = tasks::SequenceTask::make("sort").context();
  check_refused(run_trainer("--task sort --context 32" + o, dir), "train_tiny_transformer",
                "--context 32 disagrees with the sort task's context " + std::to_string(sort_context));
  check_refused(run_trainer("--task reverse --recall-min-pairs 3" + o, dir), "train_tiny_transformer",
                "--recall-min-pairs applies to the recall task only");
  CHECK_FALSE(fs::exists(out));
  const ProgramRun agrees = run_trainer("--task sort --context " + std::to_string(sort_context) +
                                        std::string(" ") + kTiny + " --steps 2 --out " + quoted(dir / "ok"), dir);
  INFO(agrees.err);
  CHECK(agrees.code == 0);

  // a text model resumed on a text with characters its vocabulary lacks
  write_model(dir / "text.npz", Transformer<float>(text_config(16)), "text", kLetters);
  std::ofstream(dir / "other.txt") << "hello world, hello dear\n";  // w r , are missing
  const std::string text = "--resume " + quoted(dir / "text.npz") + " " + kTiny + " --steps 2";
  check_refused(run_trainer(text + " --text " + quoted(dir / "other.txt") + " --out " + quoted(out), dir),
                "train_tiny_transformer",
                "4 characters (3 distinct) are not in the checkpoint's vocabulary of 10 characters: "
                "'w' (U+0077), 'r' (U+0072), ',' (U+002C)");
  {
    std::ofstream same(dir / "same.txt");
    for (int i = 0; i < 20; ++i) same << "hello abba\nhello cab\n";
  }
  check_refused(run_trainer(text + " --text " + quoted(dir / "same.txt") + " --context 8 --out " + quoted(out), dir),
                "train_tiny_transformer", "--context 8 disagrees with the checkpoint's context 16");
  // --sample's prompt is refused before training, as generate refuses it
  check_refused(run_trainer(text + " --text " + quoted(dir / "same.txt") + " --sample 5 --prompt 'hex!' --out " +
                                quoted(out), dir),
                "train_tiny_transformer",
                "--prompt: character 'x' (U+0078) at position 2 is not in the model's vocabulary of 10 characters");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("guards: a launch under MPI without --data-parallel is refused", "[cli][guards]") {
  const fs::path dir = scratch("mpi");
  const fs::path out = dir / "never";
  for (const char* env : {"OMPI_COMM_WORLD_SIZE=2", "PMI_SIZE=2", "PMIX_RANK=1"}) {
    INFO(env);
    const ProgramRun r = run_program("/usr/bin/env", std::string(env) + " '" + TAPEGRAD_TRAIN_BIN +
                                     "' " + kTiny + " --steps 2 --out " + quoted(out), dir);
    check_refused(r, "train_tiny_transformer", "--data-parallel");
    CHECK_FALSE(fs::exists(out));
  }
  // a world of one is a plain run
  const ProgramRun one = run_program("/usr/bin/env", std::string("OMPI_COMM_WORLD_SIZE=1 '") +
                                     TAPEGRAD_TRAIN_BIN + "' " + kTiny + " --steps 2 --out " +
                                     quoted(dir / "one"), dir);
  CHECK(one.code == 0);
}

TEST_CASE("guards: generate refuses a task prompt on a model that records no task", "[cli][guards][generate]") {
  const fs::path dir = scratch("no_task");
  const Transformer<float> model(sort_config("gpt2"));
  write_model(dir / "bare.npz", model, "");
  const std::string bare = "--model " + quoted(dir / "bare.npz");
  check_refused(run_generate(bare + " --prompt '5 8 6 4 9 5 2 9'", dir), "generate",
                "records no task");
  // naming the task reads the prompt as the task's input and prints the answer
  const ProgramRun as_sort = run_generate(bare + " --task sort --prompt '5 8 6 4 9 5 2 9'", dir);
  INFO(as_sort.err);
  CHECK(as_sort.code == 0);
  CHECK(as_sort.out.rfind("5 8 6 4 9 5 2 9 | ", 0) == 0);
  // plain token ids when asked for them
  const ProgramRun tokens = run_generate(bare + " --task tokens --prompt '5 8 6' --max-new-tokens 2", dir);
  CHECK(tokens.code == 0);
  // a task that disagrees with the checkpoint's
  write_model(dir / "sort.npz", model, "sort");
  check_refused(run_generate("--model " + quoted(dir / "sort.npz") + " --task reverse --prompt '1 2'", dir),
                "generate", "--task reverse disagrees with the checkpoint's task sort");
}

TEST_CASE("guards: generate slides past a text model's context exactly as the trainer's --sample",
          "[cli][guards][generate]") {
  const fs::path dir = scratch("slide");
  Transformer<float> model(text_config(16));
  write_model(dir / "text.npz", model, "text", kLetters);
  const ProgramRun r = run_generate("--model " + quoted(dir / "text.npz") +
                                    " --prompt hello --max-new-tokens 40 --temperature 0", dir);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.size() == 5 + 40 + 1);  // every token asked for, past the context of 16
  CHECK(r.err.find("stopped") == std::string::npos);
  // the trainer's --sample of the same model, greedy: the same text
  const ProgramRun t = run_trainer("--resume " + quoted(dir / "text.npz") + " --sample 40 --temperature 0 "
                                   "--prompt hello --quiet --threads 1 --out " + quoted(dir / "sampled"), dir);
  INFO(t.err);
  REQUIRE(t.code == 0);
  const std::string header = "sample (temperature 0, top-p 0.95):\n";
  const std::size_t at = t.out.find(header);
  REQUIRE(at != std::string::npos);
  CHECK(t.out.substr(at + header.size(), r.out.size()) == r.out);
}

TEST_CASE("guards: the memory estimate counts the parameters exactly and reads sizes as the "
          "option documents", "[cli][guards][memory]") {
  for (const std::string& arch : {"gpt2", "llama"}) {
    for (bool tied : {false, true}) {
      TransformerConfig c = sort_config(arch);
      c.tie_embeddings = tied;
      c.qk_norm = tied;
      c.learned_temperature = !tied;
      INFO(arch << " tied " << tied);
      CHECK(apps::parameter_count(c) == double(Transformer<float>(c).parameter_count()));
    }
  }
  CHECK(apps::parse_size("512M") == 512.0 * 1024 * 1024);
  CHECK(apps::parse_size("4G") == 4.0 * 1024 * 1024 * 1024);
  CHECK(apps::parse_size("1.5GiB") == 1.5 * 1024 * 1024 * 1024);
  CHECK(apps::parse_size("100KB") == 100.0 * 1024);
  CHECK(apps::parse_size("1000") == 1000.0);
  for (const char* bad : {"", "x", "-1G", "0", "4Q", "nan", "1GG"}) {
    INFO(bad);
    CHECK_FALSE(apps::parse_size(bad).has_value());
  }
}

#endif
