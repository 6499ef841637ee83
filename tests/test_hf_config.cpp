// Hugging Face config.json <-> TransformerConfig (nn/io/hf_config.hpp): the public
// configurations of gpt2, Llama-3-8B (and 3.1's llama3 RoPE scaling), Mistral-7B-v0.1,
// Mixtral-8x7B-v0.1, Qwen2-7B, gemma-2-2b and bloom-560m, as their config.json files on the
// hub have them, map to the
// published shapes (their parameter counts, counted by hand from the shapes, are the
// published ones); every refusal names its field; an export reads back as the same model.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/io/pretrained.hpp"

using namespace tapegrad;
using json = nlohmann::json;

namespace {

const char* kGpt2 = R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
  "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
  "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
  "resid_pdrop": 0.1, "summary_activation": null, "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true, "summary_type": "cls_index", "summary_use_proj": true,
  "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
  "vocab_size": 50257})";

const char* kLlama3 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0", "use_cache": true, "vocab_size": 128256})";

// Llama 3.1 8B: the same shapes, a 128K context with the llama3 frequency scaling
const char* kLlama31 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})";

const char* kMistral = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})";

const char* kMixtral = R"({
  "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
  "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": false,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.36.0.dev0", "use_cache": true, "vocab_size": 32000})";

const char* kQwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
  "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
  "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28,
  "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 131072, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.37.2", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 152064})";

const char* kGemma2 = R"({
  "architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid",
  "eos_token_id": 1, "final_logit_softcapping": 30.0, "head_dim": 256,
  "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 2304, "initializer_range": 0.02, "intermediate_size": 9216,
  "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
  "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
  "sliding_window": 4096, "torch_dtype": "float32", "transformers_version": "4.42.4",
  "use_cache": true, "vocab_size": 256000})";

// google/gemma-2b's: hidden_act "gelu", which 4.49's GemmaMLP applies as the exact GELU
const char* kGemma = R"({
  "architectures": ["GemmaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 16384,
  "max_position_embeddings": 8192, "model_type": "gemma", "num_attention_heads": 8,
  "num_hidden_layers": 18, "num_key_value_heads": 1, "pad_token_id": 0, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 10000.0, "torch_dtype": "bfloat16",
  "transformers_version": "4.38.0.dev0", "use_cache": true, "vocab_size": 256000})";

// StarCoder2-3B's shape: GQA with 2 K/V heads, biases, LayerNorm, a 4096-key window
const char* kStarcoder2 = R"({
  "architectures": ["Starcoder2ForCausalLM"], "attention_dropout": 0.1, "bos_token_id": 0,
  "embedding_dropout": 0.1, "eos_token_id": 0, "hidden_act": "gelu_pytorch_tanh",
  "hidden_size": 3072, "initializer_range": 0.018042, "intermediate_size": 12288,
  "layer_norm_epsilon": 1e-05, "max_position_embeddings": 16384, "mlp_type": "default",
  "model_type": "starcoder2", "norm_epsilon": 1e-05, "norm_type": "layer_norm",
  "num_attention_heads": 24, "num_hidden_layers": 30, "num_key_value_heads": 2,
  "residual_dropout": 0.1, "rope_theta": 999999.4420358813, "sliding_window": 4096,
  "torch_dtype": "bfloat16", "transformers_version": "4.37.0.dev0", "use_bias": true,
  "use_cache": true, "vocab_size": 49152})";

// ibm-granite/granite-3.0-2b-base's config.json
const char* kGranite = R"({
  "architectures": ["GraniteForCausalLM"], "attention_bias": false, "attention_dropout": 0.1,
  "attention_multiplier": 0.015625, "bos_token_id": 0, "embedding_multiplier": 12.0,
  "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 8192, "logits_scaling": 8.0, "max_position_embeddings": 4096,
  "mlp_bias": false, "model_type": "granite", "num_attention_heads": 32,
  "num_hidden_layers": 40, "num_key_value_heads": 8, "pad_token_id": 0,
  "residual_multiplier": 0.22, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 10000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.46.0.dev0", "use_cache": true, "vocab_size": 49155})";

// EleutherAI/gpt-neo-125M's config.json
const char* kGptNeo = R"({
  "activation_function": "gelu_new", "architectures": ["GPTNeoForCausalLM"],
  "attention_dropout": 0, "attention_layers": ["global", "local", "global", "local", "global",
  "local", "global", "local", "global", "local", "global", "local"],
  "attention_types": [[["global", "local"], 6]], "bos_token_id": 50256, "embed_dropout": 0,
  "eos_token_id": 50256, "gradient_checkpointing": false, "hidden_size": 768,
  "initializer_range": 0.02, "intermediate_size": null, "layer_norm_epsilon": 1e-05,
  "max_position_embeddings": 2048, "model_type": "gpt_neo", "num_heads": 12, "num_layers": 12,
  "resid_dropout": 0, "summary_activation": null, "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true, "summary_type": "cls_index", "summary_use_proj": true,
  "transformers_version": "4.9.0.dev0", "use_cache": true, "vocab_size": 50257,
  "window_size": 256})";

const char* kBloom = R"({
  "apply_residual_connection_post_layernorm": false, "architectures": ["BloomForCausalLM"],
  "attention_dropout": 0.0, "attention_softmax_in_fp32": true, "bias_dropout_fusion": true,
  "bos_token_id": 1, "eos_token_id": 2, "hidden_dropout": 0.0, "hidden_size": 1024,
  "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "masked_softmax_fusion": true,
  "model_type": "bloom", "n_head": 16, "n_inner": null, "n_layer": 24, "offset_alibi": 100,
  "pad_token_id": 3, "pretraining_tp": 1, "skip_bias_add": true, "skip_bias_add_qkv": false,
  "slow_but_exact": false, "unk_token_id": 0, "use_cache": true, "vocab_size": 250880})";

// `base` with the fields of `patch` set (a null in the patch removes the field).
std::string edited(const char* base, const json& patch) {
  json j = json::parse(base);
  for (const auto& item : patch.items()) {
    if (item.value().is_null()) j.erase(item.key());
    else j[item.key()] = item.value();
  }
  return j.dump();
}

