// The trainer with a tokenizer.json whose ids are not minbpe's (GPT-2's byte order, as every
// real tokenizer has): a fine-tune (--init-from), a fresh run (--tokenizer FILE.json or DIR)
// and a --resume of such a run each write every output, the tokenizer as tokenizer.json
// beside the model and in the --export-hf folder, encoding as the one given.
#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_TRAIN_BIN)
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "gpt2_ordered_tokenizer.hpp"
#include "json_file.hpp"
#include "nn/io/pretrained.hpp"
#include "nn/transformer.hpp"
#include "run_program.hpp"
#include "text/tokenizer_json.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using tapegrad::test::ProgramRun;

namespace {

fs::path scratch(const std::string& name) {
  return tapegrad::test::scratch_dir("test_finetune_tokenizer_cli", name);
}
std::string q(const fs::path& p) { return "'" + p.string() + "'"; }
ProgramRun train(const std::string& args, const fs::path& dir) {
  return tapegrad::test::run_program(TAPEGRAD_TRAIN_BIN, args, dir);
}

const std::string kText =
    "In the beginning God created the heaven and the earth. And the earth was without form, "
    "and void; and darkness was upon the face of the deep. And God said, Let there be light: "
    "and there was light. \xc3\x9c" "ber na\xc3\xafve caf\xc3\xa9.\n";

const text::BpeTokenizer& foreign_tokenizer() {
  static const text::BpeTokenizer tok = tapegrad::test::gpt2_ordered_tokenizer(kText, 40);
  return tok;
}

fs::path write_text(const fs::path& dir) {
  std::ofstream f(dir / "text.txt", std::ios::binary);
  for (int i = 0; i < 20; ++i) f << kText;
  return dir / "text.txt";
}

// A Hugging Face folder: a tiny llama-shaped model over the foreign tokenizer.
void write_folder(const fs::path& dir) {
  TransformerConfig c = llama_preset();
  c.vocab = std::size_t(foreign_tokenizer().vocab_size());
  c.context = 32;
  c.d_model = 16;
  c.heads = 2;
  c.kv_heads = 1;
  c.layers = 1;
  c.seed = 3;
  save_pretrained(Transformer<float>(c), dir.string());
  text::write_tokenizer_json(foreign_tokenizer(), (dir / "tokenizer.json").string());
}

// The run's outputs, its tokenizer as tokenizer.json (minbpe's text form has no such ids).
void check_outputs(const fs::path& out) {
  for (const char* name : {"model.npz", "metrics.json", "loss.csv", "loss.svg", "sample.txt"}) {
    INFO(name);
    CHECK(fs::exists(out / name));
  }
  CHECK_FALSE(fs::exists(out / "tokenizer.bpe"));
}

void check_encodes_like_foreign(const fs::path& file) {
  INFO(file.string());
  REQUIRE(fs::exists(file));
  const text::BpeTokenizer written = text::read_tokenizer_json(file.string());
  for (const std::string& s : {kText, std::string(" the earth<|endoftext|>  light!"), std::string("\xe4\xb8\xad")})
    CHECK(written.encode(s) == foreign_tokenizer().encode(s));
  CHECK(written.encode("!")[0] == 0);  // GPT-2's order, not minbpe's (where '!' is 33)
}

// A run that finished: its outputs and the exported folder's tokenizer as the one given.
void check_run(const ProgramRun& r, const fs::path& out, const fs::path& exported) {
  INFO(r.out + r.err);
  REQUIRE(r.code == 0);
  check_outputs(out);
  check_encodes_like_foreign(out / "tokenizer.json");
  check_encodes_like_foreign(exported / "tokenizer.json");
}

const std::string kRun = " --context 16 --batch 4 --eval-size 4 --warmup 1 --skip-gradcheck "
                         "--threads 1 --quiet --sample 20";
const std::string kTinyModel = " --d-model 16 --heads 2 --layers 1";

}  // namespace

TEST_CASE("finetune tokenizer cli: a folder with GPT-2-ordered ids fine-tunes, exports and resumes",
          "[cli][hf][tokenizer_json]") {
  REQUIRE_FALSE(foreign_tokenizer().is_minbpe());
  const fs::path dir = scratch("init_from");
  write_folder(dir / "in");
  const fs::path text = write_text(dir);
  const ProgramRun r = train("--init-from " + q(dir / "in") + " --text " + q(text) + kRun +
                             " --steps 3 --out " + q(dir / "run") + " --export-hf " + q(dir / "hf"), dir);
  check_run(r, dir / "run", dir / "hf");
  CHECK(fs::exists(dir / "hf" / "model.safetensors"));
  // what transformers' AutoTokenizer reads: the model's context as model_max_length
  const nlohmann::json config = tapegrad::test::read_json(dir / "hf" / "tokenizer_config.json");
  CHECK(tapegrad::test::field(config, "model_max_length") == 32);
  CHECK(tapegrad::test::field(config, "add_prefix_space") == false);

  // resumed, with and without the same tokenizer given again, and exported once more
  for (const std::string& again : {std::string(), " --tokenizer " + q(dir / "run" / "tokenizer.json")}) {
    fs::remove_all(dir / "rest");
    fs::remove_all(dir / "hf2");
    const ProgramRun resumed = train("--resume " + q(dir / "run" / "model.npz") + " --text " + q(text) +
                                     again + " --steps 2 --skip-gradcheck --threads 1 --quiet --sample 20 "
                                     "--out " + q(dir / "rest") + " --export-hf " + q(dir / "hf2"), dir);
    INFO(again);
    check_run(resumed, dir / "rest", dir / "hf2");
  }
  // another tokenizer.json on resume is refused: exit 2, one line, nothing written
  text::write_tokenizer_json(tapegrad::test::gpt2_ordered_tokenizer(kText, 39),
                             (dir / "other.json").string());
  const ProgramRun other = train("--resume " + q(dir / "run" / "model.npz") + " --text " + q(text) +
                                 " --tokenizer " + q(dir / "other.json") + " --steps 2 --out " +
                                 q(dir / "bad"), dir);
  CHECK(other.code == 2);
  CHECK(tapegrad::test::count_lines(other.err) == 1);
  CHECK_THAT(other.err, Catch::Contains("other.json"));
  CHECK_FALSE(fs::exists(dir / "bad"));
}

TEST_CASE("finetune tokenizer cli: --tokenizer FILE.json or DIR with GPT-2-ordered ids writes every output",
          "[cli][tokenizer_json]") {
  const fs::path dir = scratch("tokenizer_option");
  fs::create_directories(dir / "tok");
  text::write_tokenizer_json(foreign_tokenizer(), (dir / "tok" / "tokenizer.json").string());
  const fs::path text = write_text(dir);
  for (const fs::path& given : {dir / "tok" / "tokenizer.json", dir / "tok"}) {
    INFO(given.string());
    fs::remove_all(dir / "run");
    fs::remove_all(dir / "hf");
    const ProgramRun r = train("--text " + q(text) + " --tokenizer " + q(given) + kRun + kTinyModel +
                               " --steps 2 --out " + q(dir / "run") + " --export-hf " + q(dir / "hf"), dir);
    check_run(r, dir / "run", dir / "hf");
  }
}

#endif
