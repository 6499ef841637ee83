#include "apps/common/model_source.hpp"

#include <filesystem>

#include <vector>

#include "apps/common/cli.hpp"  // one_line
#include "nn/io/checkpoint.hpp"
#include "platform/file_io.hpp"
#include "nn/io/npz.hpp"
#include "nn/io/pretrained.hpp"
#include "tasks/tasks.hpp"
#include "text/tokenizer_json.hpp"

namespace tapegrad::apps {

namespace fs = std::filesystem;

namespace {

// A folder is taken for a Hugging Face model; one without config.json would otherwise be
// reported as a checkpoint that is "not a regular file".
void require_config_json(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec) && !is_pretrained_folder(path))
    throw CheckpointError("a folder without config.json: a Hugging Face model folder holds "
                          "config.json and model.safetensors (a checkpoint is a .npz file)");
}

}  // namespace

TransformerConfig read_model_config(const std::string& path) {
  require_config_json(path);
  if (!is_pretrained_folder(path)) return read_checkpoint_config(path);
  const std::string file = (fs::path(path) / "config.json").string();
  return hf_config_from_json(read_text_file(file, file), file).config;
}

std::optional<tasks::TextCoder> folder_text_coder(const std::string& dir) {
  const fs::path file = fs::path(dir) / "tokenizer.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  return tasks::TextCoder::bpe(text::read_tokenizer_json(file.string()));
}

LoadedModel load_model(const std::string& path) {
  require_config_json(path);
  if (is_pretrained_folder(path)) {
    // every program checks the weights itself, naming its own --allow-nonfinite
    PretrainedModel<float> p = load_pretrained<float>(path, /*allow_nonfinite=*/true);
    std::optional<tasks::TextCoder> coder = folder_text_coder(path);
    if (coder && coder->vocab_size() > p.model.config().vocab)
      throw CheckpointError(path + ": tokenizer.json has " + std::to_string(coder->vocab_size()) +
                            " tokens, more than the model's vocab_size " +
                            std::to_string(p.model.config().vocab));
    std::string task = coder ? "text" : "";
    return {std::move(p.model), std::move(task), std::move(coder), std::move(p.model_type),
            std::move(p.kept_json)};
  }
  const std::vector<NpzEntry> entries = load_npz(path);
  return {checkpoint_model<float>(entries, path), tasks::task_from_entries(entries),
          tasks::text_coder_from_entries(entries, path), "", ""};
}

std::vector<NpzEntry> checkpoint_extras(const TransformerConfig& config, const std::string& task,
                                        const tasks::TextCoder* coder) {
  std::vector<NpzEntry> extra = config_entries(config);
  extra.push_back(tasks::task_entry(task));
  if (coder)
    for (NpzEntry& e : tasks::text_coder_entries(*coder)) extra.push_back(std::move(e));
  return extra;
}

std::string hf_export_refusal(const TransformerConfig& config, const std::string& kept_json) {
  try {
    hf_config_to_json(config, kept_json);
    return "";
  } catch (const std::exception& e) {
    std::string why = one_line(e.what());
    if (config.qk_norm)
      why += "; train with --no-qk-norm (train_tiny_transformer's --arch llama recipe turns "
             "QK-norm on for --task sort and reverse unless --no-qk-norm is given)";
    return why;
  }
}

std::string save_model(const Transformer<float>& model, const std::string& task,
                       const tasks::TextCoder* coder, const std::string& path,
                       const std::string& kept_json) {
  if (fs::path(path).extension() == ".npz") {
    save_parameters(path, model, checkpoint_extras(model.config(), task, coder));
    return "";
  }
  save_pretrained(model, path, kept_json);
  if (!coder || !coder->is_bpe())
    return coder ? "a character-level vocabulary has no tokenizer.json form: the folder holds "
                   "the model only"
                 : "";
  text::write_tokenizer_folder(*coder->tokenizer(), path, model.config().context);
  return "";
}

}  // namespace tapegrad::apps
