// The tokenizer program end to end: train on a small text, encode, decode back to the same
// bytes (a special token included), stats; and misuse: exit 2, one line, no file written.
#include <catch2/catch.hpp>
#include <utility>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "run_program.hpp"

namespace fs = std::filesystem;
using namespace tapegrad::test;

namespace {

ProgramRun tokenizer(const std::string& args, const fs::path& dir) {
  return run_program(TAPEGRAD_TOKENIZER_BIN, args, dir);
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

std::string corpus() {
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "In the beginning the cat sat on the mat; then the cat ran. 12345 cats!<|endoftext|>\n";
  return text;
}

}  // namespace

TEST_CASE("tokenizer cli: train, encode and decode give back the same bytes", "[tokenizer_cli]") {
  const fs::path dir = scratch_dir("tokenizer_cli", "roundtrip");
  write(dir / "text.txt", corpus());
  ProgramRun r = tokenizer("train " + quoted(dir / "text.txt") +
                               " --vocab-size 300 --mode regex --special '<|endoftext|>' --out " +
                               quoted(dir / "tok.txt"), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(fs::exists(dir / "tok.txt"));
  // "tokenizer: N merges, 1 special tokens -> ...": the special token's id is 256 + N
  const std::size_t merges = std::stoul(r.err.substr(r.err.find(": ") + 2));
  const std::string special_id = std::to_string(256 + merges);

  r = tokenizer("encode " + quoted(dir / "text.txt") + " --tokenizer " + quoted(dir / "tok.txt") +
                    " --out " + quoted(dir / "ids.txt"), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::istringstream ids(slurp(dir / "ids.txt"));
  std::size_t specials = 0, tokens = 0;
  for (std::string id; ids >> id; ++tokens) specials += id == special_id;
  CHECK(specials == 40);  // one per line of the text, never split
  CHECK(tokens < corpus().size() / 2);  // the merges compress

  r = tokenizer("decode " + quoted(dir / "ids.txt") + " --tokenizer " + quoted(dir / "tok.txt") +
                    " --bytes --out " + quoted(dir / "back.txt"), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(slurp(dir / "back.txt") == corpus());

  r = tokenizer("stats " + quoted(dir / "text.txt") + " --tokenizer " + quoted(dir / "tok.txt"), dir);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("the") != std::string::npos);
}

TEST_CASE("tokenizer cli: misuse exits 2 with one line and writes nothing", "[tokenizer_cli]") {
  const fs::path dir = scratch_dir("tokenizer_cli", "misuse");
  write(dir / "text.txt", corpus());
  write(dir / "bad_tok.txt", "not a tokenizer file\n");
  const std::string text = quoted(dir / "text.txt"), out = quoted(dir / "out.txt");
  for (const std::string& args :
       {"train " + text + " --vocab-size 10 --out " + out,
        "train " + text + " --vocab-size 300 --mode fancy --out " + out, std::string(""),
        "encode " + text + " --tokenizer " + quoted(dir / "bad_tok.txt") + " --out " + out}) {
    const ProgramRun r = tokenizer(args, dir);
    INFO(args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(!fs::exists(dir / "out.txt"));
  }
  // an argument nothing takes is named, after a subcommand or in place of one
  for (const auto& [args, named] : std::vector<std::pair<std::string, std::string>>{
           {"train " + text + " --vocab-size 300 --out " + out + " --bogus", "--bogus"},
           {"train " + text + " extra --vocab-size 300 --out " + out, "extra"},
           {"--bogus", "--bogus"}}) {
    const ProgramRun r = tokenizer(args, dir);
    INFO(args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("unexpected argument: " + named + " (see --help)") != std::string::npos);
    CHECK(!fs::exists(dir / "out.txt"));
  }
}
