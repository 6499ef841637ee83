// train_tiny_transformer --resume of a training checkpoint: a run stopped at step k and
// resumed ends bit for bit where the uninterrupted run ends (parameters, AdamW's moments
// and step counts, the batch generator, the loss curve), at 1 and 2 threads and on the
// gemma2 and bloom presets; a model-only checkpoint still resumes, as weights only; a
// checkpoint that does not fit is refused before --out is created.
#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_TRAIN_BIN)
#include <catch2/catch.hpp>
#include <set>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "apps/train/checkpoints.hpp"
#include "apps/train/progress.hpp"
#include "nn/io/checkpoint.hpp"
#include "json_file.hpp"
#include "resume_helpers.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::test;

namespace {

fs::path scratch(const std::string& name) { return scratch_dir("test_resume_cli", name); }

const std::string kRun = std::string(kResumeTiny) + " --steps 20 --warmup 5";

std::vector<std::string> list_checkpoints_in(const fs::path& dir) {
  return train::list_checkpoints(dir.string());
}

std::string ckpt(std::size_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "ckpt-%08zu.npz", step);
  return name;
}

// `path`'s entries with `edit` applied, written to `to`.
template <class Edit>
void rewrite(const fs::path& path, const fs::path& to, Edit edit) {
  std::vector<NpzEntry> entries = load_npz(path.string());
  edit(entries);
  save_npz(to.string(), entries);
}

}  // namespace

TEST_CASE("resume: a run stopped at step k and resumed ends bit for bit where the straight run ends", "[resume][train_cli]") {
  for (int threads : {1, 2}) {
    const fs::path dir = scratch("bitwise_" + std::to_string(threads));
    const std::string t = " --threads " + std::to_string(threads);
    ProgramRun ref = run_trainer(kRun + t + " --checkpoint-every 20 --out " + quoted(dir / "ref"), dir);
    INFO(ref.err);
    REQUIRE(ref.code == 0);
    // k = 1, a step in the warm-up (5 steps), and one in the cosine decay
    for (std::size_t k : {1, 3, 12}) {
      INFO("threads " << threads << ", stopped after step " << k);
      const fs::path part = dir / ("part_" + std::to_string(k)), rest = dir / ("rest_" + std::to_string(k));
      ProgramRun stop = run_trainer(kRun + t + " --stop-at " + std::to_string(k) + " --out " + quoted(part), dir);
      INFO(stop.err);
      REQUIRE(stop.code == 0);
      REQUIRE(fs::is_regular_file(part / ckpt(k)));
      CHECK_FALSE(fs::exists(part / "model.npz"));  // stopped, not finished
      // --steps is not repeated: the run's total comes from the checkpoint
      ProgramRun resumed = run_trainer(std::string("--resume ") + quoted(part / ckpt(k)) + t +
                                 " --quiet --skip-gradcheck --eval-size 40 --checkpoint-every 20 --out " +
                                 quoted(rest), dir);
      INFO(resumed.err);
      REQUIRE(resumed.code == 0);
      CHECK(state_difference(dir / "ref" / ckpt(20), rest / ckpt(20)) == "");
      CHECK(slurp(rest / "loss.csv") == slurp(dir / "ref" / "loss.csv"));
    }
  }
}

TEST_CASE("resume: gemma2 and bloom runs stopped and resumed end bit for bit where the straight "
          "run ends", "[resume][train_cli][gemma2][bloom]") {
  for (const std::string arch : {"gemma2", "bloom"}) {
    INFO(arch);
    const fs::path dir = scratch("preset_" + arch);
    // two layers: gemma2's window (half the context) on layer 0, layer 1 global
    const std::string run = "--arch " + arch + " --d-model 16 --heads 2 --layers 2 --batch 8 "
                            "--eval-size 40 --quiet --skip-gradcheck --seed 3 --steps 12 "
                            "--warmup 3 --threads 1";
    const ProgramRun ref = run_trainer(run + " --checkpoint-every 12 --out " + quoted(dir / "ref"), dir);
    INFO(ref.err);
    REQUIRE(ref.code == 0);
    const ProgramRun stop = run_trainer(run + " --stop-at 5 --out " + quoted(dir / "part"), dir);
    INFO(stop.err);
    REQUIRE(stop.code == 0);
    const ProgramRun resumed = run_trainer(
        "--resume " + quoted(dir / "part" / ckpt(5)) + " --threads 1 --quiet --skip-gradcheck "
        "--eval-size 40 --checkpoint-every 12 --out " + quoted(dir / "rest"), dir);
    INFO(resumed.err);
    REQUIRE(resumed.code == 0);
    CHECK(state_difference(dir / "ref" / ckpt(12), dir / "rest" / ckpt(12)) == "");
    CHECK(slurp(dir / "rest" / "loss.csv") == slurp(dir / "ref" / "loss.csv"));
    // the run was the preset's model: its own parts in the weights
    const std::vector<NpzEntry> entries = load_npz((dir / "rest" / ckpt(12)).string());
    CHECK(find_npz_entry(entries, arch == "gemma2" ? "blocks.1.norm2_post.weight"
                                                   : "embed_norm.bias") != nullptr);
  }
}

