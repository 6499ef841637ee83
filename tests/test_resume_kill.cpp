// A training run that is killed: SIGKILL at random moments and inside checkpoint writes
// always leaves checkpoints that load, and resuming from the newest reaches the straight
// run's final state bit for bit; SIGINT and SIGTERM finish the step, write a
// checkpoint, say where it is and exit 130 / 143; a disk that fills while checkpointing
// is an error (exit 1) that leaves the previous checkpoint as it was.
#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_TRAIN_BIN)
#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <thread>

#include "nn/io/checkpoint.hpp"
#include "nn/io/training_state.hpp"
#include "resume_helpers.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using namespace tapegrad::test;

namespace {

fs::path scratch(const std::string& name) { return scratch_dir("test_resume_kill", name); }

std::vector<fs::path> files_matching(const fs::path& dir, const std::string& pattern) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  const std::regex re(pattern);
  for (const auto& e : fs::directory_iterator(dir))
    if (std::regex_match(e.path().filename().string(), re)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}
std::vector<fs::path> checkpoints(const fs::path& dir) {
  return fs::exists(dir) ? files_matching(dir, "ckpt-[0-9]{8}\\.npz") : std::vector<fs::path>{};
}

// A checkpoint loads when its model and its training state both read back.
bool loads(const fs::path& p) {
  try {
    Transformer<float> model = load_checkpoint<float>(p.string());
    training_state_from_entries<float>(load_npz(p.string()), model, p.string());
    return true;
  } catch (const std::exception& e) {
    UNSCOPED_INFO(p.string() << ": " << e.what());
    return false;
  }
}

// The temporary file a trainer writes a checkpoint into, before renaming it into place.
bool writing_a_checkpoint(const fs::path& dir, pid_t pid) {
  return !files_matching(dir, "ckpt-[0-9]{8}\\.npz\\.tmp\\." + std::to_string(pid)).empty();
}

// Pauses the trainer at random moments until a pause falls inside a checkpoint write, and
// kills it there. On a filesystem where fsync costs nothing a write lasts microseconds, so
// kills at random moments alone seldom land inside one. Returns as wait_for does.
int kill_inside_a_write(pid_t pid, const fs::path& dir, std::mt19937& rng, double seconds) {
  std::uniform_int_distribution<int> running_us(0, 1000);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    ::kill(pid, SIGSTOP);
    int status = 0;
    ::waitpid(pid, &status, WUNTRACED);
    if (!WIFSTOPPED(status)) return exit_code(status);  // it ended before a pause
    if (writing_a_checkpoint(dir, pid) || std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      return wait_for(pid);
    }
    ::kill(pid, SIGCONT);
    std::this_thread::sleep_for(std::chrono::microseconds(running_us(rng)));
  }
}

bool wait_until(const std::function<bool()>& done, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace

TEST_CASE("resume: 20 SIGKILLs, at random moments and inside writes, leave loadable checkpoints and the same end", "[resume][kill]") {
  const fs::path dir = scratch("sigkill");
  const fs::path out = dir / "run";
  const std::string run = std::string(kResumeTiny) + " --steps 600 --warmup 20 --threads 1";
  const auto ref_start = std::chrono::steady_clock::now();
  ProgramRun ref = run_trainer(run + " --checkpoint-every 600 --out " + quoted(dir / "ref"), dir);
  REQUIRE(ref.code == 0);
  // Kill delays scale with how long a whole run takes here (a sanitizer build is several
  // times slower), so that kills land at every stage of a run whatever the build.
  const double ref_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ref_start).count();
  // A checkpoint after every step, so that many kills land in the middle of a write.
  const std::vector<std::string> base = words(run + " --checkpoint-every 1 --out " + out.string());
  std::mt19937 rng(20261201);
  std::uniform_real_distribution<double> delay_ms(0.02 * ref_ms, 0.25 * ref_ms);
  int kills = 0, during_write = 0;
  const auto start = std::chrono::steady_clock::now();
  while (kills < 20) {
    std::vector<std::string> args = base;
    if (!checkpoints(out).empty()) args.insert(args.end(), {"--resume", out.string()});
    const pid_t pid = start_trainer(args, dir);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms(rng)));
    // every other kill waits for a write to be under way
    const bool inside_a_write = kills % 2 == 1;
    if (!inside_a_write) ::kill(pid, SIGKILL);
    const int code = inside_a_write ? kill_inside_a_write(pid, out, rng, 30) : wait_for(pid);
    INFO("kill " << kills << ": " << slurp(dir / "bg_stderr.txt"));
    REQUIRE((code == -SIGKILL || code == 0));
    if (code == 0) {
      // The run finished before this kill (a slow build: each resumed run got further than
      // the straight run's time predicted). It must end where the straight run ended; then
      // a fresh run takes the remaining kills.
      CHECK(state_difference(dir / "ref" / "ckpt-00000600.npz", out / "ckpt-00000600.npz") == "");
      fs::remove_all(out);
      continue;
    }
    ++kills;
    during_write += writing_a_checkpoint(out, pid);
    const std::vector<fs::path> kept = checkpoints(out);
    // two, or three when the kill fell between a new checkpoint's rename and the removal
    // of the oldest (the next write removes it)
    CHECK(kept.size() <= 3);
    for (const fs::path& p : kept) CHECK(loads(p));
    // bounded: 20 kills take about 3 runs' time; a hang would fail here
    REQUIRE(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() <
            std::max(60000.0, 40 * ref_ms));
  }
  INFO(kills << " kills, " << during_write << " in the middle of a checkpoint write");
  CHECK(kills == 20);
  CHECK(during_write >= 10);
  // The last start runs to the end: the same final state as the straight run.
  const std::string resume = checkpoints(out).empty() ? "" : " --resume " + quoted(out);
  ProgramRun last = run_trainer(run + " --checkpoint-every 600" + resume + " --out " + quoted(out), dir);
  INFO(last.err);
  REQUIRE(last.code == 0);
  CHECK(state_difference(dir / "ref" / "ckpt-00000600.npz", out / "ckpt-00000600.npz") == "");
  CHECK(files_matching(out, ".*\\.tmp\\..*").empty());  // the killed writers' files are gone
}

