// The tokenizer program end to end: train on a small text, encode, decode back to the same
// bytes (a special token included), stats, also with a tokenizer.json (a file or its
// folder); and misuse: exit 2, one line, no file written.
#include <catch2/catch.hpp>
#include <utility>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpt2_ordered_tokenizer.hpp"
#include "run_program.hpp"
#include "text/tokenizer_json.hpp"
#include "test_paths.hpp"

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

TEST_CASE("tokenizer cli: encode, decode and stats take a tokenizer.json or its folder", "[tokenizer_cli]") {
  const fs::path dir = scratch_dir("tokenizer_cli", "tokenizer_json");
  const std::string text = corpus();
  write(dir / "text.txt", text);
  // GPT-2's byte order: ids that minbpe's text form cannot hold
  const tapegrad::text::BpeTokenizer tok = gpt2_ordered_tokenizer(text, 30);
  REQUIRE_FALSE(tok.is_minbpe());
  tapegrad::text::write_tokenizer_json(tok, (dir / "tokenizer.json").string());
  for (const fs::path& given : {dir / "tokenizer.json", dir}) {
    INFO(given.string());
    ProgramRun r = tokenizer("encode " + quoted(dir / "text.txt") + " --tokenizer " + quoted(given) +
                                 " --out " + quoted(dir / "ids.txt"), dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    std::vector<std::int32_t> ids;
    std::istringstream listed(slurp(dir / "ids.txt"));
    for (std::int32_t id; listed >> id;) ids.push_back(id);
    CHECK(ids == tok.encode(text));

    r = tokenizer("decode " + quoted(dir / "ids.txt") + " --tokenizer " + quoted(given) + " --bytes", dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out == text);

    r = tokenizer("stats " + quoted(dir / "text.txt") + " --tokenizer " + quoted(given), dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("(vocab 287: 30 merges, 1 special)") != std::string::npos);
    fs::remove(dir / "ids.txt");
  }
  // a folder without one is a usage error naming it
  fs::create_directories(dir / "empty");
  const ProgramRun r = tokenizer("encode " + quoted(dir / "text.txt") + " --tokenizer " +
                                 quoted(dir / "empty") + " --out " + quoted(dir / "ids.txt"), dir);
  CHECK(r.code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find("empty holds no tokenizer.json") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "ids.txt"));
}

TEST_CASE("tokenizer cli: a bad value is exit 2 naming the option or the input", "[tokenizer_cli]") {
  const fs::path dir = scratch_dir("tokenizer_cli", "bad_values");
  write(dir / "text.txt", corpus());
  REQUIRE(tokenizer("train " + quoted(dir / "text.txt") + " --vocab-size 300 --out " +
                        quoted(dir / "tok.txt"), dir).code == 0);
  write(dir / "ids.txt", "1 2 5000\n");  // the vocabulary has at most 300 ids
  const std::string tok = " --tokenizer " + quoted(dir / "tok.txt");
  for (const auto& [args, named] : std::vector<std::pair<std::string, std::string>>{
           {"decode " + quoted(dir / "ids.txt") + tok + " --out " + quoted(dir / "out.txt"),
            "ids.txt: BpeTokenizer: token id 5000 is outside [0, "},
           {"stats " + quoted(dir / "text.txt") + tok + " --top -1", "--top"},
           {"stats " + quoted(dir / "text.txt") + tok + " --top ' -2'", "--top"}}) {
    const ProgramRun r = tokenizer(args, dir);
    INFO(args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(named) != std::string::npos);
    CHECK(r.out.empty());
    CHECK(!fs::exists(dir / "out.txt"));
  }
}

TEST_CASE("tokenizer cli: stats shows a long token shortened, with its length", "[tokenizer_cli]") {
  const fs::path dir = scratch_dir("tokenizer_cli", "long_token");
  write(dir / "a.txt", std::string(100000, 'a'));
  // 17 merges join the run of a's into tokens of up to 98304 bytes
  const ProgramRun trained = tokenizer("train " + quoted(dir / "a.txt") + " --vocab-size 273 "
                                       "--mode basic --out " + quoted(dir / "tok.txt"), dir);
  INFO(trained.err);
  REQUIRE(trained.code == 0);
  const ProgramRun r = tokenizer("stats " + quoted(dir / "a.txt") + " --tokenizer " +
                                 quoted(dir / "tok.txt"), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  // every token is a merged one: the lengths shown, times their uses, add up to the text
  std::size_t bytes = 0, shortened = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    INFO(line.substr(0, 200));
    CHECK(line.size() < 120);
    const std::size_t open = line.find('\''), close = line.rfind('\'');
    if (open == std::string::npos || close == open) continue;
    const std::size_t uses = std::stoul(line);
    const std::size_t length = line.find("...' (", open);
    if (length == std::string::npos) {
      bytes += uses * (close - open - 1);
    } else {
      ++shortened;
      bytes += uses * std::stoul(line.substr(length + 6));
    }
  }
  CHECK(shortened > 0);
  CHECK(bytes == 100000);
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
