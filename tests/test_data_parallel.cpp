// train_tiny_transformer --data-parallel under mpirun (2 ranks on this machine): the same loss
// curve as one process with the same global batch (within 1e-5 relative over 50 steps: the
// two runs differ only in the order the gradient sums are added in); the ranks end with
// identical parameters and rank 0 alone writes; its checkpoints resume in a single process
// (evaluated alone, and a run stopped at step 20 continuing on the same curve);
// ranks built from different seeds are refused at start-up; a batch the ranks cannot split
// is a usage error; a rank that dies brings the others down instead of leaving them waiting.
#if defined(TAPEGRAD_TRAIN_BIN) && defined(TAPEGRAD_MPIEXEC)
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "json_file.hpp"
#include "run_program.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using tapegrad::test::ProgramRun;

namespace {

using tapegrad::test::field;
using tapegrad::test::read_json;

fs::path scratch(const std::string& name) {
  return tapegrad::test::scratch_dir("test_data_parallel", name);
}
std::string sh_arg(const fs::path& p) { return "'" + p.string() + "'"; }
// `text` as one shell word, whatever quotes it holds
std::string shell_word(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The trainer on `ranks` MPI ranks, bounded by `timeout` seconds (exit 124 when it ran out).
ProgramRun run_ranks(int ranks, const std::string& args, const fs::path& dir, int timeout = 240,
                     const std::string& env = "") {
  const std::string cmd = env + " timeout " + std::to_string(timeout) + " '" + TAPEGRAD_MPIEXEC +
                          "' --allow-run-as-root --oversubscribe -np " + std::to_string(ranks) +
                          " '" + TAPEGRAD_TRAIN_BIN + "' --data-parallel " + args;
  return tapegrad::test::run_program("/bin/sh", "-c " + shell_word(cmd), dir);
}
ProgramRun run_single(const std::string& args, const fs::path& dir) {
  return tapegrad::test::run_program(TAPEGRAD_TRAIN_BIN, args, dir);
}

const std::string kModel =
    "--task sort --d-model 32 --heads 4 --layers 2 --batch 16 --steps 50 --warmup 5 "
    "--eval-size 100 --skip-gradcheck --threads 1 --quiet";

// loss.csv's loss column, one value per step.
std::vector<double> losses(const fs::path& csv) {
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  std::vector<double> out;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string step, loss;
    std::getline(ss, step, ',');
    std::getline(ss, loss, ',');
    out.push_back(std::stod(loss));
  }
  return out;
}

}  // namespace

