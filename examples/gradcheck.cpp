// examples/gradcheck: runs tapegrad's finite-difference gradcheck (double precision) on
// every case of every registered op (ops/registry.hpp), including broadcasting and
// batched/broadcast matmul, and prints one row per case. Exits 1 if any case fails, 2 on a
// usage error (one line on stderr, before any case runs, and no file written).
//
//   gradcheck [--json FILE] [--filter SUBSTRING] [--threads N]
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/common/cli.hpp"
#include "ops/registry.hpp"
#include "tapegrad.hpp"

using namespace tapegrad;

namespace {

constexpr const char* kProgram = "gradcheck";

std::string shapes_text(const std::vector<Shape>& shapes) {
  std::string s;
  for (std::size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shape_str(shapes[i]);
  return s;
}

}  // namespace

// The --json file, written atomically: opened as "<path>.tmp.<pid>" before any case runs
// (so an unwritable path is a usage error up front), renamed over <path> at the end.
class JsonOutput {
 public:
  explicit JsonOutput(std::string path) : path_(std::move(path)) {}
  ~JsonOutput() {
    if (file_) {
      std::fclose(file_);
      std::remove(tmp_.c_str());
    }
  }
  // An error message, or "" when the temporary file is open.
  std::string open() {
    struct stat st;
    if (::stat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      return "--json " + path_ + " is a directory";
    tmp_ = path_ + ".tmp." + std::to_string(::getpid());
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (!file_) return "cannot write --json " + path_ + ": " + std::strerror(errno);
    return "";
  }
  std::string commit(const std::string& text) {
    const bool written = std::fwrite(text.data(), 1, text.size(), file_) == text.size();
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!written || !closed || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      const std::string why = std::strerror(errno);
      std::remove(tmp_.c_str());
      return "cannot write --json " + path_ + ": " + why;
    }
    return "";
  }

 private:
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
};

int main(int argc, char** argv) {
  apps::prepare_process();
  CLI::App app{"Finite-difference gradient check (double precision) of every tapegrad op.",
               kProgram};
  std::string json_path, filter;
  int threads = 1;
  app.add_option("--json", json_path, "Also write the rows to this JSON file");
  app.add_option("--filter", filter, "Only cases whose name contains this text");
  app.add_option("--threads", threads, "kernel threads (0: all cores)")->check(CLI::Range(0, 256));
  if (const std::optional<int> code = apps::parse_command_line(app, argc, argv, kProgram))
    return *code;
  std::vector<const GradcheckCase*> cases;
  for (const RegisteredOp& op : op_registry())
    for (const GradcheckCase& c : op.cases)
      if (filter.empty() || c.label.find(filter) != std::string::npos) cases.push_back(&c);
  if (cases.empty()) {
    std::fprintf(stderr, "gradcheck: --filter '%s' matches no case (see --help)\n", filter.c_str());
    return 2;
  }
  JsonOutput json_out(json_path);
  if (!json_path.empty()) {
    const std::string error = json_out.open();
    if (!error.empty()) {
      std::fprintf(stderr, "gradcheck: %s\n", error.c_str());
      return 2;
    }
  }
  set_num_threads(threads);

  std::printf("%-46s %-34s %12s %12s  %s\n", "op", "input shapes", "max abs err", "max rel err",
              "pass");
  nlohmann::ordered_json rows_json = nlohmann::ordered_json::array();
  bool all_passed = true;
  Generator gen(2024);
  for (const GradcheckCase* c : cases) {
    const GradcheckResult r = gradcheck<double>(c->f, gradcheck_inputs(*c, gen));
    double abs_err = 0, rel_err = 0;
    for (const InputCheck& in : r.inputs) {
      abs_err = std::max(abs_err, in.max_abs_error);
      rel_err = std::max(rel_err, in.max_rel_error);
    }
    const bool pass = r.passed && rel_err < 1e-6;
    all_passed = all_passed && pass;
    std::printf("%-46s %-34s %12.3e %12.3e  %s\n", c->label.c_str(), shapes_text(c->shapes).c_str(),
                abs_err, rel_err, pass ? "pass" : "FAIL");
    rows_json.push_back({{"op", c->label},
                         {"input_shapes", shapes_text(c->shapes)},
                         {"max_abs_error", abs_err},
                         {"max_rel_error", rel_err},
                         {"pass", pass}});
  }
  std::printf("%zu cases, %s\n", rows_json.size(), all_passed ? "all passed" : "SOME FAILED");
  if (!json_path.empty()) {
    const std::string error = json_out.commit(rows_json.dump(2) + "\n");
    if (!error.empty()) {
      std::fprintf(stderr, "gradcheck: %s\n", error.c_str());
      return 2;
    }
  }
  return all_passed ? 0 : 1;
}
