// Every command-line program on bad input: an unknown option, a missing value, a number out
// of range (NaN included), a missing or unreadable input, an output that cannot be written.
// Each must print exactly one line on stderr, starting with the program's name, exit with
// code 2, and leave nothing behind: no output directory, no partial file, no temporary.
// (train_tiny_transformer's and saturation's own tests cover their common cases; these add
// the rest, and cover examples/gradcheck and tools/rss_growth.)
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "json_file.hpp"
#include "run_program.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;

namespace {

using Result = tapegrad::test::ProgramRun;
using tapegrad::test::slurp;
fs::path scratch(const std::string& name) {
  return tapegrad::test::scratch_dir("test_cli_errors", name);
}
Result run(const std::string& binary, const std::string& args, const fs::path& dir) {
  return tapegrad::test::run_program(binary, args, dir);
}
std::size_t lines(const std::string& s) { return tapegrad::test::count_lines(s); }

// Files in `dir` (recursively), for "nothing was written".
std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) names.push_back(e.path().string());
  return names;
}

// The usage-error contract, for each argument list in `cases`.
void require_usage_errors(const std::string& binary, const std::string& name,
                          const std::vector<std::string>& cases, const fs::path& dir,
                          bool stdout_empty = true) {
  for (const std::string& args : cases) {
    INFO(name << " " << args);
    const Result r = run(binary, args, dir);
    INFO("stderr: " << r.err);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.rfind(name + ":", 0) == 0);
    if (stdout_empty) CHECK(r.out.empty());
    std::vector<std::string> left;
    for (const std::string& f : files_in(dir))
      if (fs::path(f).filename() != "a_file") left.push_back(f);
    INFO("left behind: " << (left.empty() ? std::string("nothing") : left.front()));
    CHECK(left.empty());  // only the regular file the cases point into
    for (const std::string& f : left) fs::remove_all(f);  // so the next case starts clean
  }
}

}  // namespace

#if defined(TAPEGRAD_GRADCHECK_BIN)
TEST_CASE("gradcheck cli: usage errors exit 2 with one line before any case runs", "[cli]") {
  const fs::path dir = scratch("gradcheck");
  const std::string file = (dir / "a_file").string();
  std::ofstream(file) << "x";
  require_usage_errors(TAPEGRAD_GRADCHECK_BIN, "gradcheck",
                       {"--bogus", "extra_positional", "--json", "--threads", "--threads -1",
                        "--threads 1000", "--threads abc", "--filter no_such_op",
                        "--json /nonexistent/dir/rows.json", "--json '" + dir.string() + "'",
                        "--json '" + file + "/rows.json'"},
                       dir);
}

TEST_CASE("gradcheck cli: --json writes the rows atomically and leaves no temporary file", "[cli]") {
  const fs::path dir = scratch("gradcheck_json");
  const fs::path json = dir / "rows.json";
  std::ofstream(json) << "old contents";
  const Result r = run(TAPEGRAD_GRADCHECK_BIN, "--filter relu --threads 2 --json '" + json.string() + "'", dir);
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("1 cases, all passed") != std::string::npos);
  const nlohmann::json rows = tapegrad::test::read_json(json);
  REQUIRE(rows.is_array());
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].at("op") == "relu");
  CHECK(rows[0].at("pass") == true);
  CHECK(rows[0].at("max_rel_error").get<double>() < 1e-6);
  CHECK(rows[0].at("input_shapes").is_string());
  CHECK(files_in(dir).size() == 1);
}
#endif

#if defined(TAPEGRAD_RSS_GROWTH_BIN)
TEST_CASE("rss_growth cli: usage errors exit 2 with one line", "[cli]") {
  const fs::path dir = scratch("rss_growth");
  std::ofstream(dir / "a_file") << "x";
  require_usage_errors(TAPEGRAD_RSS_GROWTH_BIN, "rss_growth",
                       {"--bogus", "--steps", "--steps 5", "--steps abc", "--threads -1",
                        "--d-model 6", "--batch 0", "--max-growth-kb -3", "positional"},
                       dir);
}
#endif

#if defined(TAPEGRAD_TRAIN_BIN)
TEST_CASE("train cli: unreadable inputs and unwritable outputs exit 2 and write nothing", "[cli]") {
  const fs::path dir = scratch("train");
  const std::string file = (dir / "a_file").string();
  std::ofstream(file) << "x";
  const std::string out = " --steps 1 --skip-gradcheck --quiet --out '" + (dir / "out").string() + "'";
  require_usage_errors(TAPEGRAD_TRAIN_BIN, "train_tiny_transformer",
                       {"--text '" + dir.string() + "'" + out,           // a directory as text
                        "--resume '" + dir.string() + "'" + out,         // a directory as checkpoint
                        "--resume '" + file + "'" + out,                 // not an npz
                        "--steps 1 --skip-gradcheck --out '" + file + "'",        // a file as --out
                        "--steps 1 --skip-gradcheck --out '" + file + "/sub'",    // under a file
                        "--threads 1000" + out, "--threads" + out, "--batch 1e9" + out},
                       dir);
}

