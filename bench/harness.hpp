#pragma once
// The measuring instrument shared by tapegrad_bench and torch_reference: the command line,
// the workload list, deterministic inputs, the timing loop, peak RSS, the JSON line, and
// naive double-precision references used to check each framework's answer once at
// start-up (so a broken fast path cannot report a fast-looking number).
// The standard library and nlohmann-json only: neither framework is visible here.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace bench {

// ---------------------------------------------------------------- workloads

struct MhaShape {
  const char* name;
  std::size_t B, T, D, H;
  std::size_t KV = 0;  // key/value heads (0: = H, MHA); query head h reads kv head h / (H/KV)
  std::size_t kv() const { return KV == 0 ? H : KV; }
  std::size_t kv_width() const { return kv() * (D / H); }  // the columns of Wk and Wv
};
// The attention workloads' shapes (B, T, D, heads), from S1, small enough that per-op
// overhead dominates, to S4, a 2,048-token sequence.
inline const std::vector<MhaShape>& mha_shapes() {
  static const std::vector<MhaShape> s = {
      {"S1", 1, 16, 32, 4}, {"S2", 8, 128, 128, 8}, {"S3", 4, 512, 256, 8}, {"S4", 1, 2048, 256, 8}};
  return s;
}
inline const MhaShape& mha_shape(const std::string& name) {
  for (const auto& s : mha_shapes())
    if (name == s.name) return s;
  throw std::invalid_argument("unknown shape " + name);
}
// The grouped-query workload: an MHA shape with kv_heads = heads / 4 (two K/V heads at S3).
inline MhaShape gqa_shape(const std::string& name) {
  MhaShape s = mha_shape(name);
  s.KV = s.H / 4;
  return s;
}
constexpr const char* kGqaShape = "S3";

// TOY-GPT: the small GPT whose training step (on random tokens, memorised) is toygpt_step.
struct ToyGptShape {
  std::size_t vocab = 65, context = 64, d_model = 128, heads = 4, layers = 2, mlp_ratio = 4,
              batch = 32;
  double lr = 3e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
  // The sequences' length (0: the model's context) and Hugging Face's GPT-2 block: biases on
  // q, k, v and the attention's output, the head tied to the token embedding.
  std::size_t seq = 0;
  bool hf_gpt2 = false;
  std::size_t T() const { return seq ? seq : context; }
  std::size_t tokens() const { return batch * T(); }
};

// GPT-2 small (124M: 12 layers, 12 heads, d_model 768, vocab 50,257, context 1,024, learned
// positions, GELU MLP, tied head) as Hugging Face's GPT-2, trained on `batch` random
// sequences of `seq` tokens with TOY-GPT's AdamW settings: gpt2_124M_step_B<batch>T<seq>.
inline ToyGptShape gpt2_small(std::size_t batch, std::size_t seq) {
  ToyGptShape g;
  g.vocab = 50257, g.context = 1024, g.d_model = 768, g.heads = 12, g.layers = 12;
  g.batch = batch, g.seq = seq, g.hf_gpt2 = true;
  return g;
}
inline constexpr std::pair<std::size_t, std::size_t> kGpt2Shapes[] = {{4, 64}, {1, 1024}, {4, 1024}};
// tapegrad and PyTorch eager: the B4T1024 step with every block checkpointed, for its peak RSS
inline constexpr const char* kGpt2CheckpointedStep = "gpt2_124M_step_B4T1024_ckpt";
inline std::string gpt2_name(std::size_t batch, std::size_t seq) {
  return "gpt2_124M_step_B" + std::to_string(batch) + "T" + std::to_string(seq);
}
// "gpt2_124M_step_B4T64" -> its shape; batch 0 when the name is not a GPT-2 step.
inline ToyGptShape parse_gpt2(const std::string& w) {
  for (const auto& [B, T] : kGpt2Shapes)
    if (w == gpt2_name(B, T)) return gpt2_small(B, T);
  ToyGptShape none;
  none.batch = 0;
  return none;
}
// Both GPT-2 steps start from the same weights (the gpt2 preset's initialisation, seed 1),
// which tapegrad_bench --dump writes once, to this file beside the workload's reference.
inline constexpr const char* kGpt2WeightsFile = "gpt2_124M.weights.npz";
// A GPT-2 reference holds every parameter's gradient sampled: entries 0, s, 2s, ... of the
// flattened gradient, s = max(1, size / kGradSamples) made odd (so that the samples of a
// matrix with an even row length visit every column).
inline constexpr std::size_t kGradSamples = 65536;
inline std::size_t grad_sample_stride(std::size_t size) {
  return std::max<std::size_t>(1, size / kGradSamples) | 1;
}
// The parameters of the GPT-2 block's model: embeddings, per layer two LayerNorms, q/k/v/o
// with biases and the MLP with biases, the final LayerNorm; the head is the embedding.
inline double gpt2_parameters(const ToyGptShape& g) {
  const double D = double(g.d_model), H = double(g.mlp_ratio) * D;
  return double(g.vocab + g.context) * D + double(g.layers) * (4 * D + 4 * D * D + 4 * D + 2 * D * H + H + D) +
         2 * D;
}
// A training step's FLOPs as the scaling-law papers count them: 6 x parameters x tokens
// (forward 2, backward 4 per parameter and token) plus the attention's two products over
// the full T x T square, 12 x layers x T x d_model per token.
inline double gpt2_flops(const ToyGptShape& g) {
  return double(g.tokens()) * (6.0 * gpt2_parameters(g) + 12.0 * double(g.layers) * double(g.T()) * double(g.d_model));
}

