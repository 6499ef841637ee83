#pragma once
#include <optional>
#include <string>
#include <vector>

#include "nn/io/npz.hpp"
#include "tasks/text_coder.hpp"

namespace tapegrad::tasks {

// Checkpoint entries the trainer adds (under nn/io/checkpoint's config prefix, which
// load_parameters tolerates): the task name as int64 bytes, and for a text model its
// vocabulary: int64 code points for characters, or the BPE tokenizer's file (docs/TOKENIZER.md;
// a tokenizer read from a tokenizer.json as that JSON text) as int64 bytes. examples/generate reads them back.
inline const char* const kTaskKey = "__config__.train_task";
inline const char* const kVocabKey = "__config__.text_vocab";
inline const char* const kTokenizerKey = "__config__.text_tokenizer";

// The task's name as its entry (kTaskKey), and back: empty when the entries hold none.
NpzEntry task_entry(const std::string& task);
std::string task_from_entries(const std::vector<NpzEntry>& entries);

// A text model's tokens as checkpoint entries (kVocabKey or kTokenizerKey), and back: none
// when the entries hold neither; std::runtime_error naming `source` when one is malformed.
std::vector<NpzEntry> text_coder_entries(const TextCoder& coder);
std::optional<TextCoder> text_coder_from_entries(const std::vector<NpzEntry>& entries,
                                                 const std::string& source);

}  // namespace tapegrad::tasks