TEST_CASE("data parallel: 2 ranks follow 1 process's loss curve, end identical, resume alone",
          "[data_parallel]") {
  const fs::path dir = scratch("curve");
  const ProgramRun one = run_single(kModel + " --seed 3 --out " + sh_arg(dir / "one"), dir);
  INFO(one.err);
  REQUIRE(one.code == 0);
  const ProgramRun two = run_ranks(2, kModel + " --seed 3 --out " + sh_arg(dir / "two"), dir);
  INFO(two.out << two.err);
  REQUIRE(two.code == 0);

  const std::vector<double> a = losses(dir / "one" / "loss.csv"), b = losses(dir / "two" / "loss.csv");
  REQUIRE(a.size() == 50);
  REQUIRE(b.size() == 50);
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / a[i]);
  INFO("worst relative difference of the loss over 50 steps: " << worst);
  CHECK(worst <= 1e-5);
  CHECK(a.back() < 0.8 * a.front());  // it did train: the comparison is not of flat curves

  // rank 0 alone printed (one held-out line) and the ranks' parameters agree bit for bit
  CHECK(tapegrad::test::count_lines(std::regex_replace(
            two.out, std::regex("^(?!held-out).*\n", std::regex::multiline), "")) == 1);
  CHECK(std::regex_search(two.out, std::regex("data-parallel: 2 ranks.*parameters identical")));
  const nlohmann::json metrics = read_json(dir / "two" / "metrics.json");

  // the data-parallel checkpoint, evaluated and trained on in one process
  const ProgramRun resumed = run_single(
      "--resume " + sh_arg(dir / "two" / "model.npz") + " --steps 0 --eval-size 100 --quiet "
      "--threads 1 --out " + sh_arg(dir / "resumed"), dir);
  INFO(resumed.err);
  REQUIRE(resumed.code == 0);
  CHECK(field(read_json(dir / "resumed" / "metrics.json"), "eval_loss") ==
        field(metrics, "eval_loss"));

  // stopped at step 20 under mpirun, continued to 50 in one process: the single run's curve
  const ProgramRun stopped = run_ranks(
      2, kModel + " --seed 3 --checkpoint-every 20 --stop-at 20 --out " + sh_arg(dir / "three"), dir);
  INFO(stopped.out << stopped.err);
  REQUIRE(stopped.code == 0);
  const ProgramRun continued = run_single(
      "--resume " + sh_arg(dir / "three" / "ckpt-00000020.npz") + " --quiet --threads 1 --out " +
      sh_arg(dir / "four"), dir);
  INFO(continued.err);
  REQUIRE(continued.code == 0);
  const std::vector<double> c = losses(dir / "four" / "loss.csv");
  REQUIRE(c.size() == 50);
  double worst_continued = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst_continued = std::max(worst_continued, std::abs(a[i] - c[i]) / a[i]);
  INFO("worst relative difference, 20 steps on 2 ranks then 30 in one process: " << worst_continued);
  CHECK(worst_continued <= 1e-5);
}

TEST_CASE("data parallel: ranks whose parameters differ are refused at start-up",
          "[data_parallel]") {
  const fs::path dir = scratch("seeds");
  // MPMD: rank 0 and rank 1 of one job, built from different seeds
  const std::string trainer = std::string("'") + TAPEGRAD_TRAIN_BIN + "' --data-parallel " + kModel +
                              " --out " + sh_arg(dir / "out");
  const std::string cmd = std::string("timeout 120 '") + TAPEGRAD_MPIEXEC +
                          "' --allow-run-as-root --oversubscribe -np 1 " + trainer +
                          " --seed 1 : -np 1 " + trainer + " --seed 2";
  const ProgramRun r = tapegrad::test::run_program("/bin/sh", "-c " + shell_word(cmd), dir);
  INFO(r.out << r.err);
  CHECK(r.code == 2);
  CHECK(std::regex_search(r.err, std::regex("parameters differ between ranks at start-up")));
  CHECK_FALSE(fs::exists(dir / "out" / "model.npz"));
}

TEST_CASE("data parallel: a global batch the ranks cannot split is a usage error",
          "[data_parallel]") {
  const fs::path dir = scratch("batch");
  const ProgramRun r = run_ranks(2, "--task sort --batch 15 --steps 5 --quiet --out " +
                                        sh_arg(dir / "out"), dir, 120);
  INFO(r.out << r.err);
  CHECK(r.code == 2);
  CHECK(std::regex_search(r.err, std::regex("--batch 15 is not divisible by the 2 ranks")));
  CHECK_FALSE(fs::exists(dir / "out"));
}

TEST_CASE("data parallel: a rank that dies makes the others exit with an error",
          "[data_parallel]") {
  const fs::path dir = scratch("dies");
  // rank 1 leaves at step 10 without a word, as a killed process would
  const ProgramRun r = run_ranks(2, kModel + " --steps 200 --out " + sh_arg(dir / "out"), dir,
                                 60, "TAPEGRAD_DATA_PARALLEL_EXIT_AT=1:10");
  INFO(r.out << r.err);
  CHECK(r.code != 0);
  CHECK(r.code != 124);  // it did not run into the timeout
  CHECK_FALSE(fs::exists(dir / "out" / "model.npz"));
}

#endif
