// The tokenizer program's four commands, apart from its command line (main.cpp).
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "text/bpe_tokenizer.hpp"

namespace tapegrad::examples::tokenizer {

std::string read_file(const std::string& path);  // throws std::runtime_error naming the path
void write_file(const std::string& path, const std::string& contents);

// "12 7 300": the ids of a file written by encode (any whitespace between them).
std::vector<std::int32_t> parse_ids(const std::string& contents, const std::string& source);
std::string format_ids(const std::vector<std::int32_t>& ids);

// Compression (bytes per token) of `text`, and the `top` merges used most often in its
// encoding, each shown as text (bytes that are not printable as \xNN).
void print_stats(const text::BpeTokenizer& tokenizer, const std::string& text, std::size_t top,
                 std::FILE* out);

}  // namespace tapegrad::examples::tokenizer