TEST_CASE("resume: a run resumed after a kill between a rename and the pruning writes beside two checkpoints, not three", "[resume][kill]") {
  // A kill after a new checkpoint's rename and before the oldest is removed leaves three.
  // The resumed run must prune before it writes: otherwise a second such kill leaves four,
  // and every further one a checkpoint more.
  const fs::path dir = scratch("prune_first");
  const fs::path out = dir / "run", three = dir / "three";
  // a model large enough that a checkpoint write lasts milliseconds, even on a tmpfs
  const std::string run = "--d-model 128 --heads 4 --layers 2 --batch 8 --eval-size 40 --quiet "
                          "--skip-gradcheck --seed 3 --steps 20 --warmup 5 --threads 1";
  REQUIRE(run_trainer(run + " --checkpoint-every 5 --stop-at 10 --out " + quoted(three), dir).code == 0);
  fs::copy_file(three / "ckpt-00000005.npz", three / "ckpt-00000004.npz");
  REQUIRE(checkpoints(three).size() == 3);
  std::mt19937 rng(20261202);
  bool caught = false;
  for (int attempt = 0; attempt < 40 && !caught; ++attempt) {
    fs::remove_all(out);
    fs::copy(three, out);
    const pid_t pid = start_trainer(words("--resume " + out.string() + " --quiet --skip-gradcheck --threads 1 "
                                          "--eval-size 40 --checkpoint-every 1 --stop-at 11 --out " + out.string()), dir);
    const int code = kill_inside_a_write(pid, out, rng, 30);
    INFO("attempt " << attempt << ": " << slurp(dir / "bg_stderr.txt"));
    REQUIRE((code == -SIGKILL || code == 0));
    if (code != -SIGKILL || !writing_a_checkpoint(out, pid)) continue;  // the pauses missed the write
    caught = true;
    CHECK(checkpoints(out) == std::vector<fs::path>{out / "ckpt-00000005.npz", out / "ckpt-00000010.npz"});
  }
  CHECK(caught);
}

TEST_CASE("resume: SIGINT and SIGTERM write a checkpoint, name it, exit 130 / 143, and resume to the same end", "[resume][kill]") {
  const fs::path dir = scratch("sigint");
  const std::string run = std::string(kResumeTiny) + " --steps 400 --warmup 20 --threads 1";
  REQUIRE(run_trainer(run + " --checkpoint-every 400 --out " + quoted(dir / "ref"), dir).code == 0);
  for (int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    const fs::path out = dir / ("run_" + std::to_string(sig));
    const pid_t pid = start_trainer(words(run + " --checkpoint-every 25 --out " + out.string()), dir);
    // the first periodic checkpoint shows that training is under way
    REQUIRE(wait_until([&] { return !checkpoints(out).empty(); }, 30));
    ::kill(pid, sig);
    const int code = wait_for(pid);
    const std::string err = slurp(dir / "bg_stderr.txt");
    INFO(err);
    REQUIRE(code == 128 + sig);
    CHECK(count_lines(err) == 1);
    std::smatch m;
    REQUIRE(std::regex_search(err, m, std::regex("(/[^ ;]*ckpt-[0-9]{8}\\.npz)")));
    const fs::path written = m[1].str();
    CHECK(written == checkpoints(out).back());
    CHECK(written != out / "ckpt-00000400.npz");  // stopped before the end
    CHECK(loads(written));
    ProgramRun rest = run_trainer("--resume " + quoted(written) + " --quiet --skip-gradcheck --threads 1 "
                            "--eval-size 40 --checkpoint-every 400 --out " + quoted(out), dir);
    INFO(rest.err);
    REQUIRE(rest.code == 0);
    CHECK(state_difference(dir / "ref" / "ckpt-00000400.npz", out / "ckpt-00000400.npz") == "");
  }
}

