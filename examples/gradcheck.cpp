// examples/gradcheck: runs tapegrad's finite-difference gradcheck (double precision) on
// every differentiable op, including broadcasting and batched/broadcast matmul, and prints
// one row per case. Exits 1 if any case fails, 2 on a usage error (one line on stderr,
// before any case runs, and no file written).
//
//   gradcheck [--json FILE] [--filter SUBSTRING] [--threads N]
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "examples/common/cli.hpp"
#include "ops/attention.hpp"
#include "ops/attention_fused.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/embedding.hpp"
#include "ops/norm.hpp"
#include "tapegrad.hpp"

using namespace tapegrad;
using T = double;
using Inputs = std::vector<Tensor<T>>;

namespace {

constexpr const char* kProgram = "gradcheck";

enum class Domain { any, positive, away_from_zero };

struct Case {
  std::string op;
  std::vector<Shape> shapes;
  Domain domain;
  TensorFunction<T> f;
};

Tensor<T> make_input(const Shape& shape, Domain domain, Generator& gen) {
  Array<T> a = Array<T>::from_shape(shape);
  for (T& v : a) {
    switch (domain) {
      case Domain::any: v = gen.normal(); break;
      case Domain::positive: v = gen.uniform(0.5, 2.0); break;
      case Domain::away_from_zero:  // relu's kink at 0 is not differentiable
        v = gen.uniform(0.1, 1.5) * (gen.uniform() < 0.5 ? -1.0 : 1.0);
        break;
    }
  }
  return Tensor<T>(std::move(a), true);
}

Mask random_mask(const Shape& shape, Generator& gen) {
  Mask m = Mask::from_shape(shape);
  for (auto&& v : m) v = gen.uniform() < 0.7;
  return m;
}

std::vector<Case> all_cases() {
  Generator g(7);
  const Mask mask_2x5x6 = [&] {
    Mask m = random_mask({2, 5, 6}, g);
    for (std::size_t k = 0; k < 6; ++k) m(1, 2, k) = false;  // one fully masked row
    return m;
  }();
  const Mask mask_3x4 = random_mask({3, 4}, g);
  Indices ids = {{0, 3, 3}, {4, 1, 0}};
  Indices targets = {{1, 0, -100}, {2, 2, 1}};
  auto any = Domain::any;
  RopeSpec half, yarn;
  yarn.style = RopeStyle::interleaved;
  yarn.scaling = RopeScaling::yarn;
  yarn.factor = 4;
  yarn.original_context = 2;
  AttentionSpec gqa, window;
  gqa.heads = 4;
  gqa.kv_heads = 2;
  gqa.causal = true;
  window.heads = 4;  // head_dim 3, v head_dim 4
  window.kv_heads = 1;
  window.causal = true;
  window.window = 2;
  std::vector<Case> c = {
      {"add", {{2, 3}, {2, 3}}, any, [](const Inputs& x) { return x[0] + x[1]; }},
      {"add (broadcast)", {{2, 1, 4}, {3, 1}}, any, [](const Inputs& x) { return x[0] + x[1]; }},
      {"add (scalar)", {{3, 2}}, any, [](const Inputs& x) { return x[0] + 2.5; }},
      {"sub (broadcast)", {{4}, {3, 4}}, any, [](const Inputs& x) { return x[0] - x[1]; }},
      {"sub (scalar - x)", {{3}}, any, [](const Inputs& x) { return 1.0 - x[0]; }},
      {"mul (broadcast)", {{2, 3, 1}, {1, 4}}, any, [](const Inputs& x) { return x[0] * x[1]; }},
      {"mul (rank 0)", {{3, 2}, {}}, any, [](const Inputs& x) { return x[0] * x[1]; }},
      {"div (broadcast)", {{2, 3}, {3}}, Domain::positive, [](const Inputs& x) { return x[0] / x[1]; }},
      {"div (scalar / x)", {{4}}, Domain::positive, [](const Inputs& x) { return 2.0 / x[0]; }},
      {"neg", {{3, 2}}, any, [](const Inputs& x) { return -x[0]; }},
      {"exp", {{3, 2}}, any, [](const Inputs& x) { return exp(x[0]); }},
      {"log", {{3, 2}}, Domain::positive, [](const Inputs& x) { return log(x[0]); }},
      {"sqrt", {{3, 2}}, Domain::positive, [](const Inputs& x) { return sqrt(x[0]); }},
      {"pow", {{3, 2}}, Domain::positive, [](const Inputs& x) { return pow(x[0], 2.5); }},
      {"tanh", {{3, 2}}, any, [](const Inputs& x) { return tanh(x[0]); }},
      {"relu", {{3, 4}}, Domain::away_from_zero, [](const Inputs& x) { return relu(x[0]); }},
      {"sigmoid", {{3, 2}}, any, [](const Inputs& x) { return sigmoid(x[0]); }},
      {"gelu (tanh form)", {{3, 4}}, any, [](const Inputs& x) { return gelu(x[0]); }},
      {"sum (all)", {{2, 3, 4}}, any, [](const Inputs& x) { return sum(x[0]); }},
      {"sum (axes 0,2 keepdims)", {{2, 3, 4}}, any, [](const Inputs& x) { return sum(x[0], {0, -1}, true); }},
      {"mean (axis 1)", {{2, 3, 4}}, any, [](const Inputs& x) { return mean(x[0], {1}); }},
      {"max (axis -1)", {{3, 5}}, any, [](const Inputs& x) { return max(x[0], -1); }},
      {"reshape", {{2, 6}}, any, [](const Inputs& x) { return reshape(x[0], {3, 4}); }},
      {"transpose (2,0,1)", {{2, 3, 4}}, any, [](const Inputs& x) { return transpose(x[0], {2, 0, 1}); }},
      {"swapaxes (-1,-2)", {{2, 3, 4}}, any, [](const Inputs& x) { return swapaxes(x[0], -1, -2); }},
      {"concatenate (axis 1)", {{2, 3}, {2, 2}}, any, [](const Inputs& x) { return concatenate<T>({x[0], x[1]}, 1); }},
      {"slice (axis 1, 1:3)", {{2, 4, 3}}, any, [](const Inputs& x) { return slice(x[0], 1, 1, 3); }},
      {"matmul 2-D", {{3, 4}, {4, 5}}, any, [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul batched", {{2, 3, 4}, {2, 4, 5}}, any, [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul (B,T,D)@(D,D)", {{2, 3, 4}, {4, 4}}, any, [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul broadcast batch", {{2, 1, 3, 4}, {5, 4, 2}}, any, [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul (M,K)@(B,K,N)", {{3, 4}, {2, 4, 5}}, any, [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul vector", {{4}, {2, 4, 3}}, any, [](const Inputs& x) { return matmul(x[0], x[1]); }},
      {"matmul_nt (q @ k^T)", {{2, 3, 4}, {2, 5, 4}}, any, [](const Inputs& x) { return matmul_nt(x[0], x[1]); }},
      {"softmax (axis -1)", {{2, 3, 5}}, any, [](const Inputs& x) { return softmax(x[0], -1); }},
      {"softmax (axis 1)", {{2, 3, 5}}, any, [](const Inputs& x) { return softmax(x[0], 1); }},
      {"log_softmax (axis -1)", {{2, 3, 5}}, any, [](const Inputs& x) { return log_softmax(x[0], -1); }},
      {"masked_softmax (masked row)", {{2, 5, 6}}, any,
       [mask_2x5x6](const Inputs& x) { return masked_softmax(x[0], mask_2x5x6); }},
      {"embedding (repeated ids)", {{5, 3}}, any, [ids](const Inputs& x) { return embedding(x[0], ids); }},
      {"layer_norm", {{2, 3, 5}, {5}, {5}}, any,
       [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); }},
      {"rms_norm", {{2, 3, 5}, {5}}, any, [](const Inputs& x) { return rms_norm(x[0], x[1]); }},
      {"cross_entropy (ignore_index)", {{2, 3, 4}}, any,
       [targets](const Inputs& x) { return cross_entropy(x[0], targets); }},
      {"sdpa out (random mask)", {{3, 4}, {4, 4}, {4, 2}}, any,
       [mask_3x4](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2], mask_3x4).out; }},
      {"sdpa weights (causal, 4-D)", {{2, 2, 4, 3}, {2, 2, 4, 3}, {2, 2, 4, 5}}, any,
       [](const Inputs& x) {
         return scaled_dot_product_attention(x[0], x[1], x[2], causal_mask(4)).weights;
       }},
      {"sdpa out (Tq != Tk, broadcast K/V)", {{2, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 3}}, any,
       [](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2]).out; }},
      {"attention_weights (fused, causal)", {{2, 4, 6}, {2, 4, 6}}, any,
       [](const Inputs& x) { return attention_weights(x[0], x[1], 3, 0.7, true); }},
      {"attention_mix (fused)", {{2, 3, 4, 4}, {2, 4, 6}}, any,
       [](const Inputs& x) { return attention_mix(x[0], x[1], 3); }},
      {"multi_head_attention (causal)", {{2, 5, 8}, {8, 8}, {8, 8}, {8, 8}, {8, 8}}, any,
       [](const Inputs& x) { return multi_head_attention(x[0], x[1], x[2], x[3], x[4], 2, true); }},
      {"multi_head_attention", {{2, 4, 6}, {6, 6}, {6, 6}, {6, 6}, {6, 6}}, any,
       [](const Inputs& x) { return multi_head_attention(x[0], x[1], x[2], x[3], x[4], 3, false); }},
      {"silu", {{3, 4}}, any, [](const Inputs& x) { return silu(x[0]); }},
      {"repeat_interleave (x2, axis 1)", {{2, 3, 4}}, any,
       [](const Inputs& x) { return repeat_interleave(x[0], 2, 1); }},
      {"rope (half, offset 3)", {{2, 5, 6}}, any, [half](const Inputs& x) { return rope(x[0], 3, half); }},
      {"rope_heads (interleaved, yarn)", {{2, 4, 12}}, any,
       [yarn](const Inputs& x) { return rope_heads(x[0], 2, 1, yarn); }},
      {"attention (GQA 4/2, causal, fused)", {{2, 5, 12}, {2, 5, 6}, {2, 5, 6}}, any,
       [gqa](const Inputs& x) { return attention(x[0], x[1], x[2], gqa).out; }},
      {"attention (MQA, window 2, Tq 2 < Tk 5)", {{2, 2, 12}, {2, 5, 3}, {2, 5, 4}}, any,
       [window](const Inputs& x) { return attention(x[0], x[1], x[2], window).out; }},
  };
  return c;
}

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
  CLI::App app{"Finite-difference gradient check (double precision) of every tapegrad op.",
               kProgram};
  std::string json_path, filter;
  int threads = 1;
  app.add_option("--json", json_path, "Also write the rows to this JSON file");
  app.add_option("--filter", filter, "Only cases whose name contains this text");
  app.add_option("--threads", threads, "kernel threads (0: all cores)")->check(CLI::Range(0, 256));
  if (const std::optional<int> code = examples::parse_command_line(app, argc, argv, kProgram))
    return *code;
  std::vector<Case> cases;
  for (Case& c : all_cases())
    if (filter.empty() || c.op.find(filter) != std::string::npos) cases.push_back(std::move(c));
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

  std::printf("%-38s %-34s %12s %12s  %s\n", "op", "input shapes", "max abs err", "max rel err",
              "pass");
  nlohmann::ordered_json rows_json = nlohmann::ordered_json::array();
  bool all_passed = true;
  Generator gen(2024);
  for (const Case& c : cases) {
    Inputs inputs;
    for (const Shape& s : c.shapes) inputs.push_back(make_input(s, c.domain, gen));
    const GradcheckResult r = gradcheck<T>(c.f, inputs);
    double abs_err = 0, rel_err = 0;
    for (const InputCheck& in : r.inputs) {
      abs_err = std::max(abs_err, in.max_abs_error);
      rel_err = std::max(rel_err, in.max_rel_error);
    }
    const bool pass = r.passed && rel_err < 1e-6;
    all_passed = all_passed && pass;
    std::printf("%-38s %-34s %12.3e %12.3e  %s\n", c.op.c_str(), shapes_text(c.shapes).c_str(),
                abs_err, rel_err, pass ? "pass" : "FAIL");
    rows_json.push_back({{"op", c.op},
                         {"input_shapes", shapes_text(c.shapes)},
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
