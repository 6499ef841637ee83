// train_tiny_transformer --resume and the settings a run may change on the way: the
// objective's weights (moe_aux_coef, moe_z_coef) are accepted with a notice and used, while
// an architecture option that disagrees is still refused; the matrix products' precision
// is part of the training state, so a bf16 run resumes in bf16 and ends bit for bit where
// the straight run ends.
#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_TRAIN_BIN)
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "json_file.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/io/npz.hpp"
#include "resume_helpers.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::test;

namespace {

fs::path scratch(const std::string& name) { return scratch_dir("test_resume_settings", name); }

const std::string kRun = std::string(kResumeTiny) + " --steps 20 --warmup 5 --threads 1";
const char* const kNoLongerMatches = "no longer matches an uninterrupted one";

std::string ckpt(std::size_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "ckpt-%08zu.npz", step);
  return name;
}

std::string precision_of(const fs::path& out) {
  return field(read_json(out / "metrics.json"), "precision").get<std::string>();
}

}  // namespace

TEST_CASE("resume: a changed objective weight is accepted with the notice and used, and a changed "
          "architecture is refused", "[resume][train_cli]") {
  const fs::path dir = scratch("objective");
  const fs::path part = dir / "part";
  // two experts, both taken by every token: each f_e is 1, so the raw load-balancing loss
  // (reported unweighted) is E x (P_0 + P_1) = 2 whatever the router learns
  const std::string moe = kRun + " --arch mixtral --experts 2 --experts-top-k 2";
  REQUIRE(run_trainer(moe + " --stop-at 10 --out " + quoted(part), dir).code == 0);
  const std::string resume = "--resume " + quoted(part) + " --quiet --skip-gradcheck --eval-size 40";

  const ProgramRun changed = run_trainer(resume + " --moe-aux-coef 0.05 --out " + quoted(dir / "aux"), dir);
  INFO(changed.err);
  REQUIRE(changed.code == 0);
  CHECK(changed.out.find("--moe-aux-coef 0.05 differs from the checkpoint's 0.01") != std::string::npos);
  CHECK(changed.out.find(kNoLongerMatches) != std::string::npos);
  const auto metrics = read_json(dir / "aux" / "metrics.json");
  CHECK(field(metrics, "moe_aux_coef").get<double>() == 0.05);
  CHECK(field(metrics, "final_moe_aux_loss").get<double>() == Approx(2.0).epsilon(1e-5));
  // the model file records the coefficient it trained with
  CHECK(read_checkpoint_config((dir / "aux" / "model.npz").string()).moe_aux_coef == 0.05);

  // the same value as the checkpoint's is no change: no notice
  const ProgramRun same = run_trainer(resume + " --moe-z-coef 0.001 --out " + quoted(dir / "same"), dir);
  INFO(same.err);
  CHECK(same.code == 0);
  CHECK(same.out.find(kNoLongerMatches) == std::string::npos);

  const ProgramRun experts = run_trainer(resume + " --experts 4 --out " + quoted(dir / "never"), dir);
  CHECK(experts.code == 2);
  CHECK(count_lines(experts.err) == 1);
  CHECK(experts.err.find("--experts 4 disagrees with the checkpoint's experts 2") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "never"));
  // an objective weight out of its range is refused like any option
  const ProgramRun negative = run_trainer(resume + " --moe-aux-coef -1 --out " + quoted(dir / "never"), dir);
  CHECK(negative.code == 2);
  CHECK(count_lines(negative.err) == 1);
  CHECK(negative.err.find("moe_aux_coef") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "never"));
}

TEST_CASE("resume: an objective weight of a dense checkpoint changes nothing and is refused",
          "[resume][train_cli]") {
  const fs::path dir = scratch("dense_objective");
  REQUIRE(run_trainer(kRun + " --stop-at 5 --out " + quoted(dir / "part"), dir).code == 0);
  const ProgramRun r = run_trainer("--resume " + quoted(dir / "part") +
                                   " --moe-aux-coef 0.05 --quiet --out " + quoted(dir / "never"), dir);
  CHECK(r.code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find("--moe-aux-coef applies to") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "never"));
}

TEST_CASE("resume: a bf16 run resumes in bf16 and ends bit for bit where the straight run ends",
          "[resume][train_cli]") {
  const fs::path dir = scratch("precision");
  const fs::path ref = dir / "ref", f32 = dir / "f32", part = dir / "part";
  const std::string bf16 = kRun + " --precision bf16";
  REQUIRE(run_trainer(bf16 + " --checkpoint-every 20 --out " + quoted(ref), dir).code == 0);
  REQUIRE(run_trainer(bf16 + " --stop-at 10 --out " + quoted(part), dir).code == 0);
  // the rounding shows in the model: a run that lost it cannot end where this one does
  REQUIRE(run_trainer(kRun + " --checkpoint-every 20 --out " + quoted(f32), dir).code == 0);
  REQUIRE(state_difference(ref / ckpt(20), f32 / ckpt(20)) != "");

  // as the SIGINT line suggests: --resume and nothing else of the run's options
  const std::string resume = "--resume " + quoted(part / ckpt(10)) +
                             " --quiet --skip-gradcheck --eval-size 40 --checkpoint-every 20";
  const ProgramRun rest = run_trainer(resume + " --out " + quoted(dir / "rest"), dir);
  INFO(rest.err);
  REQUIRE(rest.code == 0);
  CHECK(rest.out.find(kNoLongerMatches) == std::string::npos);
  CHECK(state_difference(ref / ckpt(20), dir / "rest" / ckpt(20)) == "");
  CHECK(precision_of(dir / "rest") == "bf16");

  // another --precision is the user's choice: used, with the notice
  const ProgramRun changed = run_trainer(resume + " --precision f32 --out " + quoted(dir / "changed"), dir);
  INFO(changed.err);
  REQUIRE(changed.code == 0);
  CHECK(changed.out.find("--precision f32 differs from the checkpoint's bf16") != std::string::npos);
  CHECK(changed.out.find(kNoLongerMatches) != std::string::npos);
  CHECK(precision_of(dir / "changed") == "f32");
}

TEST_CASE("resume: a checkpoint written before the precision was recorded resumes in f32",
          "[resume][train_cli]") {
  const fs::path dir = scratch("precision_old");
  REQUIRE(run_trainer(kRun + " --precision bf16 --stop-at 10 --out " + quoted(dir / "part"), dir).code == 0);
  // the training state of format 1: no precision entry
  std::vector<NpzEntry> entries = load_npz((dir / "part" / ckpt(10)).string());
  std::vector<NpzEntry> old;
  for (NpzEntry& e : entries) {
    if (e.name == std::string(kTrainingPrefix) + "precision") continue;
    if (e.name == std::string(kTrainingPrefix) + "format") e.as<std::int64_t>().data()[0] = 1;
    old.push_back(std::move(e));
  }
  save_npz((dir / "old.npz").string(), old);
  const ProgramRun r = run_trainer("--resume " + quoted(dir / "old.npz") +
                                   " --quiet --skip-gradcheck --eval-size 40 --out " + quoted(dir / "rest"), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find(kNoLongerMatches) == std::string::npos);
  CHECK(precision_of(dir / "rest") == "f32");
}

#endif
