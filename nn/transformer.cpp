#include "nn/transformer.hpp"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "autograd/checkpoint.hpp"
#include "autograd/tape.hpp"  // grad_enabled
#include "ops/cross_entropy.hpp"
#include "ops/elementwise.hpp"
#include "ops/linear_cross_entropy.hpp"
#include "ops/matmul.hpp"

namespace tapegrad {

namespace {

// k = 1 with renormalisation makes every kept weight exactly 1: only the auxiliary losses
// train the router. Said once per process, on stderr, so that logs show it.
void warn_if_dead_router(const TransformerConfig& c) {
  static std::atomic<bool> warned{false};
  if (c.experts == 0 || c.experts_top_k != 1 || !c.moe_renorm) return;
  if (warned.exchange(true)) return;
  std::fprintf(stderr, "%s", dead_router_warning().c_str());
}

const TransformerConfig& validated(const TransformerConfig& c) {
  c.validate();
  warn_if_dead_router(c);
  return c;
}

// Each expert is the block's feed-forward (its width, kind, bias and init); the router and
// the routing come from the model's moe fields, the number of experts from the layer's plan.
MoEConfig moe_config(const TransformerConfig& c, const BlockConfig& b, std::size_t experts) {
  MoEConfig m;
  m.d_model = c.d_model;
  m.hidden = b.mlp_hidden;
  m.experts = experts;
  m.top_k = c.experts_top_k;
  m.mlp = b.mlp;
  m.mlp_bias = b.mlp_bias;
  m.renorm = c.moe_renorm;
  m.capacity = c.moe_capacity;
  m.std = b.std;
  m.out_std = b.attention.out_std;
  return m;
}

// Layer `plan` of the model c: its attention (the window, or none on a global layer) and its
// feed-forward (experts on every moe_every-th layer, dense elsewhere) come from the plan, the
// parts every layer shares from c.
BlockConfig block_config(const TransformerConfig& c, const LayerPlan& plan) {
  BlockConfig b;
  AttentionConfig& a = b.attention;
  a.d_model = c.d_model;
  a.spec = plan.attention;
  a.qk_norm = c.qk_norm;
  a.qk_norm_gain = c.qk_norm_gain;
  a.learned_temperature = c.learned_temperature;
  a.norm_eps = c.norm_eps;
  a.qkv_bias = c.attn_qkv_bias;
  a.out_bias = c.attn_out_bias;
  if (c.positions == PositionKind::rope) a.rope = c.rope();
  a.qkv_std = init::attention_std(c.attention_init, c.d_model);
  a.out_std = init::residual_std(c.layers);
  b.mlp_hidden = plan.mlp_hidden;
  b.mlp = c.mlp;
  b.mlp_bias = c.mlp_bias;
  b.norm = c.norm;
  b.post_norms = c.post_norms;
  b.residual_multiplier = c.residual_multiplier;
  b.std = init::gpt2_std;
  b.moe = moe_config(c, b, plan.experts);
  return b;
}

template <class T>
std::vector<Block<T>> make_blocks(const TransformerConfig& c, Generator& gen) {
  std::vector<Block<T>> blocks;
  blocks.reserve(c.layers);
  for (std::size_t i = 0; i < c.layers; ++i)
    blocks.emplace_back(block_config(c, c.layer_plan(i)), gen);
  return blocks;
}

template <class T>
std::optional<Embedding<T>> make_positions(const TransformerConfig& c, Generator& gen) {
  if (c.positions != PositionKind::learned) return std::nullopt;
  return Embedding<T>(c.context, c.d_model, gen);
}

template <class T>
std::optional<Norm<T>> make_embed_norm(const TransformerConfig& c) {
  if (!c.embed_norm) return std::nullopt;
  return Norm<T>(c.norm, c.d_model, c.norm_eps);
}

template <class T>
std::optional<Linear<T>> make_head(const TransformerConfig& c, Generator& gen) {
  if (c.tie_embeddings) return std::nullopt;
  return Linear<T>(c.d_model, c.vocab, false, gen);
}

}  // namespace

template <class T>
Transformer<T>::Transformer(const TransformerConfig& config)
    : Transformer(config, Generator(config.seed)) {}

// Members are built in declaration order, which is the order of the draws from `gen`.
template <class T>
Transformer<T>::Transformer(const TransformerConfig& config, Generator&& gen)
    : config_(validated(config)),
      tok_emb_(config.vocab, config.d_model, gen),
      pos_emb_(make_positions<T>(config, gen)),
      embed_norm_(make_embed_norm<T>(config)),
      blocks_(make_blocks<T>(config, gen)),
      norm_f_(config.norm, config.d_model, config.norm_eps),
      head_(make_head<T>(config, gen)) {
  this->register_module("tok_emb", tok_emb_);
  if (pos_emb_) this->register_module("pos_emb", *pos_emb_);
  if (embed_norm_) this->register_module("embed_norm", *embed_norm_);
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    this->register_module("blocks." + std::to_string(i), blocks_[i]);
  this->register_module("norm_f", norm_f_);
  if (head_) this->register_module("head", *head_);
}

// Every layer windowed: a global layer would need every earlier key.
bool past_context_ok(const TransformerConfig& c) {
  return c.window > 0 && c.window_pattern == 0 && c.positions != PositionKind::learned;
}

// tokens (B, T) at positions start.. : a batch and sequence, every id in the vocabulary;
// without a cache T <= context (as training always was), with one the last position
// within the context unless past_context_ok (then a chunk may be any length).
template <class T>
void Transformer<T>::check_tokens(const Indices& tokens, std::size_t start, bool cached) const {
  if (tokens.dimension() != 2 || tokens.shape()[0] == 0 || tokens.shape()[1] == 0)
    fail("Transformer", "tokens must be (B, T) with B, T >= 1, got {}",
         shape_str(Shape(tokens.shape().begin(), tokens.shape().end())));
  const std::size_t B = tokens.shape()[0], Tn = tokens.shape()[1];
  if (!cached && Tn > config_.context)
    fail("Transformer", "sequence length T={} exceeds the context of {} (tokens are ({},{}))", Tn,
         config_.context, B, Tn);
  if (cached && start + Tn > config_.context && !past_context_ok(config_))
    fail("Transformer", "positions {}..{} go past the context of {} (tokens are ({},{}) after "
         "{} cached): only a sliding-window model without learned positions can", start,
         start + Tn - 1, config_.context, B, Tn, start);
  const std::int64_t V = static_cast<std::int64_t>(config_.vocab);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::int64_t t = tokens.data()[i];
    if (t < 0 || t >= V)
      fail("Transformer", "token {} at (b={}, t={}) is outside the vocabulary [0, {}) (tokens "
           "are ({},{}))", t, i / Tn, i % Tn, V, B, Tn);
  }
}

