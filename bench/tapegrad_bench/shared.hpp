#pragma once
// What tapegrad_bench's workloads share: the workload's modifiers (set once in main), the
// tensors of the attention workloads, and the functions one part of the program calls in
// another (the models the references are made from, the sgemm ceiling, each workload's run).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../harness.hpp"
#include "../llama_reference.hpp"
#include "nn/config.hpp"
#include "nn/kv_cache.hpp"
#include "nn/optim.hpp"
#include "nn/transformer.hpp"
#include "ops/attention.hpp"
#include "tapegrad.hpp"

namespace tapegrad_bench {

using namespace tapegrad;
using bench::Args;
using bench::MhaInputs;
using bench::MhaShape;
using bench::Result;

extern volatile double g_sink;  // keeps results observable so no step is optimised away

// An attention modifier a workload's name may end with (bench::kModifierSuffixes): the same
// workload with every attention's spec carrying it. Set once in main, before the workload.
enum class Modifier { none, alibi, softcap };
extern Modifier g_modifier;
// decode_ctx1024_kvbf16: the decode workload with its KV cache stored in bf16
extern KVDtype g_kv_dtype;
// gpt2_124M_step_B4T1024_ckpt: the step with every block checkpointed (its input kept, the
// block recomputed in the backward); bitwise the same gradients, so the start-up check holds
extern bool g_checkpoint_blocks;
inline constexpr double kBenchSoftcap = 50;  // Gemma 2's attention cap

void apply_modifier(AttentionSpec& spec);
// "llama_step_alibi" -> "llama_step" with g_modifier = alibi; other names are left alone.
void take_modifier(std::string& workload);

template <class R>
Tensor<R> tensor_of(const std::vector<double>& v, const Shape& shape, bool requires_grad) {
  Array<R> a = Array<R>::from_shape(shape);
  std::copy(v.begin(), v.end(), a.begin());
  return Tensor<R>(std::move(a), requires_grad);
}

template <class R>
std::vector<R> values(const Array<R>& a) {
  return std::vector<R>(a.begin(), a.end());
}

template <class R>
struct MhaTensors {
  Tensor<R> x, Wq, Wk, Wv, Wo;
  MhaTensors(const MhaInputs& in, const MhaShape& s, bool rg)
      : x(tensor_of<R>(in.x, {s.B, s.T, s.D}, rg)),
        Wq(tensor_of<R>(in.Wq, {s.D, s.D}, rg)),
        Wk(tensor_of<R>(in.Wk, {s.D, s.kv_width()}, rg)),
        Wv(tensor_of<R>(in.Wv, {s.D, s.kv_width()}, rg)),
        Wo(tensor_of<R>(in.Wo, {s.D, s.D}, rg)) {}
  Tensor<R> forward(std::size_t heads) const {
    return multi_head_attention(x, Wq, Wk, Wv, Wo, heads, /*causal=*/true);
  }
  // The model's path (MultiHeadAttention::forward without RoPE): project, attention() on
  // the spec (fused, kv heads read in place), project back. Any kv_heads.
  Tensor<R> forward(const AttentionSpec& spec, AttentionPath path = AttentionPath::fused) const {
    return matmul(attention(matmul(x, Wq), matmul(x, Wk), matmul(x, Wv), spec, path).out, Wo);
  }
  void zero_grad() {
    for (Tensor<R>* t : {&x, &Wq, &Wk, &Wv, &Wo}) t->zero_grad();
  }
};

// The causal spec of shape s: s.kv() K/V heads of D/H columns each, and the workload's
// modifier.
AttentionSpec causal_spec_of(const MhaShape& s);

// attention() on the spec. The op has no modifiers: an MHA shape with one runs attention()
// on the path the op takes (flash from kFlashFromKeys keys, fused below).
template <class R>
Tensor<R> forward_of(const MhaTensors<R>& t, const MhaShape& s) {
  if (s.KV != 0) return t.forward(causal_spec_of(s));
  if (g_modifier == Modifier::none) return t.forward(s.H);
  return t.forward(causal_spec_of(s), default_attention_path(s.T, false));
}

// The model's path for long sequences: attention() on the flash kernels, q, k, v leaves of
// (B, T, heads * head_dim), causal; one step = forward and backward with the upstream dO.
struct FlashTensors {
  Tensor<float> q, k, v;
  Array<float> dO;
  AttentionSpec spec;
  FlashTensors(const bench::FlashShape& s, const bench::FlashInputs& in)
      : q(tensor_of<float>(in.q, {s.B, s.T, s.width()}, true)),
        k(tensor_of<float>(in.k, {s.B, s.T, s.width()}, true)),
        v(tensor_of<float>(in.v, {s.B, s.T, s.width()}, true)),
        dO(tensor_of<float>(in.dO, {s.B, s.T, s.width()}, false).value()) {
    spec = causal_spec(s.H);
    spec.head_dim = s.dh;
    apply_modifier(spec);
  }
  Tensor<float> step() {
    for (Tensor<float>* t : {&q, &k, &v}) t->zero_grad();
    Tensor<float> out = attention(q, k, v, spec, AttentionPath::flash).out;
    out.backward(dO);
    return out;
  }
};

// The models, from the model workloads (model_runs.cpp), that the references are made of.
TransformerConfig toygpt_config(const bench::ToyGptShape& g);
AdamWOptions adamw_options(const bench::ToyGptShape& g);
TransformerConfig llama_config(const bench::LlamaShape& g);
Transformer<float> llama_model(const bench::LlamaShape& g, const bench::LlamaWeights& w);
TransformerConfig moe_config(const bench::LlamaShape& g);
void set_check_weights(Transformer<float>& m);
// The start-up check's side: loss and gradients of the first nseq sequences at weights w.
std::pair<double, bench::LlamaWeights> llama_loss_and_grads(const bench::LlamaShape& g,
                                                            const bench::LlamaWeights& w,
                                                            const std::vector<std::int64_t>& seq,
                                                            std::size_t nseq);
// The start-up check's side: a fresh cache, the prompt in one forward, one decode step.
std::vector<double> decode_logits(const bench::LlamaShape& g, const bench::LlamaWeights& w,
                                  const std::vector<std::int64_t>& tokens);
// The first nseq sequences of seq (B, T+1) as tokens [:, :T] and next-token targets [:, 1:].
std::pair<Indices, Indices> next_token_batch(const std::vector<std::int64_t>& seq, std::size_t nseq,
                                             std::size_t T);

// The median GFLOP/s of a few 1024^3 sgemms at the workload's threads, in the same process
// (what gemm_peak_f32 times): the ceiling a GPT-2 step's GFLOP/s is read against.
double sgemm_peak_gflops(int repeats);

// The workloads, each a Result as bench::print_json writes it.
template <class R>
Result run_mha(const Args& a, const bench::MhaWorkload& w);
Result run_gqa(const Args& a, const bench::MhaWorkload& w);
Result run_flash(const Args& a, const bench::FlashShape& s);
Result run_toygpt(const Args& a, const bench::ToyGptShape& g);
Result run_llama(const Args& a);
Result run_moe(const Args& a);
Result run_decode(const Args& a, std::size_t context);
Result run_chain(const Args& a);
Result run_bmm(const Args& a, const MhaShape& s);
template <class R>
Result run_gemm_peak(const Args& a);

// The reference of a.workload written to a.dump; false for a workload the peers do not run.
bool dump_reference(const Args& a);

}  // namespace tapegrad_bench
