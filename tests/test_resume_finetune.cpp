// train_tiny_transformer --resume of a fine-tune (--init-from a Hugging Face folder) that
// trains on windows shorter than the model's context: the windows and the held-out set are
// part of the training state, so the resumed run ends bit for bit where the straight run
// ends (model.npz, loss.csv, the last checkpoint and the evaluation); repeating the saved
// --context or --eval-size is accepted, another value refused naming both; a checkpoint
// written before they were recorded still resumes, on the model's context.
#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_TRAIN_BIN)
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_file.hpp"
#include "nn/io/pretrained.hpp"
#include "nn/io/training_state.hpp"
#include "resume_helpers.hpp"
#include "text/bpe_tokenizer.hpp"
#include "text/tokenizer_json.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::test;

namespace {

fs::path scratch(const std::string& name) { return scratch_dir("test_resume_finetune", name); }

const std::string kVerse =
    "And God called the light Day, and the darkness he called Night. And the evening and the "
    "morning were the first day. ";

// A GPT-2-shaped folder of context 32 with a byte-level BPE tokenizer.json, and a text.
void write_inputs(const fs::path& dir) {
  const text::BpeTokenizer tok = text::BpeTokenizer::train(kVerse, 280, text::BpeMode::regex);
  TransformerConfig c = gpt2_preset();
  c.vocab = tok.vocab_size();
  c.context = 32;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 1;
  c.seed = 4;
  save_pretrained(Transformer<float>(c), (dir / "in").string());
  text::write_tokenizer_json(tok, (dir / "in" / "tokenizer.json").string());
  std::ofstream text(dir / "text.txt");
  for (int i = 0; i < 30; ++i) text << kVerse;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

double eval_loss(const fs::path& out) {
  return field(read_json(out / "metrics.json"), "eval_loss").get<double>();
}

const char* const kLast = "ckpt-00000012.npz";

}  // namespace

TEST_CASE("resume: a fine-tune on shorter windows resumes bit for bit, its --context and "
          "--eval-size kept", "[resume][train_cli][hf]") {
  const fs::path dir = scratch("windows");
  write_inputs(dir);
  const std::string text = " --text " + quoted(dir / "text.txt");
  const std::string run = "--init-from " + quoted(dir / "in") + text +
                          " --context 8 --eval-size 6 --batch 4 --steps 12 --warmup 2 "
                          "--checkpoint-every 12 --skip-gradcheck --quiet --threads 1";
  REQUIRE(run_trainer(run + " --out " + quoted(dir / "ref"), dir).code == 0);
  REQUIRE(run_trainer(run + " --stop-at 6 --out " + quoted(dir / "part"), dir).code == 0);

  const std::string resume = "--resume " + quoted(dir / "part") + text + " --skip-gradcheck --quiet";
  // --resume alone, and with the saved values repeated: the same end
  for (const std::string& again : {std::string(), std::string(" --context 8 --eval-size 6")}) {
    INFO(again);
    const fs::path rest = dir / (again.empty() ? "rest" : "repeated");
    const ProgramRun r = run_trainer(resume + again + " --out " + quoted(rest), dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("no longer matches") == std::string::npos);
    CHECK(bytes_of(rest / "loss.csv") == bytes_of(dir / "ref" / "loss.csv"));
    CHECK(bytes_of(rest / "model.npz") == bytes_of(dir / "ref" / "model.npz"));
    CHECK(state_difference(dir / "ref" / kLast, rest / kLast) == "");
    CHECK(eval_loss(rest) == eval_loss(dir / "ref"));
  }

  for (const auto& [option, saved] : {std::pair<std::string, std::string>{"--context 16", "8"},
                                      {"--eval-size 7", "6"}}) {
    INFO(option);
    const ProgramRun r = run_trainer(resume + " " + option + " --out " + quoted(dir / "never"), dir);
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(option + " disagrees with the checkpoint's") != std::string::npos);
    CHECK(r.err.find(saved) != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "never"));
  }
}

