// The programs on Hugging Face folders, end to end, with random weights written here:
// convert takes a checkpoint to a folder and back bitwise; generate reads a folder and
// prints the full forward's greedy text through the folder's tokenizer.json; the trainer
// fine-tunes a folder (--init-from) and exports the result (--export-hf) as a folder that
// loads back equal to its model.npz; induction scores every head of a folder; every misuse
// exits 2 with one line and writes nothing.
#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_CONVERT_BIN) && \
    defined(TAPEGRAD_GENERATE_BIN) && defined(TAPEGRAD_TRAIN_BIN) && defined(TAPEGRAD_INDUCTION_BIN)
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/tape.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/io/pretrained.hpp"
#include "nn/io/safetensors.hpp"
#include "run_program.hpp"
#include "tasks/text_coder.hpp"
#include "text/bpe_tokenizer.hpp"
#include "text/tokenizer_json.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using tapegrad::test::ProgramRun;

namespace {

fs::path scratch(const std::string& name) { return tapegrad::test::scratch_dir("test_hf_programs", name); }
std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

const std::string kText =
    "In the beginning God created the heaven and the earth. And the earth was without form, "
    "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
    "the face of the waters. And God said, Let there be light: and there was light. ";

text::BpeTokenizer small_tokenizer() {
  return text::BpeTokenizer::train(kText, 300, text::BpeMode::regex);
}

// A llama-shaped model (grouped-query attention, RoPE, RMSNorm, SwiGLU) over the tokenizer.
TransformerConfig folder_config(std::size_t vocab) {
  TransformerConfig c = llama_preset();
  c.vocab = vocab;
  c.context = 48;
  c.d_model = 24;
  c.heads = 4;
  c.kv_heads = 2;
  c.layers = 2;
  c.seed = 9;
  return c;
}

// A folder as Hugging Face writes one: config.json, model.safetensors, tokenizer.json.
Transformer<float> write_folder(const fs::path& dir) {
  const text::BpeTokenizer tok = small_tokenizer();
  Transformer<float> model(folder_config(tok.vocab_size()));
  save_pretrained(model, dir.string());
  text::write_tokenizer_json(tok, (dir / "tokenizer.json").string());
  return model;
}

void check_same_parameters(const Module<float>& a, const Module<float>& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].name);
    REQUIRE(pa[i].name == pb[i].name);
    REQUIRE(pa[i].tensor.shape() == pb[i].tensor.shape());
    CHECK(std::equal(pa[i].tensor.data(), pa[i].tensor.data() + pa[i].tensor.size(),
                     pb[i].tensor.data()));
  }
}

// Greedy continuation by the full forward of the whole sequence (no cache, no sampler).
std::vector<std::int32_t> greedy(Transformer<float>& model, std::vector<std::int32_t> seq, std::size_t n) {
  NoGradGuard no_grad;
  const std::size_t V = model.config().vocab, start = seq.size();
  for (std::size_t i = 0; i < n; ++i) {
    Indices t = Indices::from_shape({std::size_t(1), seq.size()});
    for (std::size_t j = 0; j < seq.size(); ++j) t(0, j) = seq[j];
    const Tensor<float> logits = model.forward(t);
    const float* last = logits.data() + (seq.size() - 1) * V;
    seq.push_back(std::int32_t(std::max_element(last, last + V) - last));
  }
  return std::vector<std::int32_t>(seq.begin() + std::ptrdiff_t(start), seq.end());
}

std::size_t files_in(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

}  // namespace