TEST_CASE("train cli: an input that cannot be read is named in the error", "[cli]") {
  const fs::path dir = scratch("train_named");
  const std::string out = " --steps 1 --skip-gradcheck --quiet --out '" + (dir / "out").string() + "'";
  for (const std::string option : {"--text", "--resume"}) {
    const Result r = run(TAPEGRAD_TRAIN_BIN, option + " '" + dir.string() + "'" + out, dir);
    INFO(option << " -> " << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(option + " " + dir.string()) != std::string::npos);
  }
}

// NaN passes CLI11's Range (every comparison with NaN is false), and CLI11 reads "-1" into an
// unsigned seed as 2^64 - 1: the programs' own validators must catch both.
TEST_CASE("train cli: NaN options and negative seeds are usage errors", "[cli]") {
  const fs::path dir = scratch("train_nan");
  std::ofstream(dir / "a_file") << "x";
  const std::string out = " --steps 1 --skip-gradcheck --quiet --out '" + (dir / "out").string() + "'";
  require_usage_errors(TAPEGRAD_TRAIN_BIN, "train_tiny_transformer",
                       {"--lr nan" + out, "--weight-decay nan" + out, "--clip nan" + out,
                        "--min-lr nan" + out, "--temperature nan" + out, "--top-p nan" + out,
                        "--lr inf" + out, "--beta1 -nan" + out, "--seed -1" + out, "--seed ' -3'" + out,
                        "--seed 1.5" + out, "--attn-softcap 1e39" + out,
                        "--final-softcap 1e-44" + out, "--attn-softcap 1e400" + out,
                        "--positions alibi --rope-theta 500" + out,
                        "--positions learned --rope-scaling linear" + out,
                        "--experts-top-k 3" + out, "--qk-norm-gain 2" + out,
                        "--mlp-hidden 20 --mlp-ratio 2" + out, "--temperature 0.5" + out,
                        "--prompt hi" + out},
                       dir);
}
#endif

#if defined(TAPEGRAD_SATURATION_BIN)
TEST_CASE("saturation cli: unwritable outputs and bad lists exit 2 and write nothing", "[cli]") {
  const fs::path dir = scratch("saturation");
  const std::string file = (dir / "a_file").string();
  std::ofstream(file) << "x";
  const std::string quick = "--quick --skip-sweep --skip-training ";
  require_usage_errors(TAPEGRAD_SATURATION_BIN, "saturation",
                       {quick + "--out '" + file + "/sub'", quick + "--out '" + file + "'",
                        quick + "--out '" + (dir / "o").string() + "' --doc /nonexistent/dir/R.md",
                        quick + "--d-k 4,abc", quick + "--d-k",
                        // a skipped part's options would change nothing
                        quick + "--out '" + (dir / "o").string() + "' --d-k 4",
                        quick + "--out '" + (dir / "o").string() + "' --skip-lr --lr-steps 3"},
                       dir);
}

TEST_CASE("saturation cli: NaN options and negative seeds are usage errors", "[cli]") {
  const fs::path dir = scratch("saturation_nan");
  std::ofstream(dir / "a_file") << "x";
  const std::string quick = "--quick --skip-sweep --out '" + (dir / "o").string() + "' ";
  require_usage_errors(TAPEGRAD_SATURATION_BIN, "saturation",
                       {quick + "--lr nan", quick + "--min-lr nan", quick + "--weight-decay nan",
                        quick + "--seeds 1,-2", quick + "--sweep-seed -1", quick + "--clip inf",
                        quick + "--precision f16"},
                       dir);
}
#endif

#if defined(TAPEGRAD_INDUCTION_BIN)
TEST_CASE("induction cli: bad options and an unwritable --out exit 2 with one line and write nothing",
          "[cli][induction]") {
  const fs::path dir = scratch("induction");
  const std::string file = (dir / "a_file").string();
  std::ofstream(file) << "x";
  const std::string out = " --out '" + (dir / "o").string() + "'";
  require_usage_errors(TAPEGRAD_INDUCTION_BIN, "induction",
                       {"--bogus" + out, "--variants scaled,sideways" + out, "--variants nope" + out,
                        "--seeds -1" + out, "--lr nan" + out, "--steps 0" + out, "--half 1" + out,
                        "--d-model 30 --heads 4" + out, "--positions alibi" + out,
                        "--quick --out '" + file + "'", "--quick --out '" + file + "/sub'",
                        "--vocab 8" + out, "--vocab 31 --half 16" + out},
                       dir);
  // the options are named, the program once
  const Result r = run(TAPEGRAD_INDUCTION_BIN, "--vocab 8" + out, dir);
  INFO(r.err);
  CHECK(r.err.find("--vocab 8") != std::string::npos);
  CHECK(r.err.find("--half 16") != std::string::npos);
  CHECK(r.err.find("induction: induction") == std::string::npos);
}
#endif
