// The trainer on text with each kind of token (--tokenizer char | bpe | FILE), end to end:
// the tokenizer is trained on the training part and saved in the checkpoint and beside it,
// bits per byte is reported, --resume and generate read the tokens back, and every misuse
// of the tokenizer options exits 2 with one line.
#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_TRAIN_BIN) && defined(TAPEGRAD_GENERATE_BIN)
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "json_file.hpp"
#include "nn/io/checkpoint.hpp"
#include "run_program.hpp"
#include "tasks/tasks.hpp"
#include "text/utf8.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using tapegrad::test::field;
using tapegrad::test::ProgramRun;
using tapegrad::test::read_json;
using tapegrad::test::slurp;

namespace {

fs::path scratch(const std::string& name) { return tapegrad::test::scratch_dir("test_train_text_cli", name); }
ProgramRun train(const std::string& args, const fs::path& dir) {
  return tapegrad::test::run_program(TAPEGRAD_TRAIN_BIN, args, dir);
}
std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

const char* kTiny = "--d-model 16 --heads 2 --layers 1 --batch 8 --eval-size 40 --threads 1 --quiet "
                    "--context 16 --warmup 1 --skip-gradcheck";

// Some kB of text with non-ASCII characters; `ascii` leaves them out.
fs::path write_corpus(const fs::path& dir, bool ascii) {
  const fs::path path = dir / (ascii ? "ascii.txt" : "text.txt");
  std::ofstream f(path, std::ios::binary);
  for (int i = 0; i < 80; ++i)
    f << "the quick brown fox " << i << " jumps over the lazy dog" << (ascii ? "" : " \xc3\xa0 caf\xc3\xa9") << ".\n";
  return path;
}

}  // namespace

