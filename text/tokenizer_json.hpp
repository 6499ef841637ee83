// Hugging Face tokenizer.json in and out, for byte-level BPE (GPT-2, Llama 3, Qwen2 without
// its normalizer): what the `tokenizers` library reads into a BPE model with the ByteLevel
// pre-tokenizer becomes a BpeTokenizer that encodes the same ids, and a BpeTokenizer is
// written as a file `tokenizers` loads and encodes the same way. docs/TOKENIZER.md lists
// what is read and what is refused.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "text/bpe_tokenizer.hpp"

namespace tapegrad::text {

// std::invalid_argument naming the file (`source`) and the field of anything that would
// change the encoding and is not implemented, or is not valid.
BpeTokenizer tokenizer_from_json(std::string_view json_text, const std::string& source);
// The file at `path` (a regular file of at most 64 MiB), read as above; IoError
// (platform/io_error.hpp, with the errno) naming it when it cannot be opened or read.
BpeTokenizer read_tokenizer_json(const std::string& path);
// A tokenizer named by a path wherever one is asked for: a folder holding tokenizer.json, a
// tokenizer.json (its first byte '{'), or a file the tokenizer program saved (minbpe's).
BpeTokenizer read_tokenizer_file(const std::string& path);

// The tokenizer.json text. std::invalid_argument when the tokenizer has no such form: two
// tokens with the same bytes (the file's vocabulary is keyed by them), named by their ids.
std::string tokenizer_json(const BpeTokenizer& tokenizer);
// Written atomically (nothing is left at `path` on an error; IoError, with the errno, when
// the file cannot be written).
void write_tokenizer_json(const BpeTokenizer& tokenizer, const std::string& path);

// text/tokenizer_folder.cpp: the files a tokenizer is saved as.

// How a tokenizer is kept beside a model and inside a checkpoint: minbpe's text form
// (tokenizer.bpe, which the tokenizer program also reads) when it has one, else tokenizer.json.
struct SavedTokenizer {
  std::string file_name;
  std::string contents;
};
SavedTokenizer saved_tokenizer(const BpeTokenizer& tokenizer);

// The tokenizer_config.json with which transformers' AutoTokenizer encodes and decodes the
// folder's tokenizer.json as `tokenizer` does: the class, add_prefix_space (transformers
// resets a ByteLevel pre-tokenizer's to this field, false when missing), the added tokens,
// the BOS and EOS a template adds, and model_max_length when given.
std::string tokenizer_config_json(const BpeTokenizer& tokenizer,
                                  std::optional<std::size_t> model_max_length);
// tokenizer.json and tokenizer_config.json into `dir` (created if missing). Both texts are
// made first, so a tokenizer with no tokenizer.json form leaves nothing behind.
void write_tokenizer_folder(const BpeTokenizer& tokenizer, const std::string& dir,
                            std::optional<std::size_t> model_max_length = std::nullopt);

}  // namespace tapegrad::text