template <class T>
Tensor<T> Transformer<T>::forward(const Indices& tokens) {
  return run(tokens, nullptr);
}

template <class T>
Tensor<T> Transformer<T>::forward(const Indices& tokens, KVCacheSet<T>& caches) {
  if (caches.size() != blocks_.size())
    fail("Transformer", "the cache set has {} layers, the model {}", caches.size(),
         blocks_.size());
  return run(tokens, &caches);
}

// tokens (B, T) -> embed (B, T, D) (below)
// -> blocks (each with its layer's cache, if any) -> norm_f [/ logit_divisor] -> head (B, T, V)
// [-> final_softcap c: c * tanh(logits / c)]
// tied head: h (B, T, D) @ tok_emb^T (D, V), so tok_emb's gradient sums both of its uses.
// backward: every step is an op on the tape (embedding's scatter-add, add's sum over B
// for the positional table, the blocks, the norm, matmul).
template <class T>
Tensor<T> Transformer<T>::run(const Indices& tokens, KVCacheSet<T>* caches) {
  const Tensor<T> h = trunk(tokens, caches);
  const Tensor<T> logits = head_ ? (*head_)(h) : matmul_nt(h, tok_emb_.weight());
  return hook_("logits",
               config_.final_softcap > 0 ? softcap(logits, config_.final_softcap) : logits);
}

template <class T>
Tensor<T> Transformer<T>::trunk(const Indices& tokens, KVCacheSet<T>* caches) {
  const std::size_t start = caches ? caches->length() : 0;
  check_tokens(tokens, start, caches != nullptr);
  Tensor<T> x = embed(tokens, start);
  // Activation checkpointing: in a forward that records, without a cache or hooks (a
  // hooked run keeps every activation on the tape, for the hooks' gradients, and its hooks
  // are detached before the backward would run the block again), each block is one
  // checkpoint node that keeps its input; its backward runs a copy of the block taken
  // now (the same parameters, head mask and attention path) again on that input.
  const bool checkpointed = config_.checkpoint_activations && !caches && !hook_.hooks && grad_enabled();
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    if (!checkpointed) {
      x = blocks_[i].forward(x, caches ? &(*caches)[i] : nullptr);
      continue;
    }
    auto block = std::make_shared<Block<T>>(blocks_[i]);
    x = checkpoint<T>(x, block->parameters(),
                      [block](const Tensor<T>& in) { return block->forward(in, nullptr); });
  }
  const Tensor<T> h = hook_("ln_final.out", norm_f_(x));
  // logits / s as h / s before the head: every head path (the chunked loss too) sees it
  return config_.logit_divisor == 1.0 ? h : h / Scalar<T>(config_.logit_divisor);
}