// Long-context attention alone: (B, T, heads * head_dim) q, k, v leaves, causal, forward and
// backward with an upstream gradient dO of the output's shape.
struct FlashShape {
  std::size_t B = 1, H = 8, dh = 32, T = 0;
  std::size_t width() const { return H * dh; }
  std::size_t size() const { return B * T * H * dh; }
};
constexpr std::size_t kFlashLengths[] = {2048, 8192, 32768};

constexpr std::size_t kChainOps = 1000, kChainLen = 16;
constexpr std::size_t kGemmPeakN = 1024;  // the "one large gemm" ceiling

// Every workload name, identical in both programs:
//   mha_{fwd,fwdbwd}_{f32,f64}_S{1..4}, gqa_fwdbwd_f32_S3, toygpt_step, llama_step,
//   gpt2_124M_step_B{4T64,1T1024,4T1024}, gpt2_124M_step_B4T1024_ckpt,
//   decode_ctx{256,1024}, flash_fwdbwd_f32_T{2048,8192,32768},
//   chain1000, bmm_S{1..4}, gemm_peak_{f32,f64}.
// The workloads that also run with every float32 matrix product in bf16 (W_bf16).
inline constexpr const char* kBf16Workloads[] = {"toygpt_step", "llama_step", "moe_step",
                                                 "flash_fwdbwd_f32_T2048", "decode_ctx1024",
                                                 "gpt2_124M_step_B4T64", "gpt2_124M_step_B1T1024"};

inline std::vector<std::string> workload_names() {
  std::vector<std::string> w;
  for (const char* pass : {"fwd", "fwdbwd"})
    for (const char* dt : {"f32", "f64"})
      for (const auto& s : mha_shapes())
        w.push_back(std::string("mha_") + pass + "_" + dt + "_" + s.name);
  w.push_back(std::string("gqa_fwdbwd_f32_") + kGqaShape);
  w.push_back("toygpt_step");
  w.push_back("llama_step");
  w.push_back("moe_step");  // llama_step's model with 4 experts of half its hidden size, top 2
  for (const auto& [B, T] : kGpt2Shapes) w.push_back(gpt2_name(B, T));
  w.push_back(kGpt2CheckpointedStep);
  // tapegrad only: the same steps with every matrix product in bf16 (float32 elsewhere)
  for (const char* step : kBf16Workloads) w.push_back(std::string(step) + "_bf16");
  for (const char* ctx : {"256", "1024"}) w.push_back(std::string("decode_ctx") + ctx);  // llama_reference.hpp
  w.push_back("decode_ctx1024_kvbf16");  // tapegrad only: the KV cache stored in bf16
  for (std::size_t T : kFlashLengths) w.push_back("flash_fwdbwd_f32_T" + std::to_string(T));
  // tapegrad only: attention rows with ALiBi or the logit soft-cap (50) on every attention
  for (const char* modifier : {"_alibi", "_softcap"}) {
    for (const auto& s : mha_shapes()) w.push_back(std::string("mha_fwdbwd_f32_") + s.name + modifier);
    for (const char* base : {"llama_step", "decode_ctx1024", "flash_fwdbwd_f32_T2048"})
      w.push_back(std::string(base) + modifier);
  }
  w.push_back("chain1000");
  for (const auto& s : mha_shapes()) w.push_back(std::string("bmm_") + s.name);
  w.push_back("gemm_peak_f32");
  w.push_back("gemm_peak_f64");
  return w;
}

