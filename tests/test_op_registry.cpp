// ops/registry: every registered op has gradcheck cases that pass in double, a Python
// binding under its name, and its place in docs/ARCHITECTURE.md's op list; every op the
// Python module binds in bind_ops.cpp is registered. An op half added fails here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "ops/registry.hpp"
#include "test_paths.hpp"

using namespace tapegrad;

namespace {

const std::string kSource = TAPEGRAD_SOURCE_DIR;

std::set<std::string> registered_names() {
  std::set<std::string> names;
  for (const RegisteredOp& op : op_registry()) names.insert(op.name);
  return names;
}

// The names a binding file gives Python: m.def("name", ...), def_arith<...>(m, "name") and
// the unary macro's TAPEGRAD_UNARY(name) lines.
std::set<std::string> python_names(const std::string& file) {
  static const std::regex def(R"re(m\.def\("(\w+)")re"),
      arith(R"re(def_arith<.*>\(m, "(\w+)"\))re"), unary(R"re(^\s*TAPEGRAD_UNARY\((\w+)\))re");
  std::ifstream in(kSource + "/python/src/" + file);
  REQUIRE(in);
  std::set<std::string> names;
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    for (const std::regex* r : {&def, &arith, &unary})
      if (std::regex_search(line, m, *r)) names.insert(m[1]);
  }
  return names;
}

// The backticked names of the paragraph that opens with "The registered ops".
std::set<std::string> documented_names() {
  std::ifstream in(kSource + "/docs/ARCHITECTURE.md");
  REQUIRE(in);
  std::string paragraph;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("The registered ops", 0) == 0) inside = true;
    else if (inside && line.empty()) break;
    if (inside) paragraph += line + "\n";
  }
  static const std::regex name("`(\\w+)`");
  std::set<std::string> names;
  for (std::sregex_iterator it(paragraph.begin(), paragraph.end(), name), end; it != end; ++it)
    names.insert((*it)[1]);
  return names;
}

}  // namespace

TEST_CASE("op registry: names are unique and every op has cases that fit its arity",
          "[op_registry]") {
  std::set<std::string> names, labels;
  for (const RegisteredOp& op : op_registry()) {
    INFO(op.name);
    CHECK(names.insert(op.name).second);
    REQUIRE_FALSE(op.cases.empty());
    bool full = false;
    for (const GradcheckCase& c : op.cases) {
      INFO(c.label);
      CHECK(labels.insert(c.label).second);
      CHECK_FALSE(c.shapes.empty());
      if (op.arity > 0) CHECK(c.shapes.size() <= op.arity);
      full = full || op.arity == 0 || c.shapes.size() == op.arity;
    }
    CHECK(full);  // some case differentiates every input
  }
}

TEST_CASE("op registry: every case passes gradcheck in double", "[op_registry]") {
  Generator gen(2024);
  for (const RegisteredOp& op : op_registry())
    for (const GradcheckCase& c : op.cases) {
      const GradcheckResult r = gradcheck<double>(c.f, gradcheck_inputs(c, gen));
      INFO(c.label << "\n" << r.to_string());
      CHECK(r.passed);
      for (const InputCheck& in : r.inputs) CHECK(in.max_rel_error < 1e-6);
    }
}

TEST_CASE("op registry: every registered op has a Python binding, every bound op is registered",
          "[op_registry]") {
  // the binding files' functions that are not differentiable ops: masks built from sizes,
  // scores returned as a constant, the decode step (it refuses gradients), a setting
  const std::set<std::string> not_ops = {"causal_mask", "sliding_window_mask", "attention_scores",
                                         "attention_decode", "num_threads"};
  const std::set<std::string> registered = registered_names();
  std::set<std::string> bound;
  for (const std::string file : {"bind_ops.cpp", "bind_decode.cpp"})
    for (const std::string& name : python_names(file)) {
      INFO("python/src/" << file << " binds '" << name << "', which ops/registry.cpp lacks");
      CHECK((registered.count(name) == 1 || not_ops.count(name) == 1));
      bound.insert(name);
    }
  for (const std::string& name : registered) {
    INFO("'" << name << "' is registered but python/src/ binds no function of that name");
    CHECK(bound.count(name) == 1);
  }
  CHECK(bound.count("add") == 1);  // the scan sees each way of binding
  CHECK(bound.count("relu") == 1);
  CHECK(bound.count("matmul") == 1);
}

TEST_CASE("op registry: docs/ARCHITECTURE.md lists exactly the registered ops", "[op_registry]") {
  const std::set<std::string> documented = documented_names(), registered = registered_names();
  for (const std::string& name : registered) {
    INFO("'" << name << "' is registered but not in the list of docs/ARCHITECTURE.md");
    CHECK(documented.count(name) == 1);
  }
  for (const std::string& name : documented) {
    INFO("docs/ARCHITECTURE.md lists '" << name << "', which is not registered");
    CHECK(registered.count(name) == 1);
  }
}
