#pragma once
// Running a built program from a test: exit code, stdout and stderr captured.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_paths.hpp"

namespace tapegrad::test {

struct ProgramRun {
  int code = -1;  // the exit code, or -1 if the program did not exit normally
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// An empty directory <build>/<suite>/<name> for one test's files.
inline std::filesystem::path scratch_dir(const std::string& suite, const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(TAPEGRAD_BINARY_DIR) / suite / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs `binary args` (args already shell-quoted) with no standard input. The captured
// output files are removed afterwards, so `dir` then holds only what the program wrote.
inline ProgramRun run_program(const std::string& binary, const std::string& args,
                              const std::filesystem::path& dir) {
  const std::filesystem::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd = "'" + binary + "' " + args + " >'" + out.string() + "' 2>'" +
                          err.string() + "' </dev/null";
  const int status = std::system(cmd.c_str());
  ProgramRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

inline std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace tapegrad::test
