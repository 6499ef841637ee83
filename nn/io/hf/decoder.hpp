#pragma once
// What the decoders that share Llama's layout have in common (llama, mistral, mixtral, qwen2,
// gemma, gemma2, starcoder2): their config.json sizes, RoPE keys and rope_scaling, their
// sliding window key, the requirements RoPE puts on a model, and model.layers.L.self_attn
// tensor names.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "nn/io/hf/rows.hpp"

namespace tapegrad::hf {

// transformers 4.49's class defaults of the keys config.json may leave out.
struct DecoderDefaults {
  std::size_t vocab, hidden, intermediate, max_positions;
  std::optional<std::size_t> kv_heads;  // nullopt: = num_attention_heads
  double norm_eps, theta;
  std::optional<std::size_t> sliding_window;
  std::size_t layers, heads;
  std::optional<std::size_t> head_dim;  // nullopt: hidden_size / num_attention_heads
  bool tied;
  std::string norm_eps_key = "rms_norm_eps";
};

// vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads (null: every head its own) and head_dim (null: hidden/heads).
std::vector<ConfigKey> decoder_size_keys(const DecoderDefaults& d);
// max_position_embeddings, the norm's epsilon, tie_word_embeddings, rope_theta, and
// partial_rotary_factor, refused unless 1.
std::vector<ConfigKey> decoder_position_keys(const DecoderDefaults& d);
// sliding_window as 4.49's eager and sdpa attention apply it to every layer: a query sees the
// W keys up to itself (the mask hides key j <= i - W), tapegrad's window W; null: none.
// Written as the window, or null (newer releases take a missing one as 4096).
ConfigKey sliding_window_key(const DecoderDefaults& d);
// sliding_window as the file has it (nullopt: null, or left out with no default); 0, which
// would hide every key, refused. What each family then makes of it is its own.
std::optional<std::size_t> read_sliding_window(ConfigReader& r, const DecoderDefaults& d);
// rope_scaling -> the RoPE fields; the keys each scaling type reads, the others refused by
// name. Must follow the context and the window.
ConfigKey rope_scaling_key();
// hidden_act, SwiGLU's activation.
ConfigKey silu_key();
// attention_bias: one switch for q, k, v and o (a model with only some of them is written
// with zeros for the others).
ConfigKey attention_bias_key();
// Llama's own last rows, which Granite shares: attention_bias, mlp_bias, rope_scaling.
std::vector<ConfigKey> llama_bias_and_scaling_keys();
// The biases a file of Llama's layout holds: attention_bias one switch for q, k, v and o.
FileBiases llama_biases(const TransformerConfig& c);

// The base of the RoPE presets: rotary positions, RMSNorm, SwiGLU without biases, untied.
TransformerConfig rope_preset();
// What a grouped preset derives: two query heads per K/V head where heads allows it, unless
// kv_heads was given.
void group_kv_heads(TransformerConfig& c, const std::function<bool(const std::string&)>& given);

// "has RoPE", and what transformers' RoPE scalings cannot say (static NTK, yarn's own
// original context, a yarn factor below 1).
Requirement has_rope();
std::vector<Requirement> rope_requirements();
// Llama's own parts, which mistral, mixtral and qwen2 share: RoPE, RMSNorm, SwiGLU and the
// 1/sqrt(head_dim) scale.
std::vector<Requirement> llama_parts_requirements();
// kv heads and head_dim any; experts only where `experts` (with mixtral's rules).
std::vector<Requirement> expert_requirements(bool experts);

// model.embed_tokens, model.layers.L.{input_layernorm, self_attn.{q,k,v,o}_proj,
// post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head.
TensorNames decoder_tensor_names();

}  // namespace tapegrad::hf