TEST_CASE("resume: a model-only checkpoint resumes as weights only, with a notice, and ends elsewhere", "[resume][train_cli]") {
  // The trap a training checkpoint closes: the same weights with fresh AdamW moments, a
  // schedule from step 0 and other batches do not continue the run.
  const fs::path dir = scratch("weights_only");
  REQUIRE(run_trainer(kRun + " --threads 1 --checkpoint-every 20 --out " + quoted(dir / "ref"), dir).code == 0);
  REQUIRE(run_trainer(kRun + " --threads 1 --stop-at 10 --out " + quoted(dir / "part"), dir).code == 0);
  rewrite(dir / "part" / ckpt(10), dir / "weights.npz", [](std::vector<NpzEntry>& entries) {
    std::vector<NpzEntry> kept;
    for (NpzEntry& e : entries)
      if (e.name.rfind(kTrainingPrefix, 0) != 0) kept.push_back(std::move(e));
    entries = std::move(kept);
  });
  ProgramRun r = run_trainer("--resume " + quoted(dir / "weights.npz") + " " + kResumeTiny +
                       " --steps 10 --warmup 2 --threads 1 --checkpoint-every 10 --out " + quoted(dir / "w"), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("weights only") != std::string::npos);
  CHECK(state_difference(dir / "ref" / ckpt(20), dir / "w" / ckpt(10)) != "");
}

TEST_CASE("resume: a checkpoint whose parameters do not fit is refused before --out is created", "[resume][train_cli]") {
  const fs::path dir = scratch("refused");
  REQUIRE(run_trainer(kRun + " --threads 1 --stop-at 4 --out " + quoted(dir / "part"), dir).code == 0);
  const fs::path good = dir / "part" / ckpt(4);
  rewrite(good, dir / "wrong_shape.npz", [](std::vector<NpzEntry>& entries) {
    for (NpzEntry& e : entries)
      if (e.name == "norm_f.weight") e.array = xt::xarray<float>::from_shape({3});
  });
  rewrite(good, dir / "extra_entry.npz", [](std::vector<NpzEntry>& entries) {
    entries.emplace_back("blocks.9.extra", xt::xarray<float>{1.0f});
  });
  rewrite(good, dir / "bad_moment.npz", [](std::vector<NpzEntry>& entries) {
    for (NpzEntry& e : entries)
      if (e.name == std::string(kTrainingPrefix) + "v.norm_f.weight") e.as<float>().data()[0] = -1;
  });
  rewrite(good, dir / "nan_weight.npz", [](std::vector<NpzEntry>& entries) {
    for (NpzEntry& e : entries)
      if (e.name == "tok_emb.weight") e.as<float>().data()[5] = std::numeric_limits<float>::quiet_NaN();
  });
  const struct {
    const char* file;
    const char* named;
  } cases[] = {{"wrong_shape.npz", "norm_f.weight"}, {"extra_entry.npz", "blocks.9.extra"},
               {"bad_moment.npz", "v.norm_f.weight"}, {"nan_weight.npz", "tok_emb.weight"}};
  for (const auto& c : cases) {
    INFO(c.file);
    const fs::path out = dir / (std::string("out_") + c.file);
    ProgramRun r = run_trainer("--resume " + quoted(dir / c.file) + " --steps 5 --quiet --out " + quoted(out), dir);
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(c.named) != std::string::npos);
    CHECK_FALSE(fs::exists(out));  // nothing written, not even the directory
  }
  // NaN weights load when the user asks for it (here to evaluate only).
  ProgramRun nan = run_trainer("--resume " + quoted(dir / "nan_weight.npz") +
                         " --allow-nonfinite --steps 0 --eval-size 40 --quiet --out " + quoted(dir / "nan_ok"), dir);
  INFO(nan.err);
  CHECK(nan.code == 0);
  // --stop-at must lie ahead of the checkpoint.
  ProgramRun behind = run_trainer("--resume " + quoted(good) + " --stop-at 2 --quiet --out " + quoted(dir / "behind"), dir);
  CHECK(behind.code == 2);
  CHECK(behind.err.find("step 4") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "behind"));
  // A checkpoint past the run's end is refused too.
  ProgramRun past = run_trainer("--resume " + quoted(good) + " --steps 3 --quiet --out " + quoted(dir / "past"), dir);
  CHECK(past.code == 2);
  CHECK(past.err.find("step 4") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "past"));
}