// "mha_fwdbwd_f32_S3" -> {backward, is_double, shape}
struct MhaWorkload {
  bool backward = false, is_double = false;
  MhaShape shape{};
};
inline bool parse_mha(const std::string& w, MhaWorkload& out) {
  if (w.rfind("mha_", 0) != 0) return false;
  std::istringstream in(w.substr(4));
  std::string pass, dt, shape;
  if (!std::getline(in, pass, '_') || !std::getline(in, dt, '_') || !std::getline(in, shape))
    return false;
  out.backward = pass == "fwdbwd";
  out.is_double = dt == "f64";
  out.shape = mha_shape(shape);
  return true;
}

// "gqa_fwdbwd_f32_S3" -> the same, with gqa_shape's kv_heads
inline bool parse_gqa(const std::string& w, MhaWorkload& out) {
  if (w.rfind("gqa_", 0) != 0 || !parse_mha("mha_" + w.substr(4), out)) return false;
  out.shape = gqa_shape(out.shape.name);
  return true;
}

// "flash_fwdbwd_f32_T8192" -> its shape; T = 0 when the name is not a flash workload
inline FlashShape parse_flash(const std::string& w) {
  FlashShape s;
  for (std::size_t T : kFlashLengths)
    if (w == "flash_fwdbwd_f32_T" + std::to_string(T)) s.T = T;
  return s;
}
// Useful FLOPs of one causal fwd+bwd: the standard path's six products (q k^T and P V
// forward; dP, dV, dQ, dK backward), 2 T^2 dh each per head, over the causal half only.
// What a kernel recomputes (flash does q k^T and dO V^T again) is not useful work.
inline double flash_useful_flops(const FlashShape& s) {
  return 6.0 * 2.0 * double(s.B * s.H) * double(s.T) * double(s.T) * double(s.dh) / 2.0;
}

// FLOPs of the matrix products (2 per multiply-add): the projections 2*B*T*D*(2D + 2*kv_width)
// (8*B*T*D^2 for MHA), scores and weights@V 4*B*T^2*D (the full square: both frameworks
// compute the masked half too). Backward doubles every product, so forward+backward is 3x
// the forward.
inline double mha_flops(const MhaShape& s, bool backward) {
  const double B = double(s.B), T = double(s.T), D = double(s.D), W = double(s.kv_width());
  const double fwd = 2 * B * T * D * (2 * D + 2 * W) + 4 * B * T * T * D;
  return backward ? 3 * fwd : fwd;
}
// B*H products (T, dh) @ (dh, T)
inline double bmm_flops(const MhaShape& s) {
  return 2.0 * double(s.B * s.H) * double(s.T) * double(s.T) * double(s.D / s.H);
}
// The side n of one square gemm with the same FLOPs as the batched product.
inline std::size_t same_flops_gemm_n(const MhaShape& s) {
  return std::size_t(std::llround(std::cbrt(bmm_flops(s) / 2.0)));
}
// Forward matmul FLOPs of one TOY-GPT step times 3 (forward + backward).
inline double toygpt_flops(const ToyGptShape& g) {
  const double tokens = double(g.batch * g.context), D = double(g.d_model);
  const double per_token = 2.0 * (double(g.layers) * (4 + 2 * double(g.mlp_ratio)) * D * D +
                                  D * double(g.vocab)) +
                           double(g.layers) * 4.0 * double(g.context) * D;
  return 3.0 * tokens * per_token;
}

// ---------------------------------------------------------------- command line

struct Args {
  std::string workload;
  int threads = 1;
  int repeats = 10;
  int warmup = 2;
  bool list = false, info = false;
  // Skips the start-up check of the attention workloads (seconds at S4): the driver checks
  // each (workload, framework, threads) in its first process and skips it in the others.
  bool skip_check = false;
  // Writes the workload's inputs and tapegrad's answer for them to this .npz and exits: the
  // reference the Python peers check themselves against at start-up.
  std::string dump;
};

inline void usage(const char* prog, const std::string& error) {
  std::fprintf(stderr,
               "%s: %s\nusage: %s --workload NAME [--threads N] [--repeats R] [--warmup W]"
               " [--skip-check] [--dump FILE.npz]\n       %s --list | --info\n",
               prog, error.c_str(), prog, prog);
  std::exit(2);
}

