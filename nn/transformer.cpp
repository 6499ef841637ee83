#include "nn/tinygpt.hpp"

#include <cmath>
#include <string>

#include "ops/cross_entropy.hpp"
#include "ops/elementwise.hpp"

namespace tapegrad {

void TinyGPTConfig::validate() const {
  if (vocab == 0 || context == 0 || d_model == 0 || heads == 0 || layers == 0 || mlp_ratio == 0)
    fail("TinyGPT", "vocab={}, context={}, d_model={}, heads={}, layers={} and mlp_ratio={} "
         "must all be positive", vocab, context, d_model, heads, layers, mlp_ratio);
  if (d_model % heads != 0)
    fail("TinyGPT", "d_model={} is not divisible by heads={}", d_model, heads);
  if (attention_scale && !(*attention_scale > 0.0 && std::isfinite(*attention_scale)))
    fail("TinyGPT", "attention_scale must be positive and finite, got {}", *attention_scale);
}

bool TinyGPTConfig::operator==(const TinyGPTConfig& o) const {
  return vocab == o.vocab && context == o.context && d_model == o.d_model && heads == o.heads &&
         layers == o.layers && mlp_ratio == o.mlp_ratio && norm == o.norm &&
         attention_scale == o.attention_scale && attention_init == o.attention_init &&
         seed == o.seed;
}

namespace {

const TinyGPTConfig& validated(const TinyGPTConfig& c) {
  c.validate();
  return c;
}

template <class T>
std::vector<Block<T>> make_blocks(const TinyGPTConfig& c, Generator& gen) {
  BlockConfig b;
  b.d_model = c.d_model;
  b.heads = c.heads;
  b.mlp_hidden = c.mlp_ratio * c.d_model;
  b.norm = c.norm;
  b.attention_scale = c.attention_scale;
  b.std = init::gpt2_std;
  b.attention_std = init::attention_std(c.attention_init, c.d_model);
  b.residual_std = init::residual_std(c.layers);
  std::vector<Block<T>> blocks;
  blocks.reserve(c.layers);
  for (std::size_t i = 0; i < c.layers; ++i) blocks.emplace_back(b, gen);
  return blocks;
}

}  // namespace

template <class T>
TinyGPT<T>::TinyGPT(const TinyGPTConfig& config) : TinyGPT(config, Generator(config.seed)) {}

// Members are built in declaration order, which is the order of the draws from `gen`.
template <class T>
TinyGPT<T>::TinyGPT(const TinyGPTConfig& config, Generator&& gen)
    : config_(validated(config)),
      tok_emb_(config.vocab, config.d_model, gen),
      pos_emb_(config.context, config.d_model, gen),
      blocks_(make_blocks<T>(config, gen)),
      norm_f_(config.norm, config.d_model),
      head_(config.d_model, config.vocab, false, gen) {
  this->register_module("tok_emb", tok_emb_);
  this->register_module("pos_emb", pos_emb_);
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    this->register_module("blocks." + std::to_string(i), blocks_[i]);
  this->register_module("norm_f", norm_f_);
  this->register_module("head", head_);
}

// tokens (B, T) -> tok_emb (B, T, D) + pos_emb (T, D) -> blocks -> norm_f -> head (B, T, V)
// backward: every step is an op on the tape (embedding's scatter-add, add's sum over B
// for the positional table, the blocks, layer_norm, matmul).
template <class T>
Tensor<T> TinyGPT<T>::forward(const Indices& tokens) {
  if (tokens.dimension() != 2 || tokens.shape()[0] == 0 || tokens.shape()[1] == 0)
    fail("TinyGPT", "tokens must be (B, T) with B, T >= 1, got {}",
         shape_str(Shape(tokens.shape().begin(), tokens.shape().end())));
  const std::size_t B = tokens.shape()[0], Tn = tokens.shape()[1];
  if (Tn > config_.context)
    fail("TinyGPT", "sequence length T={} exceeds the context of {} (tokens are ({},{}))", Tn,
         config_.context, B, Tn);
  const std::int64_t V = static_cast<std::int64_t>(config_.vocab);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::int64_t t = tokens.data()[i];
    if (t < 0 || t >= V)
      fail("TinyGPT", "token {} at (b={}, t={}) is outside the vocabulary [0, {}) (tokens are "
           "({},{}))", t, i / Tn, i % Tn, V, B, Tn);
  }
  Indices positions = Indices::from_shape({Tn});
  for (std::size_t t = 0; t < Tn; ++t) positions(t) = static_cast<std::int64_t>(t);

  Tensor<T> x = tok_emb_(tokens) + pos_emb_(positions);
  for (Block<T>& block : blocks_) x = block(x);
  return head_(norm_f_(x));
}

template <class T>
Tensor<T> TinyGPT<T>::loss(const Indices& tokens, const Indices& targets,
                           std::int64_t ignore_index) {
  if (tokens.shape() != targets.shape())
    fail("TinyGPT::loss", "targets {} must have the shape of tokens {}",
         shape_str(Shape(targets.shape().begin(), targets.shape().end())),
         shape_str(Shape(tokens.shape().begin(), tokens.shape().end())));
  return cross_entropy(forward(tokens), targets, ignore_index);
}

template <class T>
void TinyGPT<T>::keep_attention_weights(bool keep) {
  for (Block<T>& block : blocks_) block.attention().keep_weights(keep);
}

template class TinyGPT<float>;
template class TinyGPT<double>;

}  // namespace tapegrad