// The refusal's message, or "" when the text is accepted.
std::string import_refusal(const std::string& text) {
  try {
    hf_config_from_json(text, "test/config.json");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

std::string export_refusal(const TransformerConfig& c, const std::string& kept = "") {
  try {
    hf_config_to_json(c, kept);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

json kept_of(const HfModelConfig& h) { return json::parse(h.kept_json); }

}  // namespace

TEST_CASE("hf config: gpt2 is the GPT-2 small of the hub with its 124439808 parameters", "[hf_config]") {
  const HfModelConfig h = hf_config_from_json(kGpt2, "gpt2/config.json");
  const TransformerConfig& c = h.config;
  CHECK(h.model_type == "gpt2");
  CHECK(c.vocab == 50257);
  CHECK(c.context == 1024);
  CHECK(c.d_model == 768);
  CHECK(c.layers == 12);
  CHECK(c.heads == 12);
  CHECK(c.resolved_kv_heads() == 12);
  CHECK(c.resolved_mlp_hidden() == 3072);  // n_inner absent: 4 * n_embd
  CHECK(c.norm == NormKind::layer_norm);
  CHECK(c.norm_eps == 1e-5);
  CHECK(c.positions == PositionKind::learned);
  CHECK(c.mlp == MlpKind::gelu);
  CHECK(c.mlp_bias);
  CHECK(c.attn_qkv_bias);
  CHECK(c.attn_out_bias);
  CHECK(c.tie_embeddings);  // tie_word_embeddings absent: PretrainedConfig's default, true
  CHECK_FALSE(c.attention_scale.has_value());
  CHECK(count_parameters(c).total() == 124439808ULL);
  const json kept = kept_of(h);
  CHECK(kept.at("model_type") == "gpt2");
  for (const char* k : {"bos_token_id", "n_ctx", "summary_type", "attn_pdrop", "task_specific_params",
                        "architectures", "initializer_range"})
    CHECK(kept.contains(k));
  for (const char* k : {"n_embd", "vocab_size", "activation_function", "layer_norm_epsilon"})
    CHECK_FALSE(kept.contains(k));
}

TEST_CASE("hf config: gpt2's optional fields and switches", "[hf_config]") {
  const auto config = [](const json& patch) { return hf_config_from_json(edited(kGpt2, patch), "c").config; };
  CHECK(config({{"n_inner", 100}}).resolved_mlp_hidden() == 100);
  CHECK(config({{"n_inner", nullptr}}).resolved_mlp_hidden() == 3072);
  CHECK_FALSE(config({{"tie_word_embeddings", false}}).tie_embeddings);
  CHECK(config({{"scale_attn_weights", false}}).attention_scale == std::optional<double>(1.0));
  CHECK(config({{"activation_function", "gelu_pytorch_tanh"}}).mlp == MlpKind::gelu);
}

TEST_CASE("hf config: Llama-3-8B and Llama 3.1's llama3 RoPE scaling", "[hf_config]") {
  const HfModelConfig h = hf_config_from_json(kLlama3, "llama3/config.json");
  const TransformerConfig& c = h.config;
  CHECK(h.model_type == "llama");
  CHECK(c.vocab == 128256);
  CHECK(c.context == 8192);
  CHECK(c.d_model == 4096);
  CHECK(c.heads == 32);
  CHECK(c.resolved_kv_heads() == 8);
  CHECK(c.resolved_head_dim() == 128);
  CHECK(c.resolved_mlp_hidden() == 14336);
  CHECK(c.norm == NormKind::rms_norm);
  CHECK(c.norm_eps == 1e-5);
  CHECK(c.mlp == MlpKind::swiglu);
  CHECK(c.positions == PositionKind::rope);
  CHECK(c.rope_style == RopeStyle::half);
  CHECK(c.rope_theta == 500000.0);
  CHECK(c.rope_scaling == RopeScaling::none);
  CHECK_FALSE(c.mlp_bias);
  CHECK_FALSE(c.attn_qkv_bias);
  CHECK_FALSE(c.attn_out_bias);
  CHECK_FALSE(c.tie_embeddings);
  CHECK(c.window == 0);
  CHECK(count_parameters(c).total() == 8030261248ULL);
  CHECK(kept_of(h).at("pretraining_tp") == 1);

  const TransformerConfig s = hf_config_from_json(kLlama31, "llama31/config.json").config;
  CHECK(s.context == 131072);
  CHECK(s.rope_scaling == RopeScaling::llama3);
  CHECK(s.rope_factor == 8.0);
  CHECK(s.rope_low_freq_factor == 1.0);
  CHECK(s.rope_high_freq_factor == 4.0);
  CHECK(s.rope_original_context == 8192);
  CHECK(count_parameters(s).total() == 8030261248ULL);

  const TransformerConfig biased =
      hf_config_from_json(edited(kLlama3, {{"attention_bias", true}, {"mlp_bias", true}}), "c").config;
  CHECK(biased.attn_qkv_bias);
  CHECK(biased.attn_out_bias);
  CHECK(biased.mlp_bias);
  // the class defaults of the fields a file leaves out: llama's, not mistral's
  const TransformerConfig bare = hf_config_from_json(R"({"model_type": "llama"})", "c").config;
  CHECK(bare.vocab == 32000);
  CHECK(bare.context == 2048);
  CHECK(bare.resolved_mlp_hidden() == 11008);
  CHECK(bare.resolved_kv_heads() == 32);
  CHECK(bare.norm_eps == 1e-6);
}

TEST_CASE("hf config: the RoPE scalings linear dynamic and yarn", "[hf_config]") {
  const auto with = [](const json& scaling) {
    return hf_config_from_json(edited(kLlama3, {{"rope_scaling", scaling}}), "c");
  };
  const TransformerConfig linear = with({{"type", "linear"}, {"factor", 2.0}}).config;
  CHECK(linear.rope_scaling == RopeScaling::linear);
  CHECK(linear.rope_factor == 2.0);
  // within max_position_embeddings transformers' dynamic NTK is the unscaled RoPE; the
  // scaling is kept for the way back
  const HfModelConfig dynamic = with({{"rope_type", "dynamic"}, {"factor", 4.0}});
  CHECK(dynamic.config.rope_scaling == RopeScaling::none);
  CHECK(kept_of(dynamic).at("rope_scaling").at("rope_type") == "dynamic");
  const TransformerConfig yarn =
      with({{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 16}, {"beta_slow", 2}}).config;
  CHECK(yarn.rope_scaling == RopeScaling::yarn);
  CHECK(yarn.rope_factor == 4.0);
  CHECK(yarn.rope_beta_fast == 16.0);
  CHECK(yarn.rope_beta_slow == 2.0);
  CHECK(yarn.rope_original_context == 8192);  // 4.49 takes max_position_embeddings
  CHECK(with({{"rope_type", "default"}}).config.rope_scaling == RopeScaling::none);
}

TEST_CASE("hf config: Mistral-7B-v0.1 with its 4096-key window", "[hf_config]") {
  const HfModelConfig h = hf_config_from_json(kMistral, "mistral/config.json");
  const TransformerConfig& c = h.config;
  CHECK(h.model_type == "mistral");
  CHECK(c.window == 4096);  // HF's W keys up to the query's own: tapegrad's window W
  CHECK(c.context == 32768);
  CHECK(c.resolved_kv_heads() == 8);
  CHECK(c.rope_theta == 10000.0);
  CHECK_FALSE(c.attn_qkv_bias);
  CHECK(count_parameters(c).total() == 7241732096ULL);
  CHECK(hf_config_from_json(edited(kMistral, {{"sliding_window", nullptr}}), "c").config.window == 4096);
  json explicit_null = json::parse(kMistral);
  explicit_null["sliding_window"] = nullptr;  // null written out: full causal attention
  CHECK(hf_config_from_json(explicit_null.dump(), "c").config.window == 0);
}

TEST_CASE("hf config: Mixtral-8x7B-v0.1 with its 46702792704 parameters", "[hf_config]") {
  const HfModelConfig h = hf_config_from_json(kMixtral, "mixtral/config.json");
  const TransformerConfig& c = h.config;
  CHECK(h.model_type == "mixtral");
  CHECK(c.experts == 8);
  CHECK(c.experts_top_k == 2);
  CHECK(c.moe_renorm);
  CHECK(c.moe_every == 1);
  CHECK(c.moe_aux_coef == 0.02);
  CHECK(c.moe_z_coef == 0.0);
  CHECK(c.window == 0);
  CHECK(c.rope_theta == 1e6);
  CHECK(count_parameters(c).total() == 46702792704ULL);
  CHECK(count_parameters(c).active() == 12879925248ULL);
  CHECK(kept_of(h).at("output_router_logits") == false);
}

TEST_CASE("hf config: Qwen2-7B with q k v biases and no o bias", "[hf_config]") {
  const HfModelConfig h = hf_config_from_json(kQwen2, "qwen2/config.json");
  const TransformerConfig& c = h.config;
  CHECK(h.model_type == "qwen2");
  CHECK(c.attn_qkv_bias);
  CHECK_FALSE(c.attn_out_bias);
  CHECK_FALSE(c.mlp_bias);
  CHECK(c.window == 0);  // use_sliding_window false, and 131072 keys back is past the context
  CHECK(c.norm_eps == 1e-6);
  CHECK(c.resolved_head_dim() == 128);
  // by hand: 2 x 152064 x 3584 + 28 x (q 3584^2 + 3584, k and v 3584 x 512 + 512 each,
  // o 3584^2, 3 x 3584 x 18944, 2 x 3584) + 3584
  CHECK(count_parameters(c).total() == 7615616512ULL);
  // a window on every layer, in flash-attention's terms too
  const TransformerConfig windowed = hf_config_from_json(
      edited(kQwen2, {{"use_sliding_window", true}, {"max_window_layers", 0}, {"sliding_window", 4096}}), "c").config;
  CHECK(windowed.window == 4096);
}

TEST_CASE("hf config: gemma-2-2b with its 2614341888 parameters", "[hf_config]") {
  const HfModelConfig h = hf_config_from_json(kGemma2, "gemma2/config.json");
  const TransformerConfig& c = h.config;
  CHECK(h.model_type == "gemma2");
  CHECK(c.norm == NormKind::gemma);
  CHECK(c.norm_eps == 1e-6);
  CHECK(c.post_norms);
  CHECK(c.embed_scale);
  CHECK_FALSE(c.embed_norm);
  CHECK(c.mlp == MlpKind::geglu);
  CHECK_FALSE(c.mlp_bias);
  CHECK(c.resolved_head_dim() == 256);  // 8 x 256 = 2048 != hidden_size 2304
  CHECK(c.resolved_kv_heads() == 4);
  CHECK(c.query_scale == 1.0 / 16);
  CHECK(c.attn_softcap == 50);
  CHECK(c.final_softcap == 30);
  CHECK(c.tie_embeddings);
  // the window on layers 0, 2, 4, ... (`not layer_idx % 2`), none on 1, 3, 5, ...
  CHECK(c.window == 4096);
  CHECK(c.layer_window(0) == 4096);
  CHECK(c.layer_window(1) == 0);
  CHECK(c.layer_window(24) == 4096);
  CHECK(c.layer_window(25) == 0);
  // by hand: 256000 x 2304 + 26 x (q 2304 x 2048, k and v 2304 x 1024 each, o 2048 x 2304,
  // 3 x 2304 x 9216, 4 x 2304) + 2304
  CHECK(count_parameters(c).total() == 2614341888ULL);
  const json kept = kept_of(h);
  for (const char* k : {"hidden_act", "cache_implementation", "pad_token_id"}) CHECK(kept.contains(k));
  // left out, the class defaults: head_dim 256, caps 50 and 30, scalar 256; null caps: none
  const TransformerConfig d = hf_config_from_json(
      edited(kGemma2, {{"head_dim", nullptr}, {"attn_logit_softcapping", nullptr},
                       {"final_logit_softcapping", nullptr}, {"query_pre_attn_scalar", nullptr}}), "c").config;
  CHECK(d.resolved_head_dim() == 256);
  CHECK(d.attn_softcap == 50);
  CHECK(d.query_scale == 1.0 / 16);
  json no_caps = json::parse(kGemma2);
  no_caps["attn_logit_softcapping"] = no_caps["final_logit_softcapping"] = nullptr;
  const TransformerConfig n = hf_config_from_json(no_caps.dump(), "c").config;
  CHECK(n.attn_softcap == 0);
  CHECK(n.final_softcap == 0);
  // one layer: windowed, and no global layer to pattern
  CHECK(hf_config_from_json(edited(kGemma2, {{"num_hidden_layers", 1}}), "c").config.window_pattern == 0);
}

TEST_CASE("hf config: gemma-2b with its 2506172416 parameters, once its GELU is the tanh one", "[hf_config]") {
  // 4.49 applies hidden_act: "gelu" is the exact GELU, not tapegrad's tanh form
  CHECK_THAT(import_refusal(kGemma), Catch::Contains("hidden_act 'gelu' is not supported"));
  const HfModelConfig h = hf_config_from_json(
      edited(kGemma, {{"hidden_act", "gelu_pytorch_tanh"}, {"hidden_activation", "gelu_pytorch_tanh"}}),
      "gemma/config.json");
  const TransformerConfig& c = h.config;
  CHECK(h.model_type == "gemma");
  CHECK(c.norm == NormKind::gemma);
  CHECK(c.embed_scale);
  CHECK_FALSE(c.post_norms);
  CHECK(c.mlp == MlpKind::geglu);
  CHECK_FALSE(c.mlp_bias);
  CHECK(c.resolved_kv_heads() == 1);  // MQA
  CHECK(c.resolved_head_dim() == 256);
  CHECK(c.resolved_attention_scale() == 1.0 / 16);
  CHECK(c.window == 0);
  CHECK(c.attn_softcap == 0);
  CHECK(c.tie_embeddings);
  // by hand: 256000 x 2048 + 18 x (q and o 2048 x 2048, k and v 2048 x 256, 3 x 2048 x 16384,
  // 2 x 2048) + 2048
  CHECK(count_parameters(c).total() == 2506172416ULL);
  CHECK(kept_of(h).contains("hidden_activation"));
  // left out, GemmaConfig's defaults: 16 heads and 16 K/V heads, head_dim 256, tied
  const TransformerConfig d = hf_config_from_json(
      edited(kGemma, {{"hidden_act", nullptr}, {"num_attention_heads", nullptr},
                      {"num_key_value_heads", nullptr}, {"head_dim", nullptr}}), "c").config;
  CHECK(d.heads == 16);
  CHECK(d.resolved_kv_heads() == 16);
  CHECK(d.resolved_head_dim() == 256);
  const json out = json::parse(hf_config_to_json(c, h.kept_json));
  CHECK(out.at("model_type") == "gemma");
  CHECK(out.at("hidden_act") == "gelu_pytorch_tanh");
  CHECK(out.at("architectures") == json::array({"GemmaForCausalLM"}));
}

TEST_CASE("hf config: a StarCoder2-3B config with its 3030371328 parameters", "[hf_config]") {
  const HfModelConfig h = hf_config_from_json(kStarcoder2, "starcoder2/config.json");
  const TransformerConfig& c = h.config;
  CHECK(h.model_type == "starcoder2");
  CHECK(c.positions == PositionKind::rope);
  CHECK(c.norm == NormKind::layer_norm);
  CHECK(c.norm_eps == 1e-5);
  CHECK(c.mlp == MlpKind::gelu);
  CHECK(c.resolved_mlp_hidden() == 12288);
  CHECK(c.attn_qkv_bias);
  CHECK(c.attn_out_bias);
  CHECK(c.mlp_bias);
  CHECK(c.resolved_kv_heads() == 2);
  CHECK(c.resolved_head_dim() == 128);
  CHECK(c.window == 4096);
  CHECK(c.context == 16384);
  CHECK(c.rope_theta == 999999.4420358813);
  CHECK(c.tie_embeddings);  // Starcoder2Config leaves it to PretrainedConfig: true
  // by hand: 49152 x 3072 + 30 x (q and o 3072 x 3072 + 3072, k and v 3072 x 256 + 256,
  // c_fc 3072 x 12288 + 12288, c_proj 12288 x 3072 + 3072, 2 x 2 x 3072) + 2 x 3072
  CHECK(count_parameters(c).total() == 3030371328ULL);
  const json kept = kept_of(h);
  for (const char* k : {"norm_type", "mlp_type", "layer_norm_epsilon", "residual_dropout"})
    CHECK(kept.contains(k));
  const TransformerConfig no_bias =
      hf_config_from_json(edited(kStarcoder2, {{"use_bias", false}, {"sliding_window", nullptr}}), "c").config;
  CHECK_FALSE(no_bias.attn_qkv_bias);
  CHECK_FALSE(no_bias.mlp_bias);
  CHECK(no_bias.window == 0);
  CHECK_THAT(import_refusal(edited(kStarcoder2, {{"hidden_act", "gelu"}})),
             Catch::Contains("hidden_act 'gelu' is not supported"));
}

TEST_CASE("hf config: gpt-neo-125M with its 125198592 parameters and unscaled scores", "[hf_config]") {
  const HfModelConfig h = hf_config_from_json(kGptNeo, "gpt_neo/config.json");
  const TransformerConfig& c = h.config;
  CHECK(h.model_type == "gpt_neo");
  CHECK(c.positions == PositionKind::learned);
  CHECK(c.norm == NormKind::layer_norm);
  CHECK(c.mlp == MlpKind::gelu);
  CHECK(c.resolved_mlp_hidden() == 3072);
  CHECK_FALSE(c.attn_qkv_bias);
  CHECK(c.attn_out_bias);
  CHECK(c.mlp_bias);
  CHECK(c.tie_embeddings);
  CHECK(c.context == 2048);
  // GPTNeoSelfAttention: q k^T straight into the softmax
  CHECK(c.resolved_attention_scale() == 1.0);
  // layer 0 global, 1 local (the last 256 keys), 2 global, ...
  for (std::size_t l = 0; l < c.layers; ++l) {
    INFO("layer " << l);
    CHECK(c.layer_plan(l).attention.window == (l % 2 == 0 ? 0 : 256));
  }
  // by hand: 50257 x 768 + 2048 x 768 + 12 x (3 x 768^2, 768^2 + 768, 768 x 3072 + 3072,
  // 3072 x 768 + 768, 2 x 2 x 768) + 2 x 768, as the hub's model card counts
  CHECK(count_parameters(c).total() == 125198592ULL);
  for (const char* k : {"summary_type", "gradient_checkpointing", "embed_dropout"})
    CHECK(kept_of(h).contains(k));
  // attention_types expanded when attention_layers is left out; the saved list when not
  const TransformerConfig local_first = hf_config_from_json(
      edited(kGptNeo, {{"attention_layers", nullptr},
                       {"attention_types", json::parse(R"([[["local", "global"], 6]])")}}), "c").config;
  CHECK(local_first.layer_plan(0).attention.window == 256);
  CHECK(local_first.layer_plan(1).attention.window == 0);
  const TransformerConfig all_global = hf_config_from_json(
      edited(kGptNeo, {{"attention_layers", json(std::vector<std::string>(12, "global"))}}), "c").config;
  CHECK(all_global.window == 0);
  CHECK_THAT(import_refusal(edited(kGptNeo, {{"num_layers", 11}})),
             Catch::Contains("attention_types expands to 12 layers but num_layers is 11"));
  CHECK_THAT(import_refusal(edited(kGptNeo, {{"window_size", 0}})),
             Catch::Contains("window_size must be positive"));
  CHECK_THAT(import_refusal(edited(kGptNeo, {{"attention_layers", nullptr},
                                             {"attention_types", json::parse(
                                                 R"([[["global", "global", "local"], 4]])")}})),
             Catch::Contains("not one global layer in every n"));
  CHECK_THAT(import_refusal(edited(kGptNeo, {{"attention_types", json::parse(R"([[["sparse"], 12]])")}})),
             Catch::Contains("\"global\" or \"local\""));
}

TEST_CASE("hf config: granite-3.0-2b with its 2533531648 parameters and its four multipliers",
          "[hf_config]") {
  const HfModelConfig h = hf_config_from_json(kGranite, "granite/config.json");
  const TransformerConfig& c = h.config;
  CHECK(h.model_type == "granite");
  CHECK(c.positions == PositionKind::rope);
  CHECK(c.norm == NormKind::rms_norm);
  CHECK(c.mlp == MlpKind::swiglu);
  CHECK(c.resolved_kv_heads() == 8);
  CHECK(c.tie_embeddings);
  CHECK(c.embed_multiplier == 12.0);
  CHECK(c.residual_multiplier == 0.22);
  CHECK(c.logit_divisor == 8.0);
  // 1/64 = 1/head_dim in place of 1/sqrt(head_dim) = 1/8
  CHECK(c.resolved_attention_scale() == 0.015625);
  CHECK(c.layer_plan(0).attention.scale == 0.015625);
  // by hand: 49155 x 2048 + 40 x (q and o 2048^2, k and v 2048 x 512, 3 x 2048 x 8192,
  // 2 x 2048) + 2048, the tied head once
  CHECK(count_parameters(c).total() == 2533531648ULL);
  // GraniteConfig's defaults: every multiplier 1, the scores unscaled
  const TransformerConfig bare = hf_config_from_json(
      edited(kGranite, {{"attention_multiplier", nullptr}, {"embedding_multiplier", nullptr},
                        {"residual_multiplier", nullptr}, {"logits_scaling", nullptr}}), "c").config;
  CHECK(bare.resolved_attention_scale() == 1.0);
  CHECK(bare.embed_multiplier == 1.0);
  CHECK(bare.logit_divisor == 1.0);
  CHECK_THAT(import_refusal(edited(kGranite, {{"residual_multiplier", 0}})),
             Catch::Contains("residual_multiplier=0 must be positive"));
}

TEST_CASE("hf config: bloom-560m with its 559214592 parameters", "[hf_config]") {
  const HfModelConfig h = hf_config_from_json(kBloom, "bloom/config.json");
  const TransformerConfig& c = h.config;
  CHECK(h.model_type == "bloom");
  CHECK(c.positions == PositionKind::alibi);
  CHECK(c.embed_norm);
  CHECK(c.norm == NormKind::layer_norm);
  CHECK(c.norm_eps == 1e-5);
  CHECK(c.mlp == MlpKind::gelu);
  CHECK(c.resolved_mlp_hidden() == 4096);
  CHECK(c.attn_qkv_bias);
  CHECK(c.attn_out_bias);
  CHECK(c.mlp_bias);
  CHECK(c.tie_embeddings);
  CHECK(c.layers == 24);
  CHECK(c.heads == 16);
  CHECK(c.context == 2048);  // BLOOM's config.json has none: its training length
  CHECK(hf_config_from_json(edited(kBloom, {{"seq_length", 512}}), "c").config.context == 512);
  // by hand: 250880 x 1024 + 2 x 1024 + 24 x (1024 x 3072 + 3072, 1024^2 + 1024,
  // 1024 x 4096 + 4096, 4096 x 1024 + 1024, 4 x 1024) + 2 x 1024
  CHECK(count_parameters(c).total() == 559214592ULL);
  // PretrainedConfig's attribute_map: num_hidden_layers and num_attention_heads set n_layer and n_head
  const TransformerConfig a = hf_config_from_json(
      edited(kBloom, {{"num_hidden_layers", 3}, {"num_attention_heads", 8}, {"n_embed", 512}}), "c").config;
  CHECK(a.layers == 3);
  CHECK(a.heads == 8);
  CHECK(a.d_model == 512);
  CHECK(kept_of(h).contains("offset_alibi"));
}

TEST_CASE("hf config: each refusal names its field", "[hf_config]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not valid JSON"},
      {"[1]", "not a JSON object"},
      {R"({"n_embd": 8})", "model_type is missing"},
      {R"({"model_type": "t5"})", "model_type 't5' is not supported"},
      // a number no double holds: nlohmann's out_of_range, not its parse_error (fuzz-found)
      {R"({"model_type": "gpt2", "n_embd": 21e308})", "not valid JSON"},
      // 0 means "derive it" in tapegrad's fields, not in transformers' (fuzz-found)
      {R"({"model_type": "starcoder2", "num_key_value_heads": 0})", "num_key_value_heads must be positive"},
      {R"({"model_type": "llama", "intermediate_size": 0})", "intermediate_size must be positive"},
      {R"({"model_type": "gpt2", "n_inner": 0})", "n_inner must be positive"},
      {edited(kGemma2, {{"hidden_activation", "gelu"}}), "hidden_activation 'gelu'"},
      {[] {
         json j = json::parse(kGemma2);
         j["sliding_window"] = nullptr;
         return j.dump();
       }(),
       "sliding_window is null"},
      {edited(kGemma2, {{"final_logit_softcapping", 0}}), "final_logit_softcapping=0 must be positive"},
      {edited(kGemma2, {{"query_pre_attn_scalar", 0}}), "query_pre_attn_scalar=0"},
      {edited(kGemma2, {{"mlp_bias", true}}), "field 'mlp_bias' is not one tapegrad knows for model_type gemma2"},
      {edited(kBloom, {{"apply_residual_connection_post_layernorm", true}}),
       "apply_residual_connection_post_layernorm=true"},
      {edited(kBloom, {{"max_position_embeddings", 2048}}),
       "field 'max_position_embeddings' is not one tapegrad knows for model_type bloom"},
      {edited(kLlama3, {{"rope_scaling", {{"rope_type", "longrope"}, {"factor", 2.0}}}}),
       "rope_scaling type 'longrope' is not supported"},
      {edited(kLlama3, {{"rope_scaling", {{"type", "linear"}, {"rope_type", "yarn"}, {"factor", 2.0}}}}),
       "rope_scaling has type 'linear' and rope_type 'yarn'"},
      {edited(kLlama3, {{"rope_scaling", {{"rope_type", "linear"}}}}), "rope_scaling.factor is missing"},
      {edited(kLlama3, {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 2.0}, {"mscale", 1.0}}}}),
       "rope_scaling.mscale"},
      {edited(kLlama3, {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 2.0},
                                          {"original_max_position_embeddings", 4096}}}}),
       "rope_scaling.original_max_position_embeddings=4096 differs"},
      {edited(kLlama3, {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 2.0}, {"attention_factor", 1.5}}}}),
       "rope_scaling.attention_factor=1.5"},
      {edited(kLlama3, {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 0.5}}}}), "rope_scaling.factor=0.5"},
      {edited(kMistral, {{"rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2.0}}}}),
       "rope_scaling type 'dynamic' with sliding_window=4096"},
      {edited(kLlama3, {{"partial_rotary_factor", 0.5}}), "partial_rotary_factor=0.5"},
      {edited(kGpt2, {{"activation_function", "relu"}}), "activation_function 'relu'"},
      {edited(kLlama3, {{"hidden_act", "gelu"}}), "hidden_act 'gelu'"},
      {edited(kGpt2, {{"scale_attn_by_inverse_layer_idx", true}}), "scale_attn_by_inverse_layer_idx"},
      {edited(kLlama3, {{"sliding_window", 4096}}), "field 'sliding_window' is not one tapegrad knows for model_type llama"},
      {edited(kMistral, {{"attention_bias", true}}), "field 'attention_bias' is not one tapegrad knows for model_type mistral"},
      {edited(kLlama3, {{"my_new_field", 1}}), "field 'my_new_field'"},
      {edited(kMistral, {{"sliding_window", 0}}), "sliding_window=0"},
      {edited(kQwen2, {{"use_sliding_window", true}, {"sliding_window", 4096}}),
       "use_sliding_window=true with max_window_layers=28"},
      {edited(kQwen2, {{"sliding_window", 4096}}), "sliding_window=4096 with use_sliding_window=false"},
      {edited(kLlama3, {{"pruned_heads", {{"0", {1}}}}}), "pruned_heads"},
      {edited(kLlama3, {{"quantization_config", {{"quant_method", "gptq"}}}}), "quantization_config"},
      {edited(kLlama3, {{"is_encoder_decoder", true}}), "is_encoder_decoder=true"},
      {edited(kGpt2, {{"n_embd", "768"}}), "n_embd must be a non-negative integer, got \"768\""},
      {edited(kGpt2, {{"n_head", -1}}), "n_head must be a non-negative integer, got -1"},
      {edited(kGpt2, {{"layer_norm_epsilon", "small"}}), "layer_norm_epsilon must be a number"},
      {edited(kGpt2, {{"tie_word_embeddings", 1}}), "tie_word_embeddings must be true or false"},
      {edited(kLlama3, {{"num_key_value_heads", 3}}),
       "cannot be built: config: heads=32 is not divisible by kv_heads=3"},
      {edited(kLlama3, {{"head_dim", 0}}), "head_dim must be positive"},
      {edited(kMixtral, {{"num_experts_per_tok", 9}}), "experts_top_k=9"},
      {edited(kMixtral, {{"num_local_experts", 0}}), "num_local_experts must be positive"},
  };
  for (const auto& [text, wanted] : cases) {
    INFO(text);
    const std::string refusal = import_refusal(text);
    CHECK_THAT(refusal, Catch::Contains(wanted) && Catch::Contains("hf config test/config.json"));
  }
}

TEST_CASE("hf config: every public configuration reads back the same after an export", "[hf_config]") {
  const std::string gemma = edited(kGemma, {{"hidden_act", "gelu_pytorch_tanh"}});
  for (const char* text : {kGpt2, kLlama3, kLlama31, kMistral, kMixtral, kQwen2, kGemma2, kBloom,
                           gemma.c_str(), kStarcoder2, kGptNeo, kGranite}) {
    const HfModelConfig first = hf_config_from_json(text, "first");
    INFO(first.model_type);
    const std::string written = hf_config_to_json(first.config, first.kept_json);
    const HfModelConfig again = hf_config_from_json(written, "again");
    CHECK(again.model_type == first.model_type);
    CHECK(again.config == first.config);
    CHECK(kept_of(again) == kept_of(first));
    // every field of the original file is in the export, with the value transformers reads
    const json original = json::parse(text), out = json::parse(written);
    for (const auto& item : original.items()) {
      INFO(item.key());
      REQUIRE(out.contains(item.key()));
      // Qwen2-7B's 131072-key window reaches past no key of its context: null says the same
      if (first.model_type == "qwen2" && item.key() == "sliding_window") {
        CHECK(out[item.key()].is_null());
        continue;
      }
      if (item.value().is_number()) CHECK(out[item.key()].get<double>() == item.value().get<double>());
      else CHECK(out[item.key()] == item.value());
    }
  }
}

TEST_CASE("hf config: an export picks the model_type the architecture is", "[hf_config]") {
  const auto type_of = [](const TransformerConfig& c) {
    return json::parse(hf_config_to_json(c)).at("model_type").get<std::string>();
  };
  TransformerConfig g = gpt2_preset();
  g.vocab = 11;
  g.context = 8;
  g.d_model = 16;
  g.heads = 2;
  CHECK(type_of(g) == "gpt2");  // the preset has no attention biases: zeros are written
  const json gj = json::parse(hf_config_to_json(g));
  CHECK(gj.at("n_inner") == 64);
  CHECK(gj.at("tie_word_embeddings") == false);
  CHECK(gj.at("architectures") == json::array({"GPT2LMHeadModel"}));
  TransformerConfig unscaled = g;
  unscaled.attention_scale = 1.0;
  CHECK(json::parse(hf_config_to_json(unscaled)).at("scale_attn_weights") == false);
  // a window over unscaled scores is GPT-Neo's: global layers where window_pattern says
  TransformerConfig neo = unscaled;
  neo.layers = 3;
  neo.window = 4;
  CHECK(type_of(neo) == "gpt_neo");
  const json nj = json::parse(hf_config_to_json(neo));
  CHECK(nj.at("window_size") == 4);
  CHECK(nj.at("attention_types") == json::parse(R"([[["local"], 3]])"));
  neo.window_pattern = 2;
  neo.window_global_first = true;
  CHECK(json::parse(hf_config_to_json(neo)).at("attention_layers") ==
        json::parse(R"(["global", "local", "global"])"));
  CHECK(json::parse(hf_config_to_json(neo)).at("attention_types") ==
        json::parse(R"([[["global", "local"], 1], [["global"], 1]])"));
  neo.window_global_first = false;
  CHECK(json::parse(hf_config_to_json(neo)).at("attention_layers") ==
        json::parse(R"(["local", "global", "local"])"));

  TransformerConfig l = llama_preset();
  l.vocab = 11;
  l.context = 8;
  l.d_model = 16;
  l.heads = 4;
  l.kv_heads = 2;
  CHECK(type_of(l) == "llama");
  TransformerConfig w = l;
  w.window = 3;
  CHECK(type_of(w) == "mistral");
  CHECK(json::parse(hf_config_to_json(w)).at("sliding_window") == 3);
  TransformerConfig q = l;
  q.attn_qkv_bias = true;
  CHECK(type_of(q) == "qwen2");
  TransformerConfig qw = q;
  qw.window = 3;
  const json qj = json::parse(hf_config_to_json(qw));
  CHECK(qj.at("model_type") == "qwen2");
  CHECK(qj.at("use_sliding_window") == true);
  CHECK(qj.at("max_window_layers") == 0);
  CHECK(hf_config_from_json(qj.dump(), "c").config.window == 3);
  TransformerConfig o = l;
  o.attn_out_bias = true;  // llama's attention_bias covers q, k, v and o: zeros for q, k, v
  CHECK(type_of(o) == "llama");
  CHECK(json::parse(hf_config_to_json(o)).at("attention_bias") == true);
  TransformerConfig m = l;
  m.experts = 4;
  CHECK(type_of(m) == "mixtral");
  // a scale other than 1/sqrt(head_dim), or a multiplier, is Granite's
  TransformerConfig unscaled_llama = l;
  unscaled_llama.attention_scale = 1.0;
  CHECK(type_of(unscaled_llama) == "granite");
  CHECK(json::parse(hf_config_to_json(unscaled_llama)).at("attention_multiplier") == 1.0);
  TransformerConfig damped = l;
  damped.residual_multiplier = 0.25;
  CHECK(type_of(damped) == "granite");
  CHECK(json::parse(hf_config_to_json(damped)).at("attention_multiplier") == 0.5);  // 1/sqrt(4)
  CHECK(json::parse(hf_config_to_json(damped)).at("residual_multiplier") == 0.25);
  // the kept model_type when it still expresses the model: a Mistral without its window
  const HfModelConfig mistral = hf_config_from_json(
      edited(kMistral, {{"hidden_size", 16}, {"intermediate_size", 32}, {"num_attention_heads", 4},
                        {"num_key_value_heads", 2}, {"num_hidden_layers", 1}, {"vocab_size", 11}}), "c");
  TransformerConfig full = mistral.config;
  full.window = 0;
  const json mj = json::parse(hf_config_to_json(full, mistral.kept_json));
  CHECK(mj.at("model_type") == "mistral");
  CHECK(mj.at("sliding_window").is_null());
  CHECK(mj.at("bos_token_id") == 1);
  // gpt2's own kept fields do not follow a model that is no longer a gpt2
  const HfModelConfig gpt2 = hf_config_from_json(kGpt2, "c");
  const json lj = json::parse(hf_config_to_json(l, gpt2.kept_json));
  CHECK(lj.at("model_type") == "llama");
  CHECK_FALSE(lj.contains("summary_type"));
  CHECK(lj.at("architectures") == json::array({"LlamaForCausalLM"}));
  CHECK(lj.at("bos_token_id") == 50256);

  TransformerConfig gm = gemma2_preset();
  gm.vocab = 11;
  gm.context = 8;
  gm.d_model = 16;
  gm.heads = 4;
  gm.layers = 3;
  gm.window = 3;
  CHECK(type_of(gm) == "gemma2");
  const json gmj = json::parse(hf_config_to_json(gm));
  CHECK(gmj.at("sliding_window") == 3);
  CHECK(gmj.at("query_pre_attn_scalar") == 4);  // head_dim: the scale is 1/sqrt(head_dim)
  CHECK(gmj.at("attn_logit_softcapping") == 50.0);
  CHECK(gmj.at("hidden_activation") == "gelu_pytorch_tanh");
  CHECK_FALSE(gmj.contains("hidden_act"));
  TransformerConfig unwindowed = gm;
  unwindowed.window = 0;  // a window as long as the context hides no key
  unwindowed.attn_softcap = 0;
  unwindowed.query_scale = 0.3;
  const json uj = json::parse(hf_config_to_json(unwindowed));
  CHECK(uj.at("sliding_window") == 8);
  CHECK(uj.at("attn_logit_softcapping").is_null());
  CHECK(std::pow(uj.at("query_pre_attn_scalar").get<double>(), -0.5) == 0.3);
  TransformerConfig b = bloom_preset();
  b.vocab = 11;
  b.context = 8;
  b.d_model = 16;
  b.heads = 4;
  CHECK(type_of(b) == "bloom");
  const json bj = json::parse(hf_config_to_json(b));
  CHECK(bj.at("n_head") == 4);
  CHECK(bj.at("architectures") == json::array({"BloomForCausalLM"}));
}

TEST_CASE("hf config: an export refuses by name what no model_type expresses", "[hf_config]") {
  TransformerConfig l = llama_preset();
  l.vocab = 11;
  l.context = 8;
  l.d_model = 16;
  l.heads = 4;
  TransformerConfig g = gpt2_preset();
  g.vocab = 11;
  g.context = 8;
  g.d_model = 16;
  g.heads = 4;
  TransformerConfig gm = gemma2_preset(), b = bloom_preset();
  for (TransformerConfig* c : {&gm, &b}) {
    c->vocab = 11;
    c->context = 8;
    c->d_model = 16;
    c->heads = 4;
    c->layers = 3;
  }
  auto edit = [](TransformerConfig c, auto change) {
    change(c);
    return c;
  };
  const std::vector<std::pair<TransformerConfig, std::string>> cases = {
      {edit(l, [](auto& c) { c.qk_norm = true; }), "qk_norm=true"},
      {edit(l, [](auto& c) { c.learned_temperature = true; }), "learned_temperature=true"},
      // a part only one model_type has, in a model that lacks another of that type's parts:
      // the model's own field is named first, then what the type would also need
      {edit(l, [](auto& c) { c.attn_softcap = 50; }),
       "attn_softcap=50: of the supported model_types only gemma2 has it, and gemma2 also has "
       "embeddings scaled by sqrt(hidden_size), which this model has not (embed_scale=false)"},
      {edit(l, [](auto& c) { c.final_softcap = 30; }), "final_softcap=30: of"},
      // gpt_neo's windows differ by layer too, over learned positions: with RoPE, gemma2 claims it
      {edit(l, [](auto& c) { c.window = 3; c.window_pattern = 2; c.layers = 3; }),
       "embed_scale=false: gemma2 has embeddings scaled by sqrt(hidden_size)"},
      {edit(g, [](auto& c) { c.final_softcap = 30; }), "final_softcap=30: gpt2 has no soft-caps (gemma2 has)"},
      {edit(l, [](auto& c) { c.positions = PositionKind::alibi; }),
       "positions=alibi: of the supported model_types only bloom has it, and bloom also has "
       "word_embeddings_layernorm, which this model has not (embed_norm=false)"},
      {edit(g, [](auto& c) { c.positions = PositionKind::alibi; }), "positions=alibi: of"},
      {edit(l, [](auto& c) { c.embed_norm = true; }), "embed_norm=true: llama has no word_embeddings_layernorm (bloom has)"},
      // GeGLU is gemma's too: the windows that differ by layer make it gemma2
      {edit(l, [](auto& c) { c.window = 3; c.window_pattern = 2; c.layers = 3; c.mlp = MlpKind::geglu; }),
       "embed_scale=false: gemma2 has embeddings scaled"},
      {edit(l, [](auto& c) { c.mlp = MlpKind::geglu; }),
       "embed_scale=false: gemma has embeddings scaled by sqrt(hidden_size)"},
      {edit(l, [](auto& c) { c.norm = NormKind::gemma; c.embed_scale = true; c.mlp = MlpKind::geglu; c.window = 3; }),
       "window=3: gemma has no sliding window (gpt_neo, gemma2, starcoder2, mixtral, qwen2 and mistral have)"},
      {edit(gm, [](auto& c) { c.window = 3; c.window_pattern = 3; }),
       "window_pattern=3: gemma2 windows layers 0, 2, 4"},
      {edit(gm, [](auto& c) { c.post_norms = false; }),
       "only gemma2 has it, and gemma2 also has post-attention and post-feed-forward norms, "
       "which this model has not (post_norms=false)"},
      {edit(gm, [](auto& c) { c.mlp_bias = true; }),
       "mlp_bias=true: gemma2's feed-forward has no biases"},
      {edit(b, [](auto& c) { c.mlp_hidden = 32; }),
       "mlp_hidden=32: bloom's feed-forward is 4 x hidden_size wide"},
      {edit(b, [](auto& c) { c.kv_heads = 2; }),
       "kv_heads=2: bloom has one K/V head"},
      {edit(b, [](auto& c) { c.query_scale = 0.3; }),
       "query_scale=0.3: bloom scales by 1/sqrt(head_dim)"},
      {edit(g, [](auto& c) { c.residual_multiplier = 0.5; }),
       "residual_multiplier=0.5: gpt2 has no embedding, residual or logit multipliers (granite has)"},
      // the multiplier makes it granite, whose layers see every earlier key
      {edit(l, [](auto& c) { c.window = 3; c.logit_divisor = 2; }),
       "window=3: granite has no sliding window (gpt_neo, gemma2, starcoder2, mixtral, qwen2 and "
       "mistral have)"},
      {edit(g, [](auto& c) { c.positions = PositionKind::none; }), "positions=none"},
      {edit(l, [](auto& c) { c.mlp = MlpKind::none; }), "mlp=none"},
      {edit(l, [](auto& c) { c.rope_scaling = RopeScaling::ntk; c.rope_factor = 2; }), "rope_scaling=ntk"},
      {edit(l, [](auto& c) { c.rope_scaling = RopeScaling::yarn; c.rope_factor = 2; c.rope_original_context = 4; }),
       "rope_original_context=4"},
      // LayerNorm with RoPE is starcoder2's, whose feed-forward is GELU
      {edit(l, [](auto& c) { c.norm = NormKind::layer_norm; }), "mlp=swiglu: starcoder2's feed-forward is GELU"},
      {edit(l, [](auto& c) { c.mlp = MlpKind::gelu; }), "mlp=gelu: llama's feed-forward is SwiGLU"},
      {edit(g, [](auto& c) { c.norm = NormKind::rms_norm; }), "norm=rms: gpt2 has LayerNorm"},
      {edit(g, [](auto& c) { c.mlp = MlpKind::swiglu; }), "mlp=swiglu: gpt2's feed-forward is GELU"},
      {edit(g, [](auto& c) { c.window = 3; }), "window=3: gpt2 has no sliding window"},
      {edit(g, [](auto& c) { c.kv_heads = 2; }), "kv_heads=2: gpt2 has one K/V head per query head"},
      {edit(g, [](auto& c) { c.head_dim = 8; }), "head_dim=8: gpt2's heads are d_model/heads wide"},
      {edit(g, [](auto& c) { c.experts = 2; }), "experts=2: gpt2 has no mixture of experts"},
      {edit(g, [](auto& c) { c.attention_scale = 0.25; }), "attention_scale=0.25: gpt2 scales by 1/sqrt(head_dim) or"},
      {edit(l, [](auto& c) { c.experts = 4; c.moe_every = 2; c.layers = 2; }), "moe_every=2"},
      {edit(l, [](auto& c) { c.experts = 4; c.moe_renorm = false; }), "moe_renorm=false"},
      {edit(l, [](auto& c) { c.experts = 4; c.mlp_bias = true; }), "mlp_bias=true: mixtral has no biases"},
      {edit(l, [](auto& c) { c.window = 3; c.mlp_bias = true; }), "mlp_bias=true: mistral has no biases"},
      {edit(l, [](auto& c) { c.window = 3; c.attn_out_bias = true; }), "attn_out_bias=true: mistral has no biases"},
  };
  for (const auto& [config, wanted] : cases) {
    INFO(wanted);
    CHECK_THAT(export_refusal(config), Catch::Contains(wanted) && Catch::Contains("hf_config_to_json"));
  }
  CHECK_THAT(export_refusal(l, R"({"model_type": "llama", "my_field": 1})"),
             Catch::Contains("kept field 'my_field'"));
  CHECK_THAT(export_refusal(l, "{"), Catch::Contains("kept_json is not valid JSON"));
}

TEST_CASE("hf config: an imported dynamic scaling is written back", "[hf_config]") {
  const HfModelConfig h = hf_config_from_json(
      edited(kLlama3, {{"rope_scaling", {{"rope_type", "dynamic"}, {"factor", 4.0}}}}), "c");
  const json out = json::parse(hf_config_to_json(h.config, h.kept_json));
  CHECK(out.at("rope_scaling") == json({{"rope_type", "dynamic"}, {"factor", 4.0}}));
  CHECK(hf_config_from_json(out.dump(), "again").config == h.config);
}

// A field added to nn/config.hpp that the export neither writes nor refuses would be lost
// without a word: each architecture field, changed where it applies (its condition holds and
// the model is valid), must change the config.json written or be refused.
TEST_CASE("hf config: every architecture field changes the export or is refused", "[hf_config]") {
  // rope_style lives in the weights' order (nn/io/hf_weights.hpp); moe_capacity limits
  // training forwards only, and transformers trains dropless
  const std::set<std::string> not_in_config_json = {"rope_style", "moe_capacity"};
  TransformerConfig g = gpt2_preset();
  g.vocab = 11;
  g.context = 16;
  g.d_model = 16;
  g.heads = 4;
  g.layers = 2;
  TransformerConfig l = g;
  for (const auto& f : {"positions=rope", "norm=rms", "mlp=swiglu", "mlp_bias=false", "kv_heads=2"}) {
    const std::string s(f);
    set_field_from_string(l, s.substr(0, s.find('=')), s.substr(s.find('=') + 1));
  }
  TransformerConfig m = l;
  m.experts = 4;
  TransformerConfig lin = l, l3 = l, yarn = l;
  lin.rope_scaling = RopeScaling::linear;
  lin.rope_factor = 2;
  l3.rope_scaling = RopeScaling::llama3;
  l3.rope_factor = 2;
  l3.rope_original_context = 8;
  yarn.rope_scaling = RopeScaling::yarn;
  yarn.rope_factor = 2;
  yarn.rope_original_context = 16;
  TransformerConfig gm = gemma2_preset(), b = bloom_preset();
  for (TransformerConfig* c : {&gm, &b}) {
    c->vocab = 11;
    c->context = 16;
    c->d_model = 16;
    c->heads = 4;
    c->layers = 3;
  }
  gm.window = 5;
  std::size_t changed = 0;
  for (const TransformerConfig& base : {g, l, m, lin, l3, yarn, gm, b}) {
    const std::string written = hf_config_to_json(base);
    for (const FieldInfo& f : config_fields()) {
      if (f.role != FieldRole::architecture || not_in_config_json.count(f.name)) continue;
      // gpt2's files hold every bias, zeros where the model has none
      const std::string name = f.name;
      if (base.positions != PositionKind::rope && name.find("bias") != std::string::npos) continue;
      const auto given = [&](const std::string& name) { return name == f.name; };
      const auto same = [](const std::string& name) { return name; };
      if (inapplicable_given_field(base, given, same)) continue;
      std::vector<std::string> values = f.choices;
      if (f.kind == FieldInfo::Kind::flag) values = {"true", "false"};
      if (f.kind == FieldInfo::Kind::size) values = {"1", "2", "3", "5", "40"};
      if (f.kind == FieldInfo::Kind::real) values = {"0.3", "3"};
      if (f.kind == FieldInfo::Kind::optional_real) values = {"0.3"};
      for (const std::string& v : values) {
        TransformerConfig c = base;
        try {
          set_field_from_string(c, f.name, v);
          c.validate();
        } catch (const ShapeError&) {
          continue;
        }
        // another rounding of the same width is the same model
        if (c == base || ((name == "mlp_ratio" || name == "mlp_multiple") &&
                          c.resolved_mlp_hidden() == base.resolved_mlp_hidden()))
          continue;
        INFO(f.name << "=" << v << " on " << config_summary(base));
        std::string out;
        try {
          out = hf_config_to_json(c);
        } catch (const CheckpointError&) {
          continue;
        }
        CHECK(out != written);
        ++changed;
      }
    }
  }
  CHECK(changed > 50);
}