inline Args parse_args(int argc, char** argv) {
  Args a;
  auto number = [&](int& i, const std::string& flag, int min) {
    if (i + 1 >= argc) usage(argv[0], flag + " needs a value");
    const std::string v = argv[++i];
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < min || n > 100000)
      usage(argv[0], flag + ": bad value '" + v + "'");
    return int(n);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--workload") {
      if (i + 1 >= argc) usage(argv[0], "--workload needs a value");
      a.workload = argv[++i];
    } else if (f == "--threads") {
      a.threads = number(i, f, 1);
    } else if (f == "--repeats") {
      a.repeats = number(i, f, 1);
    } else if (f == "--warmup") {
      a.warmup = number(i, f, 0);
    } else if (f == "--list") {
      a.list = true;
    } else if (f == "--info") {
      a.info = true;
    } else if (f == "--skip-check") {
      a.skip_check = true;
    } else if (f == "--dump") {
      if (i + 1 >= argc) usage(argv[0], "--dump needs a file name");
      a.dump = argv[++i];
    } else {
      usage(argv[0], "unknown option '" + f + "'");
    }
  }
  if (a.list || a.info) return a;
  if (a.workload.empty()) usage(argv[0], "--workload is required");
  const auto names = workload_names();
  if (std::find(names.begin(), names.end(), a.workload) == names.end())
    usage(argv[0], "unknown workload '" + a.workload + "' (see --list)");
  return a;
}

// ---------------------------------------------------------------- measuring

inline long peak_rss_kb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;  // kilobytes on Linux
}

// Minor page faults so far: a fresh page's first touch (about 12 us per 4 KiB page on
// these VMs) is the cost a framework that reuses its buffers does not pay.
inline long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

inline double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

// CPU time of the whole process (all its threads), ms: at one thread it is the wall time
// minus the time other programs held the core, a cross-check when the machine is shared.
inline double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// What a workload hands back: its timed samples and extra named numbers (GFLOP/s, the
// correctness-check errors, ...).
struct Result {
  std::vector<double> samples_ms, cpu_ms;  // wall and process-CPU time of each timed step
  double faults_per_step = 0;              // minor page faults per timed step
  std::vector<std::pair<std::string, double>> extra;
  void add(const std::string& k, double v) { extra.emplace_back(k, v); }
  // Runs `step` warmup times untimed, then `repeats` times, each timed on its own.
  void time_steps(int warmup, int repeats, const std::function<void()>& step) {
    time_parts(warmup, repeats, {step});
  }

  // A step made of parts timed one by one in the same loop, so that the machine's noise
  // hits every part alike. samples_ms, cpu_ms and faults_per_step describe parts[0] alone;
  // the wall times of every part (timed repeats only) are returned, parts[0]'s first.
  std::vector<std::vector<double>> time_parts(int warmup, int repeats,
                                              const std::vector<std::function<void()>>& parts) {
    for (int i = 0; i < warmup; ++i)
      for (const auto& part : parts) part();
    samples_ms.clear();
    cpu_ms.clear();
    std::vector<std::vector<double>> wall(parts.size());
    long faults = 0;
    for (int i = 0; i < repeats; ++i) {
      for (std::size_t p = 0; p < parts.size(); ++p) {
        const long f0 = minor_faults();
        const double c0 = process_cpu_ms(), t0 = now_ms();
        parts[p]();
        const double t1 = now_ms(), c1 = process_cpu_ms();
        wall[p].push_back(t1 - t0);
        if (p == 0) {
          samples_ms.push_back(t1 - t0);
          cpu_ms.push_back(c1 - c0);
          faults += minor_faults() - f0;
        }
      }
    }
    faults_per_step = double(faults) / double(std::max(repeats, 1));
    return wall;
  }
};

// One JSON line on stdout per workload; run_bench.py reads it. A number that is not finite
// (a median of no samples) is written as null.
inline void print_json(const char* framework, const Args& a, const Result& r, long start_rss_kb) {
  nlohmann::ordered_json o;
  o["framework"] = framework;
  o["workload"] = a.workload;
  o["threads"] = a.threads;
  o["repeats"] = a.repeats;
  o["warmup"] = a.warmup;
  o["median_ms"] = median(r.samples_ms);
  o["min_ms"] = r.samples_ms.empty()
                    ? std::nan("")
                    : *std::min_element(r.samples_ms.begin(), r.samples_ms.end());
  o["peak_rss_kb"] = peak_rss_kb();
  o["start_rss_kb"] = start_rss_kb;
  o["faults_per_step"] = r.faults_per_step;
  o["samples_ms"] = r.samples_ms;
  o["cpu_samples_ms"] = r.cpu_ms;
  for (const auto& [k, v] : r.extra) o[k] = v;
  std::fputs((o.dump() + "\n").c_str(), stdout);
  std::fflush(stdout);
}

