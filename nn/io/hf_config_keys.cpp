#include "nn/io/hf_config_keys.hpp"

#include <algorithm>
#include <set>

namespace tapegrad::hf {

bool is_model_type(const std::string& type) {
  const auto& types = model_types();
  return std::find(types.begin(), types.end(), type) != types.end();
}

std::string causal_lm_class(const std::string& type) {
  if (type == "gpt2") return "GPT2LMHeadModel";
  if (type == "llama") return "LlamaForCausalLM";
  if (type == "mistral") return "MistralForCausalLM";
  if (type == "mixtral") return "MixtralForCausalLM";
  if (type == "gemma2") return "Gemma2ForCausalLM";
  if (type == "bloom") return "BloomForCausalLM";
  return "Qwen2ForCausalLM";
}

bool is_llama_family(const std::string& type) { return type != "gpt2" && type != "bloom"; }

bool is_harmless_common_key(const std::string& key) {
  static const std::set<std::string> keys = {
      "architectures", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id",
      "decoder_start_token_id", "torch_dtype", "transformers_version", "_name_or_path",
      "_commit_hash", "_attn_implementation_autoset", "use_cache", "initializer_range",
      "return_dict", "output_hidden_states", "output_attentions", "torchscript",
      "use_bfloat16", "tf_legacy_loss", "chunk_size_feed_forward", "is_decoder",
      "tie_encoder_decoder", "id2label", "label2id", "num_labels", "problem_type",
      "finetuning_task", "tokenizer_class", "prefix", "task_specific_params",
      // generation defaults of configurations written before generation_config.json
      "max_length", "min_length", "do_sample", "early_stopping", "num_beams",
      "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p",
      "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
      "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
      "output_scores", "return_dict_in_generate", "forced_bos_token_id",
      "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
      "suppress_tokens", "begin_suppress_tokens"};
  return keys.count(key) > 0;
}

bool is_harmless_key_of(const std::string& type, const std::string& key) {
  if (type == "gpt2") {
    // reorder_and_upcast_attn computes the same scores in float32 in another order
    static const std::set<std::string> keys = {
        "attn_pdrop", "embd_pdrop", "resid_pdrop", "summary_type", "summary_use_proj",
        "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "n_ctx",
        "reorder_and_upcast_attn"};
    return keys.count(key) > 0;
  }
  if (type == "bloom") {
    // the Megatron switches bigscience's files carry; 4.49 reads none of them.
    // slow_but_exact with pretraining_tp > 1 sums dense's slices: the same products, another
    // rounding order
    static const std::set<std::string> keys = {
        "attention_dropout", "hidden_dropout", "pretraining_tp", "slow_but_exact",
        "attention_softmax_in_fp32", "bias_dropout_fusion", "masked_softmax_fusion",
        "offset_alibi", "skip_bias_add", "skip_bias_add_qkv", "unk_token_id", "n_inner"};
    return keys.count(key) > 0;
  }
  if (key == "attention_dropout") return true;
  if (type == "llama") return key == "pretraining_tp";
  // hidden_act is the old name 4.49's Gemma 2 leaves unread (it reads hidden_activation);
  // sliding_window_size the same for sliding_window
  if (type == "gemma2")
    return key == "hidden_act" || key == "cache_implementation" || key == "sliding_window_size";
  if (type == "mixtral") return key == "output_router_logits" || key == "router_jitter_noise";
  return false;
}

}  // namespace tapegrad::hf