TEST_CASE("resume: a disk that fills while checkpointing is exit 1 and leaves the previous checkpoint intact", "[resume][kill]") {
  const fs::path dir = scratch("disk_full");
  const fs::path out = dir / "run";
  const std::string run = std::string(kResumeTiny) + " --steps 20 --warmup 5 --threads 1";
  REQUIRE(run_trainer(run + " --stop-at 10 --out " + quoted(out), dir).code == 0);
  const fs::path previous = out / "ckpt-00000010.npz";
  const std::string before = slurp(previous);
  REQUIRE(before.size() > 20000);
  // A file-size limit of 16 KiB (SIGXFSZ ignored, so writes fail with EFBIG): the next
  // checkpoint cannot be completed, as on a full disk.
  const std::string cmd = "bash -c \"trap '' XFSZ; ulimit -f 16; exec '" + std::string(TAPEGRAD_TRAIN_BIN) +
                          "' --resume '" + previous.string() + "' --checkpoint-every 5 --quiet --skip-gradcheck "
                          "--threads 1 --eval-size 40 --out '" + out.string() + "'\" >'" +
                          (dir / "o.txt").string() + "' 2>'" + (dir / "e.txt").string() + "'";
  const int status = std::system(cmd.c_str());
  const std::string err = slurp(dir / "e.txt");
  INFO(err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(count_lines(err) == 1);
  CHECK(err.find("cannot write the training checkpoint") != std::string::npos);
  CHECK(err.find("ckpt-00000010.npz is intact") != std::string::npos);
  CHECK(slurp(previous) == before);
  CHECK(checkpoints(out) == std::vector<fs::path>{previous});
  CHECK(files_matching(out, ".*\\.tmp\\..*").empty());
}

TEST_CASE("resume: a small tmpfs that fills while checkpointing is exit 1 and leaves the previous checkpoint intact", "[resume][kill]") {
  const fs::path dir = scratch("tmpfs_full");
  const fs::path first = dir / "first", mnt = dir / "mnt";
  fs::create_directories(mnt);
  const std::string run = std::string(kResumeTiny) + " --steps 20 --warmup 5 --threads 1";
  REQUIRE(run_trainer(run + " --stop-at 10 --out " + quoted(first), dir).code == 0);
  const fs::path previous = first / "ckpt-00000010.npz";
  // A tmpfs of the previous checkpoint's pages and one more, in a mount namespace of the
  // test's own (so nothing outside sees it): the resumed run's next checkpoint cannot fit,
  // as on a full disk. What is left on it is checked inside the namespace, before it goes.
  const std::size_t pages = (fs::file_size(previous) + 4095) / 4096 + 1;
  const std::string script =
      "mount -t tmpfs -o size=" + std::to_string(pages * 4096) + " tmpfs " + quoted(mnt) +
      " || exit 77; cp " + quoted(previous) + " " + quoted(mnt) + "/; '" +
      std::string(TAPEGRAD_TRAIN_BIN) + "' --resume " + quoted(mnt / "ckpt-00000010.npz") +
      " --checkpoint-every 5 --quiet --skip-gradcheck --threads 1 --eval-size 40 --out " +
      quoted(mnt) + " >" + quoted(dir / "o.txt") + " 2>" + quoted(dir / "e.txt") +
      "; rc=$?; cmp -s " + quoted(previous) + " " + quoted(mnt / "ckpt-00000010.npz") +
      " && echo intact >" + quoted(dir / "intact.txt") + "; ls -A " + quoted(mnt) + " >" +
      quoted(dir / "left.txt") + "; exit $rc";
  std::ofstream(dir / "in_namespace.sh") << script << "\n";
  const int status = std::system(("unshare -m bash " + quoted(dir / "in_namespace.sh")).c_str());
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77 || (WEXITSTATUS(status) == 1 && !fs::exists(dir / "left.txt"))) {
    WARN("no private tmpfs here (unshare -m / mount refused): the file-size-limit case above stands for it");
    return;
  }
  const std::string err = slurp(dir / "e.txt");
  INFO(err);
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(count_lines(err) == 1);
  CHECK(err.find("cannot write the training checkpoint") != std::string::npos);
  CHECK(err.find("ckpt-00000010.npz is intact") != std::string::npos);
  CHECK(fs::exists(dir / "intact.txt"));
  const std::string left = slurp(dir / "left.txt");
  CHECK(left.find("ckpt-00000010.npz") != std::string::npos);
  CHECK(left.find("ckpt-00000015.npz") == std::string::npos);
  CHECK(left.find(".tmp.") == std::string::npos);
}

#endif