// tokens (B, T) -> tok_emb (B, T, D) [* sqrt(D)] [* embed_multiplier] [+ pos_emb (T, D) at positions
// start..start+T-1] [-> embed_norm]
template <class T>
Tensor<T> Transformer<T>::embed(const Indices& tokens, std::size_t start) {
  const std::size_t Tn = tokens.shape()[1];
  Tensor<T> x = tok_emb_(tokens);
  // the tied head reads tok_emb's matrix itself: the scale is on this use only
  if (config_.embed_scale) x = x * Scalar<T>(std::sqrt(double(config_.d_model)));
  if (config_.embed_multiplier != 1.0) x = x * Scalar<T>(config_.embed_multiplier);
  x = hook_("embed", x);
  if (pos_emb_) {
    Indices positions = Indices::from_shape({Tn});
    for (std::size_t t = 0; t < Tn; ++t) positions(t) = static_cast<std::int64_t>(start + t);
    x = x + hook_("pos_embed", (*pos_emb_)(positions));
  }
  return embed_norm_ ? hook_("ln_embed.out", (*embed_norm_)(x)) : x;
}

template <class T>
void Transformer<T>::attach_hooks(Hooks<T>* hooks) {
  hook_ = {hooks, ""};
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    blocks_[i].set_hooks(hooks, "blocks." + std::to_string(i) + ".");
}

// The hooks are attached for this one forward and detached however it ends.
template <class T>
Tensor<T> Transformer<T>::run_with_hooks(const Indices& tokens, Hooks<T>& hooks,
                                         const char* caller) {
  struct Attached {
    Transformer& model;
    ~Attached() { model.attach_hooks(nullptr); }
  } attached{*this};
  attach_hooks(&hooks);
  Tensor<T> logits = run(tokens, nullptr);
  hooks.check_reached(caller);
  return logits;
}

template <class T>
CachedRun<T> run_with_cache(Transformer<T>& model, const Indices& tokens,
                            const std::vector<std::string>& names, bool grads) {
  Hooks<T> hooks;
  hooks.cache(names, grads);
  Tensor<T> logits = model.run_with_hooks(tokens, hooks, "run_with_cache");
  return {std::move(logits), hooks.take_activations()};
}

std::size_t automatic_head_chunk_rows(std::size_t rows, std::size_t vocab,
                                      std::size_t bytes_per_value) {
  if (vocab < kChunkedHeadMinVocab) return 0;
  const std::size_t chunk = default_chunk_rows(vocab, bytes_per_value);
  return chunk < rows ? chunk : 0;
}

// Chunked: the trunk, then linear_cross_entropy over the head's matrix (tok_emb's, (V, D),
// when tied) with the final soft-cap; the hook point "logits" is not passed (loss() runs
// without hooks: run_with_hooks is the hooked forward).
template <class T>
Tensor<T> Transformer<T>::loss(const Indices& tokens, const Indices& targets,
                               std::int64_t ignore_index, std::optional<std::size_t> chunk_rows) {
  if (tokens.shape() != targets.shape())
    fail("Transformer::loss", "targets {} must have the shape of tokens {}",
         shape_str(Shape(targets.shape().begin(), targets.shape().end())),
         shape_str(Shape(tokens.shape().begin(), tokens.shape().end())));
  const std::size_t rows =
      chunk_rows ? *chunk_rows : automatic_head_chunk_rows(tokens.size(), config_.vocab, sizeof(T));
  if (rows == 0) return cross_entropy(forward(tokens), targets, ignore_index);
  LinearCrossEntropyOptions o;
  o.transposed = !head_;
  o.softcap = config_.final_softcap;
  o.ignore_index = ignore_index;
  o.chunk_rows = rows;
  const Tensor<T> h = trunk(tokens, nullptr);
  return linear_cross_entropy(h, head_ ? head_->weight() : tok_emb_.weight(), targets, o);
}

std::string dead_router_warning() {
  return "warning: experts_top_k=1 with moe_renorm gives every token weight 1: the "
         "language-model loss sends the router no gradient; only the auxiliary losses train it\n";
}

