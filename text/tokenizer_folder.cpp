#include <filesystem>

#include <nlohmann/json.hpp>

#include "platform/file_io.hpp"
#include "text/tokenizer_json.hpp"

namespace tapegrad::text {
namespace {

using OrderedJson = nlohmann::ordered_json;

// The one token a template puts before (or after) the text, if it is an added token.
std::optional<std::string> template_token(const BpeTokenizer& t, const std::vector<std::int32_t>& ids) {
  if (ids.size() != 1) return std::nullopt;
  for (const AddedToken& token : t.vocabulary().added)
    if (token.id == ids[0]) return token.content;
  return std::nullopt;
}

// transformers' own form of an added token in tokenizer_config.json.
OrderedJson added_tokens_decoder(const BpeTokenizer& t) {
  OrderedJson decoder = OrderedJson::object();
  for (const AddedToken& token : t.vocabulary().added)
    decoder[std::to_string(token.id)] = {{"content", token.content}, {"lstrip", false},
                                         {"normalized", token.normalized}, {"rstrip", false},
                                         {"single_word", false}, {"special", token.special}};
  return decoder;
}

}  // namespace

SavedTokenizer saved_tokenizer(const BpeTokenizer& tokenizer) {
  if (tokenizer.is_minbpe()) return {"tokenizer.bpe", tokenizer.to_text()};
  return {"tokenizer.json", tokenizer_json(tokenizer)};
}

std::string tokenizer_config_json(const BpeTokenizer& tokenizer,
                                  std::optional<std::size_t> model_max_length) {
  const BpeVocabulary& v = tokenizer.vocabulary();
  OrderedJson config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                        {"add_prefix_space", v.add_prefix_space},
                        {"added_tokens_decoder", added_tokens_decoder(tokenizer)},
                        // decode() keeps the spaces before punctuation, as tokenizers does
                        {"clean_up_tokenization_spaces", false}};
  if (std::optional<std::string> bos = template_token(tokenizer, v.prefix_ids)) config["bos_token"] = *bos;
  if (std::optional<std::string> eos = template_token(tokenizer, v.suffix_ids)) config["eos_token"] = *eos;
  if (model_max_length) config["model_max_length"] = *model_max_length;
  return config.dump(2) + "\n";
}

void write_tokenizer_folder(const BpeTokenizer& tokenizer, const std::string& dir,
                            std::optional<std::size_t> model_max_length) {
  const std::string json = tokenizer_json(tokenizer);
  const std::string config = tokenizer_config_json(tokenizer, model_max_length);
  const std::filesystem::path folder(dir);
  std::filesystem::create_directories(folder);
  const std::string context = "tokenizer folder '" + dir + "'";
  detail::write_file_atomically((folder / "tokenizer.json").string(), json, context);
  detail::write_file_atomically((folder / "tokenizer_config.json").string(), config, context);
}

}  // namespace tapegrad::text