TEST_CASE("hf programs: convert takes a folder to a checkpoint and back bitwise", "[cli][hf]") {
  const fs::path dir = scratch("convert");
  const Transformer<float> model = write_folder(dir / "in");
  ProgramRun r = tapegrad::test::run_program(TAPEGRAD_CONVERT_BIN, quoted(dir / "in") + " " +
                                             quoted(dir / "model.npz"), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const Transformer<float> from_npz = load_checkpoint<float>((dir / "model.npz").string());
  check_same_parameters(model, from_npz);
  // the checkpoint holds the configuration the folder imports as (sizes resolved)
  CHECK(from_npz.config() == load_pretrained<float>((dir / "in").string()).model.config());
  r = tapegrad::test::run_program(TAPEGRAD_CONVERT_BIN, quoted(dir / "model.npz") + " " +
                                  quoted(dir / "out"), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(fs::exists(dir / "out" / "tokenizer.json"));
  const PretrainedModel<float> back = load_pretrained<float>((dir / "out").string());
  CHECK(back.model_type == "llama");
  check_same_parameters(model, back.model);
  // the tokenizer went through the checkpoint unchanged: the same ids for the same text
  const text::BpeTokenizer a = text::read_tokenizer_json((dir / "in" / "tokenizer.json").string());
  const text::BpeTokenizer b = text::read_tokenizer_json((dir / "out" / "tokenizer.json").string());
  CHECK(a.encode(kText) == b.encode(kText));
}

TEST_CASE("hf programs: convert misuse exits 2 with one line and writes nothing", "[cli][hf]") {
  const fs::path dir = scratch("convert_misuse");
  write_folder(dir / "in");
  TransformerConfig c = folder_config(300);
  c.learned_temperature = true;  // no Hugging Face model_type has it
  save_checkpoint((dir / "odd.npz").string(), Transformer<float>(c));
  const std::vector<std::string> cases = {
      quoted(dir / "missing") + " " + quoted(dir / "x.npz"),
      quoted(dir / "in") + " " + quoted(dir / "in"),
      quoted(dir / "odd.npz") + " " + quoted(dir / "odd_out"),
      quoted(dir / "in"),
  };
  for (const std::string& args : cases) {
    INFO(args);
    const std::size_t before = files_in(dir);
    const ProgramRun r = tapegrad::test::run_program(TAPEGRAD_CONVERT_BIN, args, dir);
    CHECK(r.code == 2);
    CHECK(tapegrad::test::count_lines(r.err) == 1);
    CHECK(files_in(dir) == before);
    CHECK_FALSE(fs::exists(dir / "odd_out"));
  }
}

// Sets one value of a folder's tensor (rewritten as F64).
void poison(const fs::path& dir, const std::string& tensor, std::size_t element, double value) {
  const std::string file = (dir / "model.safetensors").string();
  std::vector<std::vector<double>> values;
  std::vector<SafetensorsSource<double>> sources;
  {
    const SafetensorsFile held(file);
    for (const SafetensorsTensor& t : held.tensors()) {
      values.emplace_back(t.elements());
      held.read(t.name, values.back().data());
      if (t.name == tensor) values.back().at(element) = value;
    }
    std::size_t i = 0;
    for (const SafetensorsTensor& t : held.tensors())
      sources.emplace_back(t.name, t.shape, values[i++].data());
  }
  save_safetensors<double>(file, sources);
}

TEST_CASE("hf programs: each refusal names the file or option and the way out", "[cli][hf]") {
  const fs::path dir = scratch("refusals");
  write_folder(dir / "in");
  fs::create_directories(dir / "no_config");
  std::ofstream(dir / "no_config" / "model.safetensors") << "x";
  write_folder(dir / "pickled");
  fs::rename(dir / "pickled" / "model.safetensors", dir / "pickled" / "pytorch_model.bin");
  write_folder(dir / "nan");
  poison(dir / "nan", "model.layers.0.mlp.down_proj.weight", 3, std::nan(""));
  TransformerConfig c = folder_config(300);
  c.qk_norm = true;
  save_checkpoint((dir / "qk.npz").string(), Transformer<float>(c));
  std::ofstream(dir / "a_file") << "x";
  {
    std::ofstream text(dir / "text.txt");
    for (int i = 0; i < 20; ++i) text << kText;
  }
  const std::string train = std::string(TAPEGRAD_TRAIN_BIN);
  struct Case {
    std::string program, args, says;
  };
  const std::vector<Case> cases = {
      {TAPEGRAD_CONVERT_BIN, quoted(dir / "no_config") + " " + quoted(dir / "x.npz"),
       "a folder without config.json"},
      {TAPEGRAD_CONVERT_BIN, quoted(dir / "pickled") + " " + quoted(dir / "x.npz"),
       "pickled weights are not read"},
      {TAPEGRAD_CONVERT_BIN, quoted(dir / "qk.npz") + " " + quoted(dir / "qk_out"),
       "qk_norm=true: no supported model_type has QK-norm; train with --no-qk-norm"},
      {TAPEGRAD_CONVERT_BIN, quoted(dir / "qk.npz") + " " + quoted(dir / "a_file"),
       "OUT " + (dir / "a_file").string() + " is a file"},
      {TAPEGRAD_CONVERT_BIN, quoted(dir / "nan") + " " + quoted(dir / "x.npz"),
       "parameter 'blocks.0.mlp.down.weight' (64,24) holds nan at element 72 (--allow-nonfinite"},
      {TAPEGRAD_GENERATE_BIN, "--model " + quoted(dir / "nan") + " --prompt And",
       "holds nan at element 72 (--allow-nonfinite loads it anyway)"},
      {train, "--init-from " + quoted(dir / "nan") + " --text " + quoted(dir / "text.txt") +
                  " --steps 1 --quiet --out " + quoted(dir / "run"),
       "holds nan at element 72 (--allow-nonfinite loads it anyway)"},
      {train, "--arch llama --task sort --steps 1 --quiet --out " + quoted(dir / "run") +
                  " --export-hf " + quoted(dir / "run_hf"),
       "--export-hf " + (dir / "run_hf").string() + ": hf_config_to_json: qk_norm=true: no "
       "supported model_type has QK-norm; train with --no-qk-norm"},
  };
  for (const Case& k : cases) {
    INFO(k.args);
    const std::size_t before = files_in(dir);
    const ProgramRun r = tapegrad::test::run_program(k.program, k.args, dir);
    CHECK(r.code == 2);
    CHECK(tapegrad::test::count_lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains(k.says));
    CHECK(files_in(dir) == before);
  }
  // the opt-in loads it, as it does a checkpoint
  const ProgramRun r = tapegrad::test::run_program(
      TAPEGRAD_CONVERT_BIN, quoted(dir / "nan") + " " + quoted(dir / "x.npz") + " --allow-nonfinite", dir);
  INFO(r.err);
  CHECK(r.code == 0);
}

TEST_CASE("hf programs: generate reads a folder and prints the full forward's greedy text", "[cli][hf]") {
  const fs::path dir = scratch("generate");
  Transformer<float> model = write_folder(dir / "in");
  const text::BpeTokenizer tok = small_tokenizer();
  const std::string prompt = "And God said";
  const std::vector<std::int32_t> want = greedy(model, tok.encode(prompt), 12);
  const ProgramRun r = tapegrad::test::run_program(
      TAPEGRAD_GENERATE_BIN, "--model " + quoted(dir / "in") + " --prompt '" + prompt +
                                 "' --temperature 0 --max-new-tokens 12", dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == prompt + tok.decode(want) + "\n");
}

TEST_CASE("hf programs: the trainer fine-tunes a folder and exports it", "[cli][hf]") {
  const fs::path dir = scratch("train");
  write_folder(dir / "in");
  {
    std::ofstream text(dir / "text.txt");
    for (int i = 0; i < 20; ++i) text << kText;
  }
  const std::string common = "--init-from " + quoted(dir / "in") + " --text " +
                             quoted(dir / "text.txt") + " --context 16 --batch 4 --steps 6 "
                             "--eval-size 4 --skip-gradcheck --quiet";
  const ProgramRun r = tapegrad::test::run_program(
      TAPEGRAD_TRAIN_BIN, common + " --out " + quoted(dir / "run") + " --export-hf " +
                              quoted(dir / "hf"), dir);
  INFO(r.out + r.err);
  REQUIRE(r.code == 0);
  const Transformer<float> trained = load_checkpoint<float>((dir / "run" / "model.npz").string());
  const PretrainedModel<float> exported = load_pretrained<float>((dir / "hf").string());
  check_same_parameters(trained, exported.model);
  CHECK(trained.config().context == 48);  // the model's own context, windows of 16
  CHECK(fs::exists(dir / "hf" / "tokenizer.json"));
  // the weights moved: the run trained the folder's model, not a fresh one
  const PretrainedModel<float> start = load_pretrained<float>((dir / "in").string());
  CHECK_FALSE(std::equal(start.model.parameters()[0].value().data(),
                         start.model.parameters()[0].value().data() + start.model.parameters()[0].size(),
                         trained.parameters()[0].value().data()));

  for (const std::string& bad : {std::string("--init-from ") + quoted(dir / "text.txt") + " --text " +
                                     quoted(dir / "text.txt"),
                                 "--init-from " + quoted(dir / "in"),
                                 common + " --tokenizer bpe",
                                 common + " --context 64",
                                 common + " --resume " + quoted(dir / "run" / "model.npz")}) {
    INFO(bad);
    const ProgramRun m = tapegrad::test::run_program(TAPEGRAD_TRAIN_BIN, bad + " --out " +
                                                     quoted(dir / "bad"), dir);
    CHECK(m.code == 2);
    CHECK(tapegrad::test::count_lines(m.err) == 1);
    CHECK_FALSE(fs::exists(dir / "bad"));
  }
}

TEST_CASE("hf programs: induction scores every head of a folder's model", "[cli][hf]") {
  const fs::path dir = scratch("induction");
  write_folder(dir / "in");
  const ProgramRun r = tapegrad::test::run_program(
      TAPEGRAD_INDUCTION_BIN, "--model " + quoted(dir / "in") + " --half 8 --batch 16", dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind("layer,head,induction,previous_token\n", 0) == 0);
  CHECK(tapegrad::test::count_lines(r.out) == 1 + 2 * 4);
  const ProgramRun big = tapegrad::test::run_program(
      TAPEGRAD_INDUCTION_BIN, "--model " + quoted(dir / "in") + " --half 40", dir);
  CHECK(big.code == 2);  // 79 positions do not fit a context of 48
  CHECK(tapegrad::test::count_lines(big.err) == 1);
}

#endif
