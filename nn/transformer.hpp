#pragma once
// Transformer: a small decoder-only transformer built from one TransformerConfig
// (nn/config.hpp). The gpt2 preset is GPT-2's shape (no dropout), the llama preset Llama's,
// and each other preset its Hugging Face family's (nn/io/hf/):
//
//   tokens (B, T) -> tok_emb (B, T, D) [* sqrt(D) when embed_scale]
//                    [+ pos_emb (T, D) when positions = learned] [-> embed_norm]
//                 -> layers x Block (pre-norm: x + attn(norm1(x)), x + mlp(norm2(x));
//                    post_norms: x + norm1_post(attn(norm1(x))), likewise for the mlp)
//                 -> norm_f -> head -> logits (B, T, vocab)
//
// The head has no bias (as GPT-2's lm_head); with tie_embeddings it is tok_emb's matrix,
// transposed. Parameter names, in registration order: tok_emb.weight, [pos_emb.weight],
// [embed_norm.weight, [embed_norm.bias]], blocks.<i>.{norm1.weight, [norm1.bias], attn.Wq,
// [attn.bq], attn.Wk, [attn.bk], attn.Wv, [attn.bv], attn.Wo, [attn.bo], [attn.q_norm.weight,
// attn.k_norm.weight], [norm1_post.*], norm2.weight, [norm2.bias], mlp.{fc, proj} (gelu) or
// mlp.{gate, up, down} (swiglu, geglu), each .weight [and .bias], [norm2_post.*]},
// norm_f.weight, [norm_f.bias], [head.weight]. Linear weights are (in, out).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"
#include "nn/block.hpp"
#include "nn/config.hpp"
#include "nn/hooks.hpp"
#include "nn/init.hpp"
#include "nn/kv_cache.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"
#include "ops/embedding.hpp"  // Indices

namespace tapegrad {

// The mixture of experts' auxiliary losses of the last forward, raw (not times their
// coefficients), each the mean over the MoE layers: aux = E * sum_e f_e * P_e (k at
// perfect balance), z = mean over tokens of logsumexp(router logits)^2.
template <class T>
struct MoELosses {
  Tensor<T> aux, z;
};

// What training minimises, total = lm + moe_aux_coef * aux + moe_z_coef * z, and its parts
// (aux and z raw, as MoELosses), for the log.
template <class T>
struct TrainingLoss {
  Tensor<T> total, lm, aux, z;
};

// The warning a model with experts_top_k = 1 and moe_renorm prints (once per process).
std::string dead_router_warning();

template <class T>
class Transformer : public Module<T> {
 public:
  // Validates the config, then draws every parameter from Generator(config.seed) in
  // registration order (GPT-2 init; Wq, Wk, Wv as config.attention_init says).
  explicit Transformer(const TransformerConfig& config);
  // The same model with its drawn parameters zero, for a loader that assigns every one of
  // them next (a checkpoint, a Hugging Face folder): no time spent on draws.
  static Transformer to_be_loaded(const TransformerConfig& config) {
    return Transformer(config, Generator::without_draws());
  }

  // tokens (B, T) with 1 <= T <= context and values in [0, vocab) -> logits (B, T, vocab)
  Tensor<T> forward(const Indices& tokens);
  Tensor<T> operator()(const Indices& tokens) { return forward(tokens); }
  // The same model over new tokens (B, Tn) at absolute positions caches.length() .. + Tn - 1,
  // each layer reading and extending its own cache -> logits (B, Tn, vocab) of the new
  // positions, equal to forward()'s at those positions over the whole sequence. A prompt
  // can be fed in one call or in chunks of any size, then one token at a time (the decode
  // path under no-grad). Positions stop at the context unless past_context_ok(config).
  Tensor<T> forward(const Indices& tokens, KVCacheSet<T>& caches);
  // Mean next-token cross-entropy of forward(tokens) against targets (B, T); positions
  // whose target is ignore_index do not count. chunk_rows: the head and the loss computed
  // that many rows at a time (linear_cross_entropy: the (B*T, vocab) logits never exist at
  // once), 0 all at once (forward() then cross_entropy), nullopt as
  // automatic_head_chunk_rows says. The same loss and gradients either way, to rounding (bit
  // for bit under kernels::ReferenceProductsGuard).
  Tensor<T> loss(const Indices& tokens, const Indices& targets,
                 std::int64_t ignore_index = -100,
                 std::optional<std::size_t> chunk_rows = std::nullopt);

