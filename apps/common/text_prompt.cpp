#include "apps/common/text_prompt.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "apps/common/run_options.hpp"
#include "tasks/tasks.hpp"
#include "text/utf8.hpp"

namespace tapegrad::apps {

namespace {
bool known(const std::vector<std::uint32_t>& vocab, std::uint32_t cp) {
  return std::binary_search(vocab.begin(), vocab.end(), cp);
}
}  // namespace

std::string code_point_name(std::uint32_t cp) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "U+%04X", cp);
  return "'" + text::encode_utf8({cp}) + "' (" + hex + ")";
}

std::vector<std::int64_t> encode_text_prompt(const std::vector<std::uint32_t>& vocab,
                                             const std::string& prompt, const std::string& option) {
  const std::vector<std::uint32_t> cps = text::decode_utf8(prompt.empty() ? "\n" : prompt);
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (!known(vocab, cps[i])) {
      if (prompt.empty()) return {0};  // no newline in this vocabulary: start from token 0
      throw UsageError(option + ": character " + code_point_name(cps[i]) + " at position " +
                       std::to_string(i) + " is not in the model's vocabulary of " +
                       std::to_string(vocab.size()) + " characters");
    }
    ids.push_back(std::lower_bound(vocab.begin(), vocab.end(), cps[i]) - vocab.begin());
  }
  return ids;
}

std::vector<std::int64_t> encode_text_prompt(const tasks::TextCoder& coder, const std::string& prompt,
                                             const std::string& option) {
  if (!coder.is_bpe()) return encode_text_prompt(coder.characters(), prompt, option);
  return coder.encode(prompt.empty() ? "\n" : prompt);
}

void require_prompt_fits(std::size_t tokens, const TransformerConfig& config) {
  if (tokens > config.context && !past_context_ok(config))
    throw UsageError("--prompt: " + std::to_string(tokens) + " tokens do not fit the model's context of " +
                     std::to_string(config.context));
}

void require_known_characters(const std::vector<std::uint32_t>& vocab, const std::string& utf8,
                              const std::string& label, const std::string& whose) {
  constexpr std::size_t kShown = 5;
  std::size_t missing = 0;
  std::set<std::uint32_t> distinct;
  std::string shown;
  for (std::uint32_t cp : text::decode_utf8(utf8)) {
    if (known(vocab, cp)) continue;
    ++missing;
    if (distinct.insert(cp).second && distinct.size() <= kShown)
      shown += (shown.empty() ? "" : ", ") + code_point_name(cp);
  }
  if (missing == 0) return;
  throw UsageError(label + ": " + std::to_string(missing) + " characters (" +
                   std::to_string(distinct.size()) + " distinct) are not in " + whose +
                   " vocabulary of " + std::to_string(vocab.size()) + " characters: " + shown +
                   (distinct.size() > kShown ? ", ..." : ""));
}

}  // namespace tapegrad::apps