// aux = mean over MoE layers of E sum_e f_e P_e, z = mean over MoE layers of
// mean_t logsumexp^2, both raw and from the last forward; zero scalars when dense.
template <class T>
MoELosses<T> Transformer<T>::moe_losses() const {
  MoELosses<T> out;
  Tensor<T> aux, z;
  std::size_t layers = 0;
  for (const Block<T>& block : blocks_) {
    const MixtureOfExperts<T>* moe = block.moe();
    if (!moe || !moe->aux_loss().defined()) continue;
    aux = layers == 0 ? moe->aux_loss() : aux + moe->aux_loss();
    z = layers == 0 ? moe->z_loss() : z + moe->z_loss();
    ++layers;
  }
  if (layers == 0) {
    out.aux = out.z = Tensor<T>::scalar(T(0));
    return out;
  }
  out.aux = aux / static_cast<T>(layers);
  out.z = z / static_cast<T>(layers);
  return out;
}

// LM loss + coefficients x aux losses: what training minimises; each part kept for the log.
// loss() (and so every evaluation) stays the language-model loss alone.
template <class T>
TrainingLoss<T> Transformer<T>::training_loss(const Indices& tokens, const Indices& targets,
                                              std::int64_t ignore_index,
                                              std::optional<std::size_t> chunk_rows) {
  TrainingLoss<T> out;
  // For this forward only (an exception included): the experts' capacity applies, and the
  // positions the LM loss ignores (prompts, padding) do not count in f and P.
  std::vector<bool> counted(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) counted[i] = targets.data()[i] != ignore_index;
  struct TrainingForward {
    std::vector<Block<T>>& blocks;
    TrainingForward(std::vector<Block<T>>& b, const std::vector<bool>& counted) : blocks(b) {
      set(true, counted);
    }
    ~TrainingForward() { set(false, {}); }
    void set(bool training, const std::vector<bool>& counted) {
      for (Block<T>& block : blocks)
        if (MixtureOfExperts<T>* moe = block.moe()) {
          moe->set_training(training);
          moe->set_counted_tokens(counted);
        }
    }
  } scope(blocks_, counted);
  out.lm = loss(tokens, targets, ignore_index, chunk_rows);
  const MoELosses<T> moe = moe_losses();
  out.aux = moe.aux;
  out.z = moe.z;
  out.total = config_.experts > 0
                  ? out.lm + out.aux * static_cast<T>(config_.moe_aux_coef) +
                        out.z * static_cast<T>(config_.moe_z_coef)
                  : out.lm;
  return out;
}

template <class T>
void Transformer<T>::take_fields(const TransformerConfig& from, FieldRole role) {
  TransformerConfig c = config_;
#define TAPEGRAD_TAKE_FIELD(field_role, type, name, default_value, lo, hi, since, old, doc) \
  if (FieldRole::field_role == role) c.name = from.name;
  TAPEGRAD_TRANSFORMER_FIELDS(TAPEGRAD_TAKE_FIELD)
#undef TAPEGRAD_TAKE_FIELD
  c.validate();
  config_ = c;
}

template <class T>
void Transformer<T>::set_objective(const TransformerConfig& from) {
  take_fields(from, FieldRole::objective);
}

template <class T>
void Transformer<T>::set_execution(const TransformerConfig& from) {
  take_fields(from, FieldRole::execution);
}

template <class T>
void Transformer<T>::set_attention_path(AttentionPath path) {
  for (Block<T>& block : blocks_) block.attention().set_path(path);
}

template <class T>
void Transformer<T>::set_head_mask(std::size_t layer, const std::vector<bool>& keep) {
  if (layer >= blocks_.size())
    fail("Transformer::set_head_mask", "layer {} does not exist (the model has {} layers)", layer,
         blocks_.size());
  blocks_[layer].attention().set_head_mask(keep);
}

template <class T>
void Transformer<T>::ablate_head(std::size_t layer, std::size_t head) {
  if (head >= config_.heads)
    fail("Transformer::ablate_head", "head {} does not exist (the model has {} heads per layer)",
         head, config_.heads);
  clear_head_masks();
  std::vector<bool> keep(config_.heads, true);
  keep[head] = false;
  set_head_mask(layer, keep);
}

template <class T>
void Transformer<T>::clear_head_masks() {
  for (Block<T>& block : blocks_) block.attention().set_head_mask({});
}

template class Transformer<float>;
template class Transformer<double>;
template CachedRun<float> run_with_cache(Transformer<float>&, const Indices&,
                                         const std::vector<std::string>&, bool);
template CachedRun<double> run_with_cache(Transformer<double>&, const Indices&,
                                          const std::vector<std::string>&, bool);

}  // namespace tapegrad
