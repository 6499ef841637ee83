#pragma once
// The model a program is pointed at: a tapegrad checkpoint (.npz) or a Hugging Face model
// folder (config.json, model.safetensors or its shards, optionally tokenizer.json). Every
// program that takes a model reads it through here, so each one takes both.
#include <optional>
#include <string>
#include <vector>

#include "nn/config.hpp"
#include "nn/io/npz.hpp"
#include "nn/transformer.hpp"
#include "tasks/text_coder.hpp"

namespace tapegrad::apps {

struct LoadedModel {
  Transformer<float> model;
  // The checkpoint's training task ("text", "sort", ...); "text" for a folder with a
  // tokenizer.json; empty: plain token ids.
  std::string task;
  std::optional<tasks::TextCoder> coder;  // a text model's characters or BPE tokenizer
  std::string model_type;                 // a folder's config.json model_type; empty for .npz
  std::string kept_json;                  // a folder's config.json fields kept for export
};

// The configuration alone (no weights read), for memory estimates before loading.
TransformerConfig read_model_config(const std::string& path);
// The model and what the file records beside it, its weights as they are (the caller checks
// them: require_finite_parameters). Throws the format's own error (naming the file and the
// entry or tensor) for anything that does not load, CheckpointError for a folder without
// config.json (the caller names the path).
LoadedModel load_model(const std::string& path);
// The folder's tokenizer.json as a text coder, if it has one.
std::optional<tasks::TextCoder> folder_text_coder(const std::string& dir);

// What a checkpoint stores beside the weights: the config, the task's name and a text
// model's characters or tokenizer.
std::vector<NpzEntry> checkpoint_extras(const TransformerConfig& config, const std::string& task,
                                        const tasks::TextCoder* coder);
// Why `config` has no Hugging Face form, with the way out; empty when it has one. QK-norm,
// which no model_type has, is named with --no-qk-norm: the trainer's --arch llama recipe
// for --task sort and reverse turns it on without being asked.
std::string hf_export_refusal(const TransformerConfig& config, const std::string& kept_json);

// `path` ending in .npz: a checkpoint; anything else: a Hugging Face folder (config.json,
// generation_config.json, model.safetensors and, for a BPE model, tokenizer.json and
// tokenizer_config.json). A character-level model has no tokenizer.json form: its folder
// holds the model only, which the returned note says (empty otherwise).
std::string save_model(const Transformer<float>& model, const std::string& task,
                       const tasks::TextCoder* coder, const std::string& path,
                       const std::string& kept_json = "");

}  // namespace tapegrad::apps
