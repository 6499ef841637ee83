#pragma once
// The workloads both programs run: the attention, GPT-2, Llama, mixture-of-experts,
// decode and flash shapes, their names as the command line takes them, and their FLOPs.
// Part of bench/harness.hpp (which says what the harness is for).
#include <algorithm>
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

}  // namespace bench
