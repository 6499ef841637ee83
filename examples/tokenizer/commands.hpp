// The tokenizer program's four commands, apart from its command line (main.cpp).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "text/bpe_tokenizer.hpp"

namespace tapegrad::apps::tokenizer {

// The file at `path`, named `label` in errors ("input", "--tokenizer"): read_text_file's
// regular file of at most kMaxTextBytes (platform/file_io.hpp).
std::string read_input(const std::string& path, const std::string& label);
// `contents` written atomically: a failed write leaves no partial file.
void write_file(const std::string& path, const std::string& contents);

// "12 7 300": the ids of a file written by encode (any whitespace between them).
std::vector<std::int32_t> parse_ids(const std::string& contents, const std::string& source);
std::string format_ids(const std::vector<std::int32_t>& ids);

// Compression (bytes per token) of `text`, and the `top` merges used most often in its
// encoding, each shown as text (bytes that are not printable as \xNN; a long token
// shortened, with its length).
void print_stats(const text::BpeTokenizer& tokenizer, const std::string& text, std::size_t top,
                 std::FILE* out);

}  // namespace tapegrad::apps::tokenizer
