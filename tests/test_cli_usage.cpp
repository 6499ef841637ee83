// What every program tells a user about its options: --help names the program as the
// others do and shows the defaults that apply (per task where they differ, flags without
// CLI11's "{false}"), unexpected arguments are reported in the order given, and an output
// option that fails is the one named.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "run_program.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using tapegrad::test::ProgramRun;
using tapegrad::test::run_program;
using tapegrad::test::scratch_dir;

namespace {
fs::path scratch(const std::string& name) { return scratch_dir("test_cli_usage", name); }

std::string help_of(const std::string& binary, const fs::path& dir) {
  const ProgramRun r = run_program(binary, "--help", dir);
  REQUIRE(r.code == 0);
  return r.out;
}
}  // namespace

TEST_CASE("cli: every program's --help names it, not the path it was run by", "[cli]") {
  const fs::path dir = scratch("usage_line");
  std::vector<std::pair<std::string, std::string>> programs;
#ifdef TAPEGRAD_GRADCHECK_BIN
  programs.emplace_back(TAPEGRAD_GRADCHECK_BIN, "gradcheck");
#endif
#ifdef TAPEGRAD_GENERATE_BIN
  programs.emplace_back(TAPEGRAD_GENERATE_BIN, "generate");
#endif
#ifdef TAPEGRAD_MODEL_CARD_BIN
  programs.emplace_back(TAPEGRAD_MODEL_CARD_BIN, "model_card");
#endif
#ifdef TAPEGRAD_TRAIN_BIN
  programs.emplace_back(TAPEGRAD_TRAIN_BIN, "train_tiny_transformer");
#endif
#ifdef TAPEGRAD_SATURATION_BIN
  programs.emplace_back(TAPEGRAD_SATURATION_BIN, "saturation");
#endif
#ifdef TAPEGRAD_INDUCTION_BIN
  programs.emplace_back(TAPEGRAD_INDUCTION_BIN, "induction");
#endif
  REQUIRE_FALSE(programs.empty());
  for (const auto& [binary, name] : programs) {
    INFO(binary);
    CHECK_THAT(help_of(binary, dir), Catch::Contains("Usage: " + name + " [OPTIONS]"));
  }
}

#ifdef TAPEGRAD_GRADCHECK_BIN
TEST_CASE("cli: unexpected arguments are reported in the order given", "[cli]") {
  const fs::path dir = scratch("extras");
  const ProgramRun r = run_program(TAPEGRAD_GRADCHECK_BIN, "first second third", dir);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.rfind("gradcheck: usage error: ", 0) == 0);  // the form of the other programs
  CHECK_THAT(r.err, Catch::Contains("first second third"));
}
#endif

#ifdef TAPEGRAD_TRAIN_BIN
TEST_CASE("train cli: --help shows each task's defaults and flags without {false}", "[cli]") {
  const std::string help = help_of(TAPEGRAD_TRAIN_BIN, scratch("train_help"));
  INFO(help);
  // CLI11's "{false}" is the value the negated name sets, not the default
  CHECK_THAT(help, !Catch::Contains("{false}") && !Catch::Contains("{true}"));
  // docs/TRAINING.md's per-task settings: sort 600 steps, reverse 300, recall 12000 on
  // 1 head and 3 layers, repeat 1000, text 1000 steps of batch 32 at d_model 128
  CHECK_THAT(help, Catch::Contains("=600 (reverse 300, recall 12000, repeat 1000, text 1000)"));
  CHECK_THAT(help, Catch::Contains("--batch UINT:UINT in [1 - 65536]=64 (text 32)"));
  CHECK_THAT(help, Catch::Contains("--heads UINT=4 (recall 1)"));
  CHECK_THAT(help, Catch::Contains("--layers UINT=2 (recall 3)"));
  CHECK_THAT(help, Catch::Contains("--d-model UINT=64 (text 128)"));
  // the recall options show recall's recipe, which is what applies (dense loss on)
  CHECK_THAT(help, Catch::Contains("--recall-dense-loss, --no-recall-dense-loss=on"));
  CHECK_THAT(help, Catch::Contains("--recall-min-pairs UINT:UINT in [1 - 8]=2"));
  // preset fields show every preset that differs from the default (mixtral is llama's)
  CHECK_THAT(help, Catch::Contains("--norm NAME=layer (llama rms, gemma2 gemma, gemma gemma, mixtral rms)"));
  CHECK_THAT(help, Catch::Contains("--experts UINT=0 (mixtral 8)"));
  CHECK_THAT(help, Catch::Contains("--tie-embeddings, --no-tie-embeddings=off (gpt_neo on, gemma2 on, gemma on, starcoder2 on, bloom on)"));
}

TEST_CASE("train cli: --text on a file that is not UTF-8 text warns and still trains", "[cli]") {
  const fs::path dir = scratch("train_binary_text");
  const std::string binary = (dir / "binary").string(), prose = (dir / "prose.txt").string();
  {
    std::ofstream out(binary, std::ios::binary);
    for (int round = 0; round < 4; ++round)
      for (int b = 0; b < 256; ++b) out << char(b);
    std::ofstream text(prose);
    for (int i = 0; i < 40; ++i) text << "the quick brown fox jumps over the lazy dog\n";
  }
  const std::string small = " --context 8 --d-model 16 --heads 2 --layers 1 --batch 2 --steps 1"
                            " --eval-size 4 --skip-gradcheck --quiet --out '";
  const ProgramRun bad = run_program(TAPEGRAD_TRAIN_BIN,
                                     "--text '" + binary + "'" + small + (dir / "a").string() + "'", dir);
  INFO(bad.err);
  CHECK(bad.code == 0);  // a warning, not a refusal
  CHECK_THAT(bad.err, Catch::Contains("train_tiny_transformer: warning: --text " + binary));
  CHECK_THAT(bad.err, Catch::Contains("not valid UTF-8") && Catch::Contains("control characters"));
  const ProgramRun good = run_program(TAPEGRAD_TRAIN_BIN,
                                      "--text '" + prose + "'" + small + (dir / "b").string() + "'", dir);
  INFO(good.err);
  CHECK(good.code == 0);
  CHECK_THAT(good.err, !Catch::Contains("warning"));
}
#endif

#ifdef TAPEGRAD_SATURATION_BIN
TEST_CASE("saturation cli: an unwritable --doc is reported as --doc, not --out", "[cli]") {
  const fs::path dir = scratch("saturation_doc");
  // /proc is a directory nobody can create files in, root included
  const ProgramRun r = run_program(TAPEGRAD_SATURATION_BIN,
                                   "--quick --skip-sweep --skip-training --out '" +
                                       (dir / "o").string() + "' --doc /proc/REPORT.md", dir);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--doc") && Catch::Contains("/proc") && !Catch::Contains("--out"));
  CHECK_FALSE(fs::exists(dir / "o"));
}
#endif
