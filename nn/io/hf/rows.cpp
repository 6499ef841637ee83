#include "nn/io/hf/rows.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace tapegrad::hf {

ConfigKey size_key(std::string key, std::size_t Config::*field, std::size_t absent) {
  return {key, [=](ConfigReader& r, Config& c) { c.*field = r.size(key, absent); },
          [=](const Config& c, const json&) { return json(c.*field); }};
}

ConfigKey real_key(std::string key, double Config::*field, double absent) {
  return {key, [=](ConfigReader& r, Config& c) { c.*field = r.real(key, absent); },
          [=](const Config& c, const json&) { return json(c.*field); }};
}

ConfigKey flag_key(std::string key, bool Config::*field, bool absent) {
  return {key, [=](ConfigReader& r, Config& c) { c.*field = r.flag(key, absent); },
          [=](const Config& c, const json&) { return json(c.*field); }};
}

ConfigKey resolved_size_key(std::string key, std::size_t Config::*field, std::size_t absent,
                            std::size_t (Config::*resolved)() const) {
  return {key,
          [=](ConfigReader& r, Config& c) {
            c.*field = r.size(key, absent);
            if (c.*field == 0) r.refuse("{} must be positive", key);  // 0 is tapegrad's "derive it"
          },
          [=](const Config& c, const json&) { return json((c.*resolved)()); }};
}

ConfigKey choice_key(std::string key, std::vector<std::string> accepted, std::string absent,
                     std::string why) {
  return {key,
          [=](ConfigReader& r, Config&) {
            const std::string value = r.text(key, absent);
            if (std::find(accepted.begin(), accepted.end(), value) == accepted.end())
              r.refuse("{} '{}' is not supported ({})", key, value, why);
          },
          [=](const Config&, const json&) { return json(accepted.front()); }};
}

ConfigKey constant_flag_key(std::string key, bool value, std::string why) {
  return {key,
          [=](ConfigReader& r, Config&) {
            if (r.flag(key, value) != value) r.refuse("{}={} is not supported ({})", key, !value, why);
          },
          [=](const Config&, const json&) { return json(value); }};
}

ConfigKey always(std::function<void(Config&)> set) {
  return {"", [=](ConfigReader&, Config& c) { set(c); }, nullptr};
}

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

Requirement need(std::string field, std::function<bool(const Config&)> holds, std::string says) {
  Requirement r;
  r.field = [field](const Config&) { return field; };
  r.holds = std::move(holds);
  r.says = std::move(says);
  return r;
}

Requirement need(std::function<std::string(const Config&)> field,
                 std::function<bool(const Config&)> holds, std::string says) {
  Requirement r;
  r.field = std::move(field);
  r.holds = std::move(holds);
  r.says = std::move(says);
  return r;
}

Requirement need_with_hint(std::string field, std::function<bool(const Config&)> holds,
                           std::string says) {
  Requirement r = need(std::move(field), std::move(holds), std::move(says));
  r.hint = true;
  return r;
}

Requirement may_have(std::function<std::string(const Config&)> field) {
  return need(std::move(field), [](const Config&) { return true; }, "");
}

namespace {

std::string soft_cap_field(const Config& c) {
  return c.attn_softcap > 0 ? "attn_softcap" : "final_softcap";
}

// The first of Granite's multipliers the model moves from 1.
std::string multiplier_field(const Config& c) {
  if (c.residual_multiplier != 1.0) return "residual_multiplier";
  return c.logit_divisor != 1.0 ? "logit_divisor" : "embed_multiplier";
}

// A part the type has exactly when `has` (`holds` says whether the model has it).
Requirement part(const char* field, bool has, std::function<bool(const Config&)> in_model,
                 const char* what) {
  Requirement r = need(field, [=](const Config& c) { return in_model(c) == has; },
                       std::string(has ? "has " : "has no ") + what);
  r.part = what;
  r.type_has_part = has;
  r.hint = !has;
  return r;
}

}  // namespace

std::vector<Requirement> parts(const Parts& has) {
  std::vector<Requirement> out = {
      part("embed_norm", has.embed_norm, [](const Config& c) { return c.embed_norm; },
           "word_embeddings_layernorm"),
      part("embed_scale", has.embed_scale, [](const Config& c) { return c.embed_scale; },
           "embeddings scaled by sqrt(hidden_size)"),
      part("post_norms", has.post_norms, [](const Config& c) { return c.post_norms; },
           "post-attention and post-feed-forward norms")};
  if (has.soft_caps) {
    out.push_back(may_have(soft_cap_field));
  } else {
    Requirement caps = need(soft_cap_field, [](const Config& c) {
      return c.attn_softcap == 0 && c.final_softcap == 0;
    }, "has no soft-caps");
    caps.hint = true;
    out.push_back(caps);
  }
  if (has.multipliers) {
    out.push_back(may_have(multiplier_field));
  } else {
    Requirement none = need(multiplier_field, [](const Config& c) {
      return c.embed_multiplier == 1.0 && c.residual_multiplier == 1.0 && c.logit_divisor == 1.0;
    }, "has no embedding, residual or logit multipliers");
    none.hint = true;
    out.push_back(none);
  }
  if (has.per_layer_windows)
    out.push_back(may_have([](const Config&) { return "window_pattern"; }));
  else
    out.push_back(need("window_pattern", [](const Config& c) { return c.uniform_window(); },
                       "has the same window on every layer"));
  return out;
}

bool default_scale(const Config& c) {
  return c.resolved_attention_scale() == default_attention_scale(c.resolved_head_dim());
}

std::string scale_field(const Config& c) {
  return c.attention_scale ? "attention_scale" : "query_scale";
}

}  // namespace tapegrad::hf
