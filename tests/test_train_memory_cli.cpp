// train_tiny_transformer's options for models that fill the memory: --grad-accum (the
// batch as micro-batches: the same curve to rounding, part of the training state) and
// --checkpoint-activations (the same curve bit for bit, not part of the model file, taken
// on --resume without a notice), and the memory estimate both shrink.
#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_TRAIN_BIN)
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "json_file.hpp"
#include "nn/io/checkpoint.hpp"
#include "resume_helpers.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::test;

namespace {

fs::path scratch(const std::string& name) { return scratch_dir("test_train_memory_cli", name); }

const std::string kRun = std::string(kResumeTiny) + " --steps 20 --warmup 5 --threads 1";

// loss.csv's loss column
std::vector<double> losses(const fs::path& out) {
  std::istringstream in(slurp(out / "loss.csv"));
  std::string line;
  std::getline(in, line);  // header
  std::vector<double> v;
  while (std::getline(in, line)) {
    const std::size_t a = line.find(','), b = line.find(',', a + 1);
    v.push_back(std::stod(line.substr(a + 1, b - a - 1)));
  }
  return v;
}

// The bytes of `part` in the trainer's "out of memory: ... needs about X (part Y, ...)" line.
double part_bytes(const std::string& err, const std::string& part) {
  const std::size_t at = err.find(" " + part + " ");
  REQUIRE(at != std::string::npos);
  std::istringstream in(err.substr(at + part.size() + 2));
  double value = 0;
  std::string unit;
  in >> value >> unit;
  const std::map<std::string, double> scale = {{"bytes", 1},
                                               {"bytes,", 1},
                                               {"KiB", 1024.0},
                                               {"MiB", 1024.0 * 1024},
                                               {"GiB", 1024.0 * 1024 * 1024}};
  if (!unit.empty() && (unit.back() == ',' || unit.back() == ')')) unit.pop_back();
  REQUIRE(scale.count(unit) == 1);
  return value * scale.at(unit);
}

}  // namespace

TEST_CASE("train: --grad-accum runs the same batches to the same curve, and must divide --batch",
          "[train_cli][grad_accum]") {
  const fs::path dir = scratch("accum");
  REQUIRE(run_trainer(kRun + " --out " + quoted(dir / "whole"), dir).code == 0);
  const ProgramRun accum = run_trainer(kRun + " --grad-accum 4 --out " + quoted(dir / "accum"), dir);
  INFO(accum.err);
  REQUIRE(accum.code == 0);
  const std::vector<double> a = losses(dir / "whole"), b = losses(dir / "accum");
  REQUIRE(a.size() == 20);
  REQUIRE(b.size() == 20);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).epsilon(1e-4));
  CHECK(field(read_json(dir / "accum" / "metrics.json"), "grad_accum").get<std::size_t>() == 4);
  // float32 sums in another order: not the same bits (or the check above proves little)
  CHECK(slurp(dir / "whole" / "loss.csv") != slurp(dir / "accum" / "loss.csv"));

  const ProgramRun bad = run_trainer(kRun + " --grad-accum 3 --out " + quoted(dir / "bad"), dir);
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--grad-accum 3 does not divide the 8 sequences of --batch") != std::string::npos);
  CHECK(count_lines(bad.err) == 1);
  CHECK_FALSE(fs::exists(dir / "bad"));
}

TEST_CASE("train: --grad-accum is part of the training state and carries over on --resume",
          "[train_cli][grad_accum][resume]") {
  const fs::path dir = scratch("accum_resume");
  const std::string run = kRun + " --grad-accum 2";
  REQUIRE(run_trainer(run + " --out " + quoted(dir / "ref"), dir).code == 0);
  REQUIRE(run_trainer(run + " --stop-at 10 --out " + quoted(dir / "part"), dir).code == 0);
  const ProgramRun rest = run_trainer("--resume " + quoted(dir / "part") + " --quiet --skip-gradcheck "
                                      "--eval-size 40 --out " + quoted(dir / "part"), dir);
  INFO(rest.err);
  REQUIRE(rest.code == 0);
  CHECK(rest.out.find("no longer matches") == std::string::npos);
  CHECK(slurp(dir / "part" / "loss.csv") == slurp(dir / "ref" / "loss.csv"));
  // another count is taken, with the notice that the arithmetic changed
  REQUIRE(run_trainer(run + " --stop-at 10 --out " + quoted(dir / "other"), dir).code == 0);
  const ProgramRun other = run_trainer("--resume " + quoted(dir / "other") + " --grad-accum 4 --quiet "
                                       "--skip-gradcheck --eval-size 40 --out " + quoted(dir / "other"), dir);
  REQUIRE(other.code == 0);
  CHECK(other.out.find("--grad-accum 4 differs from the checkpoint's 2") != std::string::npos);
}