TEST_CASE("resume: recall's step-dependent curriculum and a text model continue bit for bit too", "[resume][train_cli]") {
  const fs::path dir = scratch("recall_text");
  fs::path text = dir / "corpus.txt";
  {
    std::ofstream f(text);
    for (int i = 0; i < 60; ++i) f << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  const std::string recall = kRun + " --task recall --recall-grow-steps 10 --threads 1";
  const std::string text_run = kRun + " --text " + quoted(text) + " --context 16 --threads 1";
  for (const std::string& run : {recall, text_run}) {
    INFO(run);
    const fs::path ref = dir / "ref", part = dir / "part", rest = dir / "rest";
    fs::remove_all(ref);
    fs::remove_all(part);
    fs::remove_all(rest);
    REQUIRE(run_trainer(run + " --checkpoint-every 20 --out " + quoted(ref), dir).code == 0);
    REQUIRE(run_trainer(run + " --stop-at 7 --out " + quoted(part), dir).code == 0);
    const std::string again = run.find("--text") != std::string::npos ? " --text " + quoted(text) : "";
    ProgramRun r = run_trainer("--resume " + quoted(part) + again + " --quiet --skip-gradcheck --threads 1 "
                         "--eval-size 40 --checkpoint-every 20 --out " + quoted(rest), dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(state_difference(ref / ckpt(20), rest / ckpt(20)) == "");
  }
  // A training checkpoint of a text model continues only on its own text.
  fs::path other = dir / "other.txt";
  {
    std::ofstream f(other);
    for (int i = 0; i < 60; ++i) f << "the lazy dog sleeps under the quick brown fox " << i << "\n";
  }
  ProgramRun wrong = run_trainer("--resume " + quoted(dir / "part") + " --text " + quoted(other) +
                           " --quiet --out " + quoted(dir / "wrong"), dir);
  CHECK(wrong.code == 2);
  CHECK(wrong.err.find("--text") != std::string::npos);
}

TEST_CASE("resume: the checkpoint interval carries over, and an option overrides it", "[resume][train_cli]") {
  const fs::path dir = scratch("interval");
  REQUIRE(run_trainer(kRun + " --checkpoint-every 5 --stop-at 5 --out " + quoted(dir / "part"), dir).code == 0);
  REQUIRE(fs::exists(dir / "part" / ckpt(5)));
  // resumed without --checkpoint-every: every 5 steps still, the last two kept
  const ProgramRun rest = run_trainer("--resume " + quoted(dir / "part") + " --quiet --skip-gradcheck "
                                      "--eval-size 40 --out " + quoted(dir / "rest"), dir);
  INFO(rest.err);
  REQUIRE(rest.code == 0);
  CHECK(fs::exists(dir / "rest" / ckpt(15)));
  CHECK(fs::exists(dir / "rest" / ckpt(20)));
  CHECK(read_json((dir / "rest" / "metrics.json").string())["checkpoints_written"] == 3);
  // --checkpoint-every 0 given: none
  const ProgramRun off = run_trainer("--resume " + quoted(dir / "part") + " --checkpoint-every 0 --quiet "
                                     "--skip-gradcheck --eval-size 40 --out " + quoted(dir / "off"), dir);
  REQUIRE(off.code == 0);
  CHECK(list_checkpoints_in(dir / "off").empty());
}

TEST_CASE("resume: the ETA counts the pace of the steps this process ran", "[resume]") {
  // resumed at step 90, 10 s for the 5 steps since: the 5 left take 10 s more (the pace
  // over all 95 steps would say 0.5 s)
  CHECK(train::eta_seconds(10.0, 90, 95, 100) == Approx(10.0));
  CHECK(train::eta_seconds(10.0, 0, 50, 100) == Approx(10.0));
  CHECK(train::eta_seconds(10.0, 0, 100, 100) == 0.0);
}

TEST_CASE("resume: checkpoints are ordered by step, also past 8 digits", "[resume]") {
  const fs::path dir = scratch("order");
  // near misses: 7 digits, a letter in the step, text around the name, a temporary
  // without its number or with a letter in it
  const char* not_ours[] = {"model.npz", "ckpt-1234567.npz", "ckpt-0000000x5.npz",
                            "xckpt-00000005.npz", "ckpt-00000005.npzx", "ckpt-00000005.npz.tmp.",
                            "ckpt-00000005.npz.tmp.12a", "ckpt-00000005.npz.tmp12"};
  for (const char* name : {"ckpt-100000000.npz", "ckpt-99999999.npz", "ckpt-00000005.npz",
                           "ckpt-00000007.npz.tmp.123"})
    std::ofstream(dir / name) << "x";
  for (const char* name : not_ours) std::ofstream(dir / name) << "x";
  const std::vector<std::string> found = train::list_checkpoints(dir.string());
  // a plain sort of the names would put step 100,000,000 before 99,999,999
  CHECK(found == std::vector<std::string>{(dir / "ckpt-00000005.npz").string(),
                                          (dir / "ckpt-99999999.npz").string(),
                                          (dir / "ckpt-100000000.npz").string()});
  train::remove_stale_temporaries(dir.string());
  CHECK_FALSE(fs::exists(dir / "ckpt-00000007.npz.tmp.123"));
  for (const char* name : not_ours) CHECK(fs::exists(dir / name));
}

TEST_CASE("resume: misused checkpoint options exit 2 with one line and write nothing", "[resume][train_cli]") {
  const fs::path dir = scratch("usage");
  fs::create_directories(dir / "empty");
  const fs::path out = dir / "never";
  const char* cases[] = {
      "--steps 20 --warmup 5 --stop-at 21",  // past the run
      "--checkpoint-every -1",
      "--stop-at x",
  };
  for (const char* args : cases) {
    INFO(args);
    ProgramRun r = run_trainer(std::string(args) + " --out " + quoted(out), dir);
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK_FALSE(fs::exists(out));
  }
  ProgramRun none = run_trainer("--resume " + quoted(dir / "empty") + " --out " + quoted(out), dir);
  CHECK(none.code == 2);
  CHECK(none.err.find("no training checkpoint") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  ProgramRun help = run_trainer("--help", dir);
  for (const char* opt : {"--checkpoint-every", "--stop-at", "--allow-nonfinite", "--resume"}) {
    INFO(opt);
    CHECK(help.out.find(opt) != std::string::npos);
  }
}

TEST_CASE("resume: an --out holding a later step's checkpoints is refused before anything is written",
          "[resume][train_cli]") {
  const fs::path dir = scratch("later_in_out");
  const fs::path other = dir / "other", part = dir / "part";
  // another run of 20 steps, checkpointed at 10 and 20, and this one stopped at step 5
  REQUIRE(run_trainer(kRun + " --checkpoint-every 10 --out " + quoted(other), dir).code == 0);
  REQUIRE(run_trainer(kRun + " --stop-at 5 --out " + quoted(part), dir).code == 0);
  const auto listing = [&] {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(other)) names.insert(e.path().filename().string());
    return names;
  };
  const std::set<std::string> before = listing();
  // resumed at step 5 into it, pruning would remove this run's checkpoints, not the others'
  for (const std::string args : {"--resume " + quoted(part / ckpt(5)) + " --stop-at 8",
                                 kRun + " --stop-at 3"}) {
    INFO(args);
    const ProgramRun r = run_trainer(args + " --quiet --out " + quoted(other), dir);
    CHECK(r.code == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("holds " + ckpt(20) + ", a later step") != std::string::npos);
    CHECK(listing() == before);
  }
  // resuming the directory's own newest checkpoint into it is the normal case
  const ProgramRun own = run_trainer("--resume " + quoted(other) + " --quiet --out " + quoted(other), dir);
  INFO(own.err);
  CHECK(own.code == 0);
}

TEST_CASE("resume: a --seed other than the checkpoint's is refused, and no notice precedes an error",
          "[resume][train_cli]") {
  const fs::path dir = scratch("seed_and_notices");
  const fs::path part = dir / "part", out = dir / "never";
  REQUIRE(run_trainer(kRun + " --stop-at 10 --out " + quoted(part), dir).code == 0);
  const std::string resume = "--resume " + quoted(part / ckpt(10)) + " --out " + quoted(out);
  // the seed drew the weights and the data the run continues: another one changes nothing
  const ProgramRun seed = run_trainer(resume + " --seed 4", dir);
  CHECK(seed.code == 2);
  CHECK(count_lines(seed.err) == 1);
  CHECK(seed.err.find("--seed 4 disagrees with the checkpoint's seed 3") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  // a given option that differs gets its notice only when the run goes ahead
  const ProgramRun past = run_trainer(resume + " --lr 0.002 --steps 5", dir);
  CHECK(past.code == 2);
  CHECK(past.out.empty());
  CHECK(past.err.find("past --steps 5") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  const ProgramRun same_seed = run_trainer(resume + " --seed 3 --lr 0.002 --stop-at 11", dir);
  INFO(same_seed.err);
  CHECK(same_seed.code == 0);
  CHECK(same_seed.out.find("--lr 0.002 differs from the checkpoint's") != std::string::npos);
}

#endif
