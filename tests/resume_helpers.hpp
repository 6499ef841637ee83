#pragma once
// What the resume tests share: the tiny training run, a training checkpoint's entries
// compared bit for bit, and a trainer started in the background (to be signalled).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "nn/io/npz.hpp"
#include "run_program.hpp"
#include "test_paths.hpp"

namespace tapegrad::test {

// A model of a few thousand parameters: a step takes about a millisecond.
inline const char* const kResumeTiny =
    "--d-model 16 --heads 2 --layers 1 --batch 8 --eval-size 40 --quiet --skip-gradcheck --seed 3";

inline ProgramRun run_trainer(const std::string& args, const std::filesystem::path& dir) {
  return run_program(TAPEGRAD_TRAIN_BIN, args, dir);
}

inline std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

// "" when the two checkpoints hold the same entries, bit for bit (the timings and the
// checkpoint interval aside, which are not training state); else the first difference.
inline std::string state_difference(const std::filesystem::path& a, const std::filesystem::path& b) {
  const std::vector<NpzEntry> x = load_npz(a.string()), y = load_npz(b.string());
  // Not training state: wall times, and how often the run writes checkpoints (carried over
  // on resume, but two runs that reach the same end may write at other intervals).
  auto timing = [](const std::string& name) {
    return name.find("seconds") != std::string::npos ||
           name == "__train__.setting.checkpoint_every";
  };
  std::size_t compared = 0;
  for (const NpzEntry& e : x) {
    if (timing(e.name)) continue;
    const NpzEntry* f = find_npz_entry(y, e.name);
    if (!f) return "'" + e.name + "' is missing from " + b.string();
    if (f->dtype() != e.dtype() || f->shape() != e.shape()) return "'" + e.name + "' differs in type";
    const bool same = std::visit(
        [&](const auto& arr) {
          using A = std::decay_t<decltype(arr)>;
          const A& other = std::get<A>(f->array);
          return std::memcmp(arr.data(), other.data(), arr.size() * sizeof(arr.data()[0])) == 0;
        },
        e.array);
    if (!same) return "'" + e.name + "' differs";
    ++compared;
  }
  std::size_t counted = 0;
  for (const NpzEntry& e : y) counted += !timing(e.name);
  if (counted != compared) return b.string() + " has entries " + a.string() + " lacks";
  return "";
}

// The trainer started with `args` (split on spaces; no quoting), stdout and stderr to
// files in `dir`.
inline pid_t start_trainer(const std::vector<std::string>& args, const std::filesystem::path& dir) {
  const std::string out = (dir / "bg_stdout.txt").string(), err = (dir / "bg_stderr.txt").string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::dup2(in, 0);
    std::vector<char*> argv;
    static std::string binary = TAPEGRAD_TRAIN_BIN;
    argv.push_back(binary.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// Splits "a b c" into words.
inline std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::string w;
  for (char c : s) {
    if (c == ' ') {
      if (!w.empty()) out.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) out.push_back(w);
  return out;
}

// A wait status as one number: the exit code, or minus the signal that ended the process.
inline int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? -WTERMSIG(status) : -1000;
}

// Waits for `pid`; its exit code, or minus the signal that killed it.
inline int wait_for(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return exit_code(status);
}

}  // namespace tapegrad::test