TEST_CASE("train: --checkpoint-activations trains the same curve bit for bit and is the run's own",
          "[train_cli][checkpoint_activations]") {
  const fs::path dir = scratch("checkpointed");
  REQUIRE(run_trainer(kRun + " --out " + quoted(dir / "plain"), dir).code == 0);
  const ProgramRun on = run_trainer(kRun + " --checkpoint-activations --out " + quoted(dir / "on"), dir);
  INFO(on.err);
  REQUIRE(on.code == 0);
  CHECK(slurp(dir / "on" / "loss.csv") == slurp(dir / "plain" / "loss.csv"));
  CHECK(field(read_json(dir / "on" / "metrics.json"), "checkpoint_activations").get<std::string>() == "true");
  // the model file does not hold it: it is how a run computes, not the model
  CHECK_FALSE(read_checkpoint_config((dir / "on" / "model.npz").string()).checkpoint_activations);

  // a run stopped without it resumes with it (and the reverse) with no notice, and ends
  // where the straight run ends
  REQUIRE(run_trainer(kRun + " --stop-at 10 --out " + quoted(dir / "part"), dir).code == 0);
  const ProgramRun rest = run_trainer("--resume " + quoted(dir / "part") + " --checkpoint-activations "
                                      "--quiet --skip-gradcheck --eval-size 40 --out " + quoted(dir / "part"), dir);
  INFO(rest.err);
  REQUIRE(rest.code == 0);
  CHECK(rest.out.find("no longer matches") == std::string::npos);
  CHECK(slurp(dir / "part" / "loss.csv") == slurp(dir / "plain" / "loss.csv"));

  const ProgramRun moe = run_trainer(kRun + " --arch mixtral --checkpoint-activations --out " +
                                         quoted(dir / "moe"), dir);
  CHECK(moe.code == 2);
  CHECK(moe.err.find("checkpoint_activations does not work with experts=8") != std::string::npos);
  CHECK(count_lines(moe.err) == 1);
}

TEST_CASE("train: the memory estimate counts a micro-batch and the checkpointed blocks",
          "[train_cli][grad_accum][checkpoint_activations]") {
  const fs::path dir = scratch("estimate");
  // a text-sized model, so that the step's activations outweigh an evaluation batch's
  const std::string run = "--task repeat --repeat-length 64 --d-model 64 --heads 4 --layers 8 "
                          "--batch 64 --eval-size 8 --skip-gradcheck --quiet --max-memory 1K";
  const ProgramRun plain = run_trainer(run + " --out " + quoted(dir / "a"), dir);
  const ProgramRun accum = run_trainer(run + " --grad-accum 8 --out " + quoted(dir / "b"), dir);
  const ProgramRun checkpointed = run_trainer(run + " --checkpoint-activations --out " + quoted(dir / "c"), dir);
  for (const ProgramRun* r : {&plain, &accum, &checkpointed}) {
    INFO(r->err);
    CHECK(r->code == 2);
    CHECK(r->err.find("out of memory: training this model needs about") != std::string::npos);
    CHECK(count_lines(r->err) == 1);
  }
  const double a = part_bytes(plain.err, "activations"), b = part_bytes(accum.err, "activations"),
               c = part_bytes(checkpointed.err, "activations");
  INFO("activations: plain " << a << ", --grad-accum 8 " << b << ", --checkpoint-activations " << c);
  CHECK(b == Approx(a / 8).epsilon(0.01));
  CHECK(c < a / 3);
}
#endif