TEST_CASE("resume: a text checkpoint written before the windows were recorded resumes on the "
          "model's context", "[resume][train_cli]") {
  const fs::path dir = scratch("old_format");
  write_inputs(dir);
  const std::string text = " --text " + quoted(dir / "text.txt");
  const std::string run = std::string(kResumeTiny) + text + " --context 12 --steps 8 --warmup 2 "
                          "--checkpoint-every 8 --threads 1";
  REQUIRE(run_trainer(run + " --out " + quoted(dir / "ref"), dir).code == 0);
  REQUIRE(run_trainer(run + " --stop-at 4 --out " + quoted(dir / "part"), dir).code == 0);
  // without the windows and the held-out size: a file of format 2 resumes, one of the
  // format that records them is refused naming the setting
  for (const std::int64_t format : {2, 3}) {
    std::vector<NpzEntry> old;
    for (NpzEntry& e : load_npz((dir / "part" / "ckpt-00000004.npz").string())) {
      const std::string setting = std::string(kTrainingPrefix) + "setting.";
      if (e.name == setting + "context" || e.name == setting + "eval_size") continue;
      if (e.name == std::string(kTrainingPrefix) + "format") e.as<std::int64_t>().data()[0] = format;
      old.push_back(std::move(e));
    }
    save_npz((dir / ("format" + std::to_string(format) + ".npz")).string(), old);
  }
  const ProgramRun lacking = run_trainer("--resume " + quoted(dir / "format3.npz") + text +
                                         " --quiet --out " + quoted(dir / "never"), dir);
  CHECK(lacking.code == 2);
  CHECK(count_lines(lacking.err) == 1);
  CHECK(lacking.err.find("lacks the setting 'context'") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "never"));
  const ProgramRun r = run_trainer("--resume " + quoted(dir / "format2.npz") + text +
                                   " --eval-size 40 --quiet --skip-gradcheck --out " + quoted(dir / "rest"), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(state_difference(dir / "ref" / "ckpt-00000008.npz", dir / "rest" / "ckpt-00000008.npz") == "");
}

TEST_CASE("resume: a run on a tokenizer.json takes that file again, and refuses another",
          "[resume][train_cli]") {
  const fs::path dir = scratch("tokenizer_json");
  write_inputs(dir);
  // ids a minbpe file cannot say (ignore_merges): the tokenizer.json is the only form
  auto write_json = [&](const fs::path& path, int vocab) {
    nlohmann::json json = nlohmann::json::parse(
        text::tokenizer_json(text::BpeTokenizer::train(kVerse, vocab, text::BpeMode::regex)));
    json["model"]["ignore_merges"] = true;
    std::ofstream(path) << json.dump();
  };
  write_json(dir / "tok.json", 280);
  write_json(dir / "other.json", 270);
  const std::string text = " --text " + quoted(dir / "text.txt");
  // stopped before the end both times: the outputs are not what this test is about
  REQUIRE(run_trainer(std::string(kResumeTiny) + text + " --tokenizer " + quoted(dir / "tok.json") +
                      " --context 12 --steps 8 --warmup 2 --stop-at 4 --out " + quoted(dir / "part"), dir).code == 0);
  const std::string resume = "--resume " + quoted(dir / "part") + text + " --stop-at 6 --quiet --skip-gradcheck";
  const ProgramRun same = run_trainer(resume + " --tokenizer " + quoted(dir / "tok.json") + " --out " +
                                      quoted(dir / "same"), dir);
  INFO(same.err);
  CHECK(same.code == 0);
  const ProgramRun other = run_trainer(resume + " --tokenizer " + quoted(dir / "other.json") + " --out " +
                                       quoted(dir / "never"), dir);
  CHECK(other.code == 2);
  CHECK(count_lines(other.err) == 1);
  CHECK(other.err.find("disagrees with the checkpoint's tokenizer") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "never"));
}

#endif