// A failed correctness check ends the process with status 3 and no JSON line: the driver
// then reports the workload as broken instead of timing it.
inline void require(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "CORRECTNESS CHECK FAILED: %s\n", what.c_str());
  std::exit(3);
}

// ---------------------------------------------------------------- inputs

// Deterministic normal numbers from our own Box-Muller on mt19937_64, so both programs
// feed bit-identical inputs to their framework.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : e_(seed) {}
  double uniform() { return (double(e_() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  double normal() {
    if (have_) {
      have_ = false;
      return spare_;
    }
    const double u = uniform(), v = uniform();
    const double r = std::sqrt(-2.0 * std::log(u));
    spare_ = r * std::sin(6.283185307179586 * v);
    have_ = true;
    return r * std::cos(6.283185307179586 * v);
  }
  std::uint64_t below(std::uint64_t n) { return e_() % n; }
  std::vector<double> normals(std::size_t n, double stddev) {
    std::vector<double> v(n);
    for (auto& x : v) x = stddev * normal();
    return v;
  }

 private:
  std::mt19937_64 e_;
  bool have_ = false;
  double spare_ = 0;
};

// Inputs of one MHA call: x (B,T,D) ~ N(0,1), the weights ~ N(0, 1/D) so every activation
// stays of unit scale (Wq, Wo (D,D); Wk, Wv (D, kv_width)), G (B,T,D) the upstream gradient.
struct MhaInputs {
  std::vector<double> x, Wq, Wk, Wv, Wo, G;
};
inline MhaInputs make_mha_inputs(const MhaShape& s, std::uint64_t seed = 42) {
  Rng r(seed);
  MhaInputs in;
  const double ws = 1.0 / std::sqrt(double(s.D));
  in.x = r.normals(s.B * s.T * s.D, 1.0);
  in.Wq = r.normals(s.D * s.D, ws);
  in.Wk = r.normals(s.D * s.kv_width(), ws);
  in.Wv = r.normals(s.D * s.kv_width(), ws);
  in.Wo = r.normals(s.D * s.D, ws);
  in.G = r.normals(s.B * s.T * s.D, 1.0);
  return in;
}

// One fixed batch of random tokens (B, T+1): inputs are [:, :T], next-token targets
// [:, 1:]. The same batch every step keeps the work identical and lets the loss fall
// (the model memorises it), which is the step's correctness check.
inline std::vector<std::int64_t> toygpt_tokens(const ToyGptShape& g) {
  Rng r(17);
  std::vector<std::int64_t> t(g.batch * (g.T() + 1));
  for (auto& v : t) v = std::int64_t(r.below(g.vocab));
  return t;
}

template <class R>
std::vector<R> cast(const std::vector<double>& v) {
  return std::vector<R>(v.begin(), v.end());
}

// The loss starts near ln(vocab) (uniform predictions) and falls while memorising.
inline void check_toygpt_losses(const ToyGptShape& g, const std::vector<double>& losses,
                                Result& r, const std::string& model = "TOY-GPT") {
  require(!losses.empty(), "no " + model + " step ran");
  const double first = losses.front(), last = losses.back(), uniform = std::log(double(g.vocab));
  r.add("first_loss", first);
  r.add("last_loss", last);
  require(std::abs(first - uniform) < 0.3,
          model + " first loss " + std::to_string(first) + " is not near ln(vocab)");
  if (losses.size() >= 5)
    require(last < first - 0.05, model + " loss did not fall on a fixed batch: " +
                                     std::to_string(first) + " -> " + std::to_string(last));
}

// ---------------------------------------------------------------- naive references

// Causal multi-head attention (the textbook composition) for output rows `rows` of batch item b, by plain
// loops in double: y[b, t, :] for each t in rows, row after row. With s.KV < s.H, query
// head h reads K/V head h / (H / KV) (grouped-query attention, repeat_interleave order).
inline std::vector<double> naive_mha_rows(const MhaInputs& in, const MhaShape& s, std::size_t b,
                                          const std::vector<std::size_t>& rows) {
  const std::size_t T = s.T, D = s.D, H = s.H, dh = D / H, W = s.kv_width(), group = H / s.kv();
  std::size_t tmax = 0;
  for (auto t : rows) tmax = std::max(tmax, t);
  auto project = [&](const std::vector<double>& Wm, std::size_t cols, std::size_t t, double* out) {
    const double* xr = &in.x[(b * T + t) * D];
    for (std::size_t j = 0; j < cols; ++j) out[j] = 0;
    for (std::size_t i = 0; i < D; ++i)
      for (std::size_t j = 0; j < cols; ++j) out[j] += xr[i] * Wm[i * cols + j];
  };
  std::vector<double> K((tmax + 1) * W), V((tmax + 1) * W);
  for (std::size_t t = 0; t <= tmax; ++t) {
    project(in.Wk, W, t, &K[t * W]);
    project(in.Wv, W, t, &V[t * W]);
  }
  std::vector<double> out;
  std::vector<double> q(D), o(D), w(tmax + 1);
  for (auto t : rows) {
    project(in.Wq, D, t, q.data());
    for (std::size_t h = 0; h < H; ++h) {
      const std::size_t kv = (h / group) * dh;  // this head's columns of K and V
      double m = -INFINITY;
      for (std::size_t j = 0; j <= t; ++j) {  // causal: keys 0..t only
        double sc = 0;
        for (std::size_t d = 0; d < dh; ++d) sc += q[h * dh + d] * K[j * W + kv + d];
        w[j] = sc / std::sqrt(double(dh));
        m = std::max(m, w[j]);
      }
      double z = 0;
      for (std::size_t j = 0; j <= t; ++j) z += (w[j] = std::exp(w[j] - m));
      for (std::size_t d = 0; d < dh; ++d) {
        double acc = 0;
        for (std::size_t j = 0; j <= t; ++j) acc += w[j] / z * V[j * W + kv + d];
        o[h * dh + d] = acc;
      }
    }
    for (std::size_t j = 0; j < D; ++j) {
      double acc = 0;
      for (std::size_t i = 0; i < D; ++i) acc += o[i] * in.Wo[i * D + j];
      out.push_back(acc);
    }
  }
  return out;
}

// The rows whose forward value is checked at every shape: the first, one in the middle,
// the last (the longest causal sum), all in the last batch item.
inline std::vector<std::size_t> check_rows(const MhaShape& s) {
  return {0, s.T / 3, s.T - 1};
}

template <class R>
double max_rel_error(const std::vector<R>& got, const std::vector<double>& want) {
  double scale = 0, err = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < want.size(); ++i) err = std::max(err, std::abs(double(got[i]) - want[i]));
  return err / std::max(scale, 1e-300);
}

// Checks a framework's MHA: `forward(inputs) -> y (B,T,D)` against the naive loop on
// sampled rows, and, when `backward(inputs) -> {dx, dWq, dWk, dWv, dWo}` (for the loss
// <y, G>) is given, the gradients against a central difference of <y, G> along one random
// direction through all five inputs at once (any wrong gradient moves the sum).
// R is the workload's element type; the tolerances are set for it. Adds the errors to r.
template <class R>
void check_mha(const MhaShape& s, const MhaInputs& in,
               const std::function<std::vector<R>(const MhaInputs&)>& forward,
               const std::function<std::vector<std::vector<R>>(const MhaInputs&)>& backward,
               Result& r) {
  const bool dbl = sizeof(R) == 8;
  const std::vector<std::size_t> rows = check_rows(s);
  const std::vector<R> y = forward(in);
  require(y.size() == s.B * s.T * s.D, "MHA output has the wrong size");
  std::vector<R> got;
  for (auto t : rows)
    for (std::size_t j = 0; j < s.D; ++j) got.push_back(y[((s.B - 1) * s.T + t) * s.D + j]);
  const double fwd_err = max_rel_error(got, naive_mha_rows(in, s, s.B - 1, rows));
  r.add("check_fwd_rel_err", fwd_err);
  require(fwd_err < (dbl ? 1e-10 : 1e-4),
          "MHA forward differs from the naive loop by " + std::to_string(fwd_err));
  if (!backward) return;

  // d<y,G> along U = sum_i <grad_i, U_i>, versus (L(p + eps U) - L(p - eps U)) / 2 eps.
  const std::vector<std::vector<R>> g = backward(in);
  require(g.size() == 5, "MHA backward must return 5 gradients");
  Rng rng(7);
  MhaInputs u = in;
  std::vector<double>* parts[5] = {&u.x, &u.Wq, &u.Wk, &u.Wv, &u.Wo};
  const std::vector<double>* base[5] = {&in.x, &in.Wq, &in.Wk, &in.Wv, &in.Wo};
  std::vector<std::vector<double>> dir(5);
  double analytic = 0;
  for (int i = 0; i < 5; ++i) {
    require(g[i].size() == base[i]->size(), "MHA gradient " + std::to_string(i) + " has the wrong size");
    dir[i] = rng.normals(base[i]->size(), i == 0 ? 1.0 : 1.0 / std::sqrt(double(s.D)));
    for (std::size_t k = 0; k < dir[i].size(); ++k) analytic += double(g[i][k]) * dir[i][k];
  }
  const double eps = dbl ? 1e-5 : 1e-2;
  auto loss_at = [&](double sign) {
    for (int i = 0; i < 5; ++i)
      for (std::size_t k = 0; k < dir[i].size(); ++k)
        (*parts[i])[k] = (*base[i])[k] + sign * eps * dir[i][k];
    const std::vector<R> yy = forward(u);
    double L = 0;
    for (std::size_t k = 0; k < yy.size(); ++k) L += double(yy[k]) * in.G[k];
    return L;
  };
  const double numeric = (loss_at(+1) - loss_at(-1)) / (2 * eps);
  const double bwd_err = std::abs(numeric - analytic) / std::max(std::abs(numeric), 1e-12);
  r.add("check_bwd_rel_err", bwd_err);
  require(bwd_err < (dbl ? 1e-6 : 2e-2),
          "MHA gradients disagree with a central difference: analytic " + std::to_string(analytic) +
              ", numeric " + std::to_string(numeric));
}

// The 1,000-op chain: y = x; op i % 3: 0 -> y * 0.9, 1 -> y + b, 2 -> tanh(y); loss = sum(y).
// Returns {loss, dloss/dx, dloss/db} computed by plain loops in double.
struct ChainReference {
  double loss = 0;
  std::vector<double> dx, db;
};
// x ~ N(0, 1); b ~ N(0, 0.01), small so that y stays near 0 where tanh' ~ 1: dloss/dx then
// shrinks by about 0.9 per three ops (to ~1e-16 after 1,000) and never reaches float
// denormals, which would time the FPU's slow path instead of the framework.
inline std::pair<std::vector<double>, std::vector<double>> make_chain_inputs() {
  Rng r(11);
  auto x = r.normals(kChainLen, 1.0);
  auto b = r.normals(kChainLen, 0.01);
  return {x, b};
}
inline ChainReference naive_chain(const std::vector<double>& x, const std::vector<double>& b) {
  const std::size_t n = x.size();
  ChainReference ref;
  ref.dx.assign(n, 0);
  ref.db.assign(n, 0);
  for (std::size_t e = 0; e < n; ++e) {
    std::vector<double> ys(kChainOps + 1);  // y after each op, for the backward sweep
    ys[0] = x[e];
    for (std::size_t i = 0; i < kChainOps; ++i) {
      const double y = ys[i];
      ys[i + 1] = i % 3 == 0 ? y * 0.9 : i % 3 == 1 ? y + b[e] : std::tanh(y);
    }
    ref.loss += ys[kChainOps];
    double g = 1;
    for (std::size_t i = kChainOps; i-- > 0;) {
      if (i % 3 == 0) g *= 0.9;
      else if (i % 3 == 1) ref.db[e] += g;
      else g *= 1 - ys[i + 1] * ys[i + 1];
    }
    ref.dx[e] = g;
  }
  return ref;
}

// ---------------------------------------------------------------- long-context attention

// q, k, v and the upstream gradient dO, each (B, T, H * dh) ~ N(0, 1): with the 1/sqrt(dh)
// scale the scores are of unit variance, so the softmax is neither flat nor saturated.
struct FlashInputs {
  std::vector<double> q, k, v, dO;
};
inline FlashInputs make_flash_inputs(const FlashShape& s) {
  Rng r(43);
  FlashInputs in;
  in.q = r.normals(s.size(), 1.0);
  in.k = r.normals(s.size(), 1.0);
  in.v = r.normals(s.size(), 1.0);
  in.dO = r.normals(s.size(), 1.0);
  return in;
}

// One query row of causal attention in double: the weights P over keys 0..i, the output o,
// and the row's score gradient dS = P * (dO v^T - rowsum(dO * o)) (the standard backward).
struct FlashRow {
  std::vector<double> P, o, dS;
};
inline FlashRow naive_flash_row(const FlashShape& s, const FlashInputs& in, std::size_t b,
                                std::size_t h, std::size_t i) {
  const std::size_t W = s.width(), dh = s.dh;
  auto at = [&](const std::vector<double>& x, std::size_t t) { return &x[(b * s.T + t) * W + h * dh]; };
  const double scale = 1.0 / std::sqrt(double(dh));
  FlashRow r;
  r.P.resize(i + 1);
  double m = -INFINITY, z = 0;
  for (std::size_t j = 0; j <= i; ++j) {
    double d = 0;
    for (std::size_t c = 0; c < dh; ++c) d += at(in.q, i)[c] * at(in.k, j)[c];
    m = std::max(m, r.P[j] = scale * d);
  }
  for (double& p : r.P) z += (p = std::exp(p - m));
  for (double& p : r.P) p /= z;
  r.o.assign(dh, 0.0);
  for (std::size_t j = 0; j <= i; ++j)
    for (std::size_t c = 0; c < dh; ++c) r.o[c] += r.P[j] * at(in.v, j)[c];
  double D = 0;
  for (std::size_t c = 0; c < dh; ++c) D += at(in.dO, i)[c] * r.o[c];
  r.dS.resize(i + 1);
  for (std::size_t j = 0; j <= i; ++j) {
    double dp = 0;
    for (std::size_t c = 0; c < dh; ++c) dp += at(in.dO, i)[c] * at(in.v, j)[c];
    r.dS[j] = r.P[j] * (dp - D);
  }
  return r;
}

// Checks a framework's causal fwd+bwd (out, dq, dk, dv, each (B, T, H * dh)) against the
// naive rows in double, in the last batch item and every head: the output and dq of query
// rows 0, T/3 and T-1, and dk, dv of key rows T-1, T-64 and T-129 (block edges of any
// power-of-two blocking), which sum over every later query row.
template <class R>
void check_flash(const FlashShape& s, const FlashInputs& in, const std::vector<R>& out,
                 const std::vector<R>& dq, const std::vector<R>& dk, const std::vector<R>& dv,
                 Result& r) {
  const std::size_t W = s.width(), dh = s.dh, b = s.B - 1, T = s.T;
  const double scale = 1.0 / std::sqrt(double(dh));
  require(out.size() == s.size() && dq.size() == s.size() && dk.size() == s.size() && dv.size() == s.size(),
          "flash: output or gradient of the wrong size");
  auto idx = [&](std::size_t t, std::size_t h) { return (b * T + t) * W + h * dh; };
  std::vector<double> want_o, want_dq, want_dk, want_dv;
  std::vector<R> got_o, got_dq, got_dk, got_dv;
  const std::vector<std::size_t> keys = {T - 1, T >= 64 ? T - 64 : 0, T >= 129 ? T - 129 : 0};
  const std::size_t first = *std::min_element(keys.begin(), keys.end());
  for (std::size_t h = 0; h < s.H; ++h) {
    for (std::size_t i : {std::size_t(0), T / 3, T - 1}) {
      const FlashRow row = naive_flash_row(s, in, b, h, i);
      for (std::size_t c = 0; c < dh; ++c) {
        double g = 0;
        for (std::size_t j = 0; j <= i; ++j) g += scale * row.dS[j] * in.k[idx(j, h) + c];
        want_o.push_back(row.o[c]), want_dq.push_back(g);
        got_o.push_back(out[idx(i, h) + c]), got_dq.push_back(dq[idx(i, h) + c]);
      }
    }
    std::vector<double> dkh(keys.size() * dh, 0.0), dvh(keys.size() * dh, 0.0);
    for (std::size_t i = first; i < T; ++i) {
      const FlashRow row = naive_flash_row(s, in, b, h, i);
      for (std::size_t n = 0; n < keys.size(); ++n) {
        const std::size_t j = keys[n];
        if (j > i) continue;
        for (std::size_t c = 0; c < dh; ++c) {
          dkh[n * dh + c] += scale * row.dS[j] * in.q[idx(i, h) + c];
          dvh[n * dh + c] += row.P[j] * in.dO[idx(i, h) + c];
        }
      }
    }
    for (std::size_t n = 0; n < keys.size(); ++n)
      for (std::size_t c = 0; c < dh; ++c) {
        want_dk.push_back(dkh[n * dh + c]), want_dv.push_back(dvh[n * dh + c]);
        got_dk.push_back(dk[idx(keys[n], h) + c]), got_dv.push_back(dv[idx(keys[n], h) + c]);
      }
  }
  const double fwd_err = max_rel_error(got_o, want_o);
  const double bwd_err = std::max({max_rel_error(got_dq, want_dq), max_rel_error(got_dk, want_dk),
                                   max_rel_error(got_dv, want_dv)});
  r.add("check_fwd_rel_err", fwd_err);
  r.add("check_bwd_rel_err", bwd_err);
  require(fwd_err < 1e-4, "flash output differs from the naive rows by " + std::to_string(fwd_err));
  require(bwd_err < 1e-3, "flash gradients differ from the naive rows by " + std::to_string(bwd_err));
}

}  // namespace bench