TEST_CASE("train text cli: --tokenizer bpe trains, saves its tokenizer and reports bits per byte",
          "[train_cli][text][bpe]") {
  const fs::path dir = scratch("bpe");
  const fs::path corpus = write_corpus(dir, false), a = dir / "a", b = dir / "b";
  const ProgramRun r = train(std::string(kTiny) + " --text " + q(corpus) +
                             " --tokenizer bpe --vocab-size 300 --steps 6 --out " + q(a), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json m = read_json(a / "metrics.json");
  CHECK(field(m, "tokenizer") == "bpe");
  const double bpb = field(m, "eval_bits_per_byte").get<double>();
  CHECK(std::isfinite(bpb));
  CHECK(bpb > 0);
  CHECK(slurp(a / "loss.csv").rfind("step,loss,lr,bits_per_byte\n", 0) == 0);
  // the model's vocabulary is the tokenizer's, saved with it and beside it
  const Transformer<float> model = load_checkpoint<float>((a / "model.npz").string());
  CHECK(model.config().vocab == 300);
  const text::BpeTokenizer saved = text::BpeTokenizer::load((a / "tokenizer.bpe").string());
  CHECK(saved.vocab_size() == 300);
  const std::optional<tasks::TextCoder> in_checkpoint =
      tasks::text_coder_from_entries(load_npz((a / "model.npz").string()), "model.npz");
  REQUIRE(in_checkpoint.has_value());
  REQUIRE(in_checkpoint->is_bpe());
  CHECK(in_checkpoint->tokenizer()->to_text() == saved.to_text());
  // the tokenizer learned from the training part only: the held-out text is not in it, so
  // the same merges come from training on the first 90% of the bytes
  const std::string text = slurp(corpus);
  const text::BpeTokenizer expected = text::BpeTokenizer::train(
      text.substr(0, tasks::TextTask::held_out_start(text)), 300, text::BpeMode::regex);
  CHECK(saved.to_text() == expected.to_text());

  // reused by file: the same vocabulary, and the same tokens on resume
  const ProgramRun again = train(std::string(kTiny) + " --text " + q(corpus) + " --tokenizer " +
                                 q(a / "tokenizer.bpe") + " --steps 2 --out " + q(b), dir);
  INFO(again.err);
  REQUIRE(again.code == 0);
  CHECK(load_checkpoint<float>((b / "model.npz").string()).config().vocab == 300);
  const ProgramRun resumed = train("--resume " + q(a / "model.npz") + " --text " + q(corpus) +
                                   " --steps 2 --warmup 1 --skip-gradcheck --threads 1 --quiet "
                                   "--sample 30 --out " + q(dir / "resumed"), dir);
  INFO(resumed.err);
  REQUIRE(resumed.code == 0);
  const std::string sample = slurp(dir / "resumed" / "sample.txt");
  CHECK(sample.rfind("\n", 0) == 0);  // the default prompt, a newline
  CHECK(text::replace_invalid_utf8(sample) == sample);
}

TEST_CASE("train text cli: a char model on ASCII text has bits per byte = loss / ln 2",
          "[train_cli][text]") {
  const fs::path dir = scratch("char");
  const fs::path corpus = write_corpus(dir, true);
  const ProgramRun r = train(std::string(kTiny) + " --text " + q(corpus) + " --steps 4 --out " +
                             q(dir / "out"), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json m = read_json(dir / "out" / "metrics.json");
  CHECK(field(m, "tokenizer") == "char");
  // one byte per character: the loss in nats per token over ln 2 is bits per byte
  CHECK(field(m, "eval_bits_per_byte").get<double>() ==
        Approx(field(m, "eval_loss").get<double>() / std::log(2.0)).epsilon(1e-12));
  CHECK_FALSE(fs::exists(dir / "out" / "tokenizer.bpe"));
}

TEST_CASE("train text cli: generate streams a BPE model's text as whole characters",
          "[train_cli][text][bpe][generate]") {
  const fs::path dir = scratch("generate");
  const fs::path corpus = write_corpus(dir, false);
  REQUIRE(train(std::string(kTiny) + " --text " + q(corpus) +
                " --tokenizer bpe --vocab-size 280 --bpe-mode basic --steps 3 --out " + q(dir / "m"), dir).code == 0);
  const ProgramRun g = tapegrad::test::run_program(
      TAPEGRAD_GENERATE_BIN, "--model " + q(dir / "m" / "model.npz") + " --prompt 'caf\xc3\xa9 ' "
      "--max-new-tokens 40 --seed 3", dir);
  INFO(g.err);
  REQUIRE(g.code == 0);
  CHECK(g.out.rfind("caf\xc3\xa9 ", 0) == 0);
  CHECK(text::replace_invalid_utf8(g.out) == g.out);  // random weights may pick any token
}

TEST_CASE("train text cli: misused tokenizer options exit 2 with one line and write nothing",
          "[train_cli][text][cli]") {
  const fs::path dir = scratch("usage");
  const fs::path corpus = write_corpus(dir, false), out = dir / "never";
  REQUIRE(train(std::string(kTiny) + " --text " + q(corpus) +
                " --tokenizer bpe --vocab-size 270 --steps 1 --out " + q(dir / "bpe"), dir).code == 0);
  const fs::path bad_file = dir / "bad.bpe";
  std::ofstream(bad_file) << "not a tokenizer\n";
  const std::string text = " --text " + q(corpus);
  const std::string resume = " --resume " + q(dir / "bpe" / "model.npz") + text;
  const std::string cases[] = {
      text + " --vocab-size 300",                  // only with --tokenizer bpe
      text + " --bpe-mode basic",                  // the same
      text + " --tokenizer bpe --vocab-size 100",  // below the 256 bytes
      text + " --tokenizer bpe --bpe-mode words",  // not a mode
      text + " --tokenizer /nonexistent/tok.bpe",  // no such file
      text + " --tokenizer " + q(bad_file),        // not a tokenizer file
      " --task sort --tokenizer bpe",              // only with --text
      resume + " --tokenizer char",                // the checkpoint's are BPE tokens
      resume + " --tokenizer bpe --vocab-size 300",  // would train another tokenizer
      resume + " --tokenizer " + q(bad_file),        // not a tokenizer file, on resume too
      resume + " --tokenizer /nonexistent/tok.bpe",  // no such file, on resume too
  };
  for (const std::string& args : cases) {
    INFO(args);
    const ProgramRun r = train(std::string(kTiny) + args + " --steps 1 --out " + q(out), dir);
    CHECK(r.code == 2);
    CHECK(tapegrad::test::count_lines(r.err) == 1);
    CHECK(r.err.find("train_tiny_transformer") == 0);
  }
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("train text cli: a text model resumed without its text only samples, and says so",
          "[train_cli][text][resume]") {
  const fs::path dir = scratch("resume_without_text");
  const fs::path corpus = write_corpus(dir, true);
  REQUIRE(train(std::string(kTiny) + " --text " + q(corpus) + " --steps 4 --stop-at 2 --out " +
                q(dir / "a"), dir).code == 0);
  REQUIRE(train(std::string(kTiny) + " --text " + q(corpus) + " --steps 2 --out " + q(dir / "m"),
                dir).code == 0);
  // unfinished (step 2 of 4) or not, without --text there is nothing to train or evaluate on
  for (const std::string from : {"a", "m/model.npz"}) {
    const ProgramRun r = train("--resume " + q(dir / from) + " --quiet --out " + q(dir / "b"), dir);
    INFO(from << ": " << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("is a text model: give --text FILE") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "b"));
  }
  const ProgramRun sampled = train("--resume " + q(dir / "m" / "model.npz") +
                                   " --quiet --sample 12 --out " + q(dir / "c"), dir);
  INFO(sampled.err);
  CHECK(sampled.code == 0);
  CHECK(fs::exists(dir / "c" / "sample.txt"));
}

#endif
