// What the programs read and write past the machine's limits: every text input (the
// trainer's --text and --tokenizer, the tokenizer's input and --tokenizer files) is a
// regular file of at most the stated size, so /dev/zero, a FIFO or a file over the limit is
// exit 2 with one line and nothing written; and a file-size limit (ulimit -f) makes a write
// fail with one line and exit 1 instead of SIGXFSZ ending the program without a word.
#if defined(TAPEGRAD_TRAIN_BIN) && defined(TAPEGRAD_TOKENIZER_BIN)
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "resume_helpers.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad::test;

namespace {

fs::path scratch(const std::string& name) { return scratch_dir("test_cli_input_limits", name); }

// `binary args` under `limits` (shell ulimit options, e.g. "-f 16") and a 60 s timeout, so
// that a program that waits on a FIFO or reads /dev/zero fails the test instead of hanging
// it. Under AddressSanitizer the address-space limit (-v) is left out: its shadow memory
// needs terabytes of it.
ProgramRun run_limited(const std::string& binary, const std::string& limits,
                       const std::string& args, const fs::path& dir) {
  std::string ulimits = limits;
#ifdef __SANITIZE_ADDRESS__
  if (ulimits.rfind("-v", 0) == 0) ulimits.clear();
#endif
  return run_program("/bin/bash", "-c \"" + (ulimits.empty() ? "" : "ulimit " + ulimits + "; ") +
                                      "exec timeout -s KILL 60 '" + binary + "' " + args + "\"",
                     dir);
}

// 2 GiB of address space: far more than any of these runs needs, far less than /dev/zero
// would take.
const std::string kAddressLimit = "-v 2000000";

void check_refused(const ProgramRun& r, const std::string& program, const std::string& message) {
  INFO("stderr: " << r.err);
  CHECK(r.code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.rfind(program + ": ", 0) == 0);
  CHECK(r.err.find(message) != std::string::npos);
  CHECK(r.out.empty());
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::vector<fs::path> temporaries(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) found.push_back(e.path());
  return found;
}

std::string corpus() {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the cat sat on the mat and the dog ran to the cat\n";
  return text;
}

}  // namespace

TEST_CASE("input limits: every tokenizer command refuses a device, a FIFO and a file over the "
          "limit, for its input and its --tokenizer", "[cli][limits][tokenizer_cli]") {
  const fs::path dir = scratch("tokenizer");
  write(dir / "text.txt", corpus());
  REQUIRE(run_program(TAPEGRAD_TOKENIZER_BIN, "train " + quoted(dir / "text.txt") +
                      " --vocab-size 260 --out " + quoted(dir / "tok.bpe"), dir).code == 0);
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
  const fs::path big = dir / "big.txt";
  std::ofstream(big).close();
  fs::resize_file(big, (std::uintmax_t(64) << 20) + 1);  // sparse: costs no disk
  const std::string tok = " --tokenizer " + quoted(dir / "tok.bpe");
  const fs::path out = dir / "never";
  for (const std::string& input : {std::string("/dev/zero"), quoted(dir / "fifo"), quoted(big)}) {
    const std::string why = input == quoted(big) ? "larger than the limit of 64 MiB"
                                                 : "is not a regular file";
    for (const std::string& command :
         {"train " + input + " --vocab-size 260 --out " + quoted(out),
          "encode " + input + tok + " --out " + quoted(out),
          "decode " + input + tok + " --out " + quoted(out), "stats " + input + tok}) {
      INFO(command);
      check_refused(run_limited(TAPEGRAD_TOKENIZER_BIN, kAddressLimit, command, dir), "tokenizer", why);
      CHECK_FALSE(fs::exists(out));
    }
    // the tokenizer file itself
    INFO("--tokenizer " << input);
    check_refused(run_limited(TAPEGRAD_TOKENIZER_BIN, kAddressLimit,
                              "encode " + quoted(dir / "text.txt") + " --tokenizer " + input, dir),
                  "tokenizer", why);
  }
}

TEST_CASE("input limits: the trainer refuses a FIFO and a device as --text or --tokenizer",
          "[cli][limits]") {
  const fs::path dir = scratch("trainer");
  write(dir / "text.txt", corpus());
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
  const fs::path out = dir / "never";
  const std::string run = std::string(kResumeTiny) + " --steps 1 --out " + quoted(out);
  check_refused(run_limited(TAPEGRAD_TRAIN_BIN, kAddressLimit, run + " --text " + quoted(dir / "fifo"), dir),
                "train_tiny_transformer", "is not a regular file");
  CHECK_FALSE(fs::exists(out));
  check_refused(run_limited(TAPEGRAD_TRAIN_BIN, kAddressLimit,
                            run + " --text " + quoted(dir / "text.txt") + " --tokenizer /dev/zero", dir),
                "train_tiny_transformer", "is not a regular file");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("file-size limit: a checkpoint that cannot be written is exit 1 with one line, the "
          "earlier checkpoint intact and no temporary file left", "[cli][limits][resume]") {
  const fs::path dir = scratch("fsize_trainer");
  const fs::path out = dir / "run";
  const std::string run = std::string(kResumeTiny) + " --steps 20 --warmup 5 --threads 1";
  REQUIRE(run_trainer(run + " --stop-at 10 --out " + quoted(out), dir).code == 0);
  const fs::path previous = out / "ckpt-00000010.npz";
  const std::string before = slurp(previous);
  REQUIRE(before.size() > 20000);
  // 16 KiB: the next checkpoint cannot be completed. Nothing ignores SIGXFSZ for the
  // program: it must do so itself.
  const ProgramRun r = run_limited(TAPEGRAD_TRAIN_BIN, "-f 16",
                                   "--resume " + quoted(previous) + " --checkpoint-every 5 --quiet "
                                   "--skip-gradcheck --threads 1 --eval-size 40 --out " + quoted(out),
                                   dir);
  INFO("stderr: " << r.err);
  CHECK(r.code == 1);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find("File too large") != std::string::npos);
  CHECK(r.err.find("ckpt-00000010.npz is intact") != std::string::npos);
  CHECK(slurp(previous) == before);
  CHECK(temporaries(dir).empty());
}

TEST_CASE("file-size limit: the tokenizer's outputs fail with one line, exit 1, no partial file",
          "[cli][limits][tokenizer_cli]") {
  const fs::path dir = scratch("fsize_tokenizer");
  write(dir / "text.txt", corpus());
  REQUIRE(run_program(TAPEGRAD_TOKENIZER_BIN, "train " + quoted(dir / "text.txt") +
                      " --vocab-size 260 --out " + quoted(dir / "tok.bpe"), dir).code == 0);
  // the ids of 10 KB of text take more than the 1 KiB allowed
  const ProgramRun r = run_limited(TAPEGRAD_TOKENIZER_BIN, "-f 1",
                                   "encode " + quoted(dir / "text.txt") + " --tokenizer " +
                                   quoted(dir / "tok.bpe") + " --out " + quoted(dir / "ids.txt"), dir);
  INFO("stderr: " << r.err);
  CHECK(r.code == 1);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.rfind("tokenizer: ", 0) == 0);
  CHECK(r.err.find("File too large") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "ids.txt"));
  CHECK(temporaries(dir).empty());
}
#endif