  // The mean cross-entropy above plus the MoE auxiliary losses of that same forward (zero
  // for a dense model): the training objective. Its forward is the model's one training
  // forward, the only one moe_capacity limits; every other forward is dropless.
  // Evaluation uses loss() alone.
  TrainingLoss<T> training_loss(const Indices& tokens, const Indices& targets,
                                std::int64_t ignore_index = -100,
                                std::optional<std::size_t> chunk_rows = std::nullopt);
  // The MoE auxiliary losses of the last forward (zero scalars for a dense model).
  MoELosses<T> moe_losses() const;

  const TransformerConfig& config() const { return config_; }
  // The objective's fields (role objective: the auxiliary losses' weights) from `from`,
  // which training_loss weighs from now on; the architecture and the parameters stay.
  // ShapeError "config: ..." naming the field for a value out of its range.
  void set_objective(const TransformerConfig& from);
  // The same for the execution's fields (how forward and backward run, never what they
  // compute: checkpoint_activations); ShapeError "config: ..." for a combination the model
  // cannot run (checkpoint_activations with experts).
  void set_execution(const TransformerConfig& from);
  std::vector<Block<T>>& blocks() { return blocks_; }
  const std::vector<Block<T>>& blocks() const { return blocks_; }
  // Every block's attention takes this path (fused by default; composed is the reference).
  void set_attention_path(AttentionPath path);
  // Head ablation, on any model (a trained or a loaded one): the heads of `layer` whose
  // entry is false contribute nothing (their output is zeroed before Wo); empty keeps all.
  void set_head_mask(std::size_t layer, const std::vector<bool>& keep);
  // Exactly one head of the whole model silenced: every other mask is cleared first.
  void ablate_head(std::size_t layer, std::size_t head);
  void clear_head_masks();

  // forward(tokens) with `hooks` at every hook point of the model for this run only
  // (docs/HOOKS.md lists the names and shapes); a name given to `hooks` that the model has
  // no point for is an error after the run, named after `caller` (what the user called).
  Tensor<T> run_with_hooks(const Indices& tokens, Hooks<T>& hooks,
                           const char* caller = "run_with_hooks");

 private:
  Transformer(const TransformerConfig& config, Generator&& gen);
  // The fields of `role` taken from `from`, every other field kept.
  void take_fields(const TransformerConfig& from, FieldRole role);
  void check_tokens(const Indices& tokens, std::size_t start, bool cached) const;
  Tensor<T> run(const Indices& tokens, KVCacheSet<T>* caches);
  // run() up to the head's input: the final norm's output (B, T, D)
  Tensor<T> trunk(const Indices& tokens, KVCacheSet<T>* caches);
  // tokens (B, T) at positions start.. -> what enters the first block (B, T, D)
  Tensor<T> embed(const Indices& tokens, std::size_t start);
  void attach_hooks(Hooks<T>* hooks);

  TransformerConfig config_;
  Embedding<T> tok_emb_;
  std::optional<Embedding<T>> pos_emb_;
  std::optional<Norm<T>> embed_norm_;
  std::vector<Block<T>> blocks_;
  Norm<T> norm_f_;
  std::optional<Linear<T>> head_;
  HookPoint<T> hook_;
};

// The logits of forward(tokens) and the activations at `names` (empty: every point); with
// `grads`, a backward from the logits leaves each activation's gradient in the cache.
template <class T>
struct CachedRun {
  Tensor<T> logits;
  ActivationCache<T> cache;
};
template <class T>
CachedRun<T> run_with_cache(Transformer<T>& model, const Indices& tokens,
                            const std::vector<std::string>& names = {}, bool grads = false);

// The head and the loss loss() computes in chunks by default: for `rows` positions of a
// vocabulary of at least kChunkedHeadMinVocab, default_chunk_rows(vocab) rows at a time
// when that is fewer than `rows`; 0 (all at once) otherwise. Below that vocabulary the
// logits are a small part of a step's activations, and the unchunked head's products cost
// 3 instead of 4 times the forward's; every built-in task's vocabulary is below it, so
// their numbers are the unchunked ops' (BLAS's products of parts are not bit for bit the
// whole product's).
inline constexpr std::size_t kChunkedHeadMinVocab = 8192;
std::size_t automatic_head_chunk_rows(std::size_t rows, std::size_t vocab, std::size_t bytes_per_value);

// True when generation can go on past config.context: a sliding window attends to the
// last `window` keys at any position, and RoPE (or no positions) has an angle for every
// position; learned positions end at the table's last row, full attention at the context
// the model was trained for.
bool past_context_ok(const TransformerConfig& config);

extern template class Transformer<float>;
extern template class Transformer<double>;

}  // namespace tapegrad
