#pragma once
// Text models' characters, as every program reads them: a prompt whose characters are not
// all in the model's vocabulary is refused (exit 2) naming the first one, a text with
// characters the vocabulary lacks is refused naming how many and the first few (never
// silently dropped), and generation past the context follows one rule (kAtContext).
#include <cstdint>
#include <string>
#include <vector>

#include "nn/generation.hpp"
#include "nn/transformer.hpp"
#include "tasks/text_coder.hpp"

namespace tapegrad::apps {

// The one rule of examples/generate and the trainer's --sample at a text model's context:
// the window slides (nn/generation.hpp: when the sequence fills the context, the newest
// context/2 tokens are read again from position 0 and generation goes on), so both print
// every token asked for.
inline constexpr AtContext kAtContext = AtContext::slide;

// "'x' (U+0078)"
std::string code_point_name(std::uint32_t cp);

// `prompt`'s characters as ids of the sorted `vocab`; an empty prompt is a newline (token 0
// when the vocabulary has none). UsageError "<option>: character 'x' (U+0078) at position
// 3 is not in the model's vocabulary of 10 characters" otherwise.
std::vector<std::int64_t> encode_text_prompt(const std::vector<std::uint32_t>& vocab,
                                             const std::string& prompt,
                                             const std::string& option = "--prompt");
// The same for any text model: a BPE model encodes every prompt (an empty one a newline).
std::vector<std::int64_t> encode_text_prompt(const tasks::TextCoder& coder, const std::string& prompt,
                                             const std::string& option = "--prompt");

// UsageError "--prompt: 20 tokens do not fit the model's context of 16" unless the model
// can pass its context (nn/transformer.hpp past_context_ok).
void require_prompt_fits(std::size_t tokens, const TransformerConfig& config);

// UsageError "<label>: 123 characters (2 distinct) are not in the <whose> vocabulary of 10
// characters: 'x' (U+0078), ..." when `utf8` holds characters `vocab` lacks.
void require_known_characters(const std::vector<std::uint32_t>& vocab, const std::string& utf8,
                              const std::string& label, const std::string& whose);

}  // namespace tapegrad::apps
