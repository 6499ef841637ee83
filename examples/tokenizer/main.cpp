// tokenizer: train, use and inspect a byte-level BPE tokenizer (text/bpe_tokenizer.hpp).
//   tokenizer train kjv.txt --vocab-size 2048 --mode regex --special '<|endoftext|>' --out kjv.bpe
//   tokenizer encode --tokenizer kjv.bpe text.txt > ids.txt
//   tokenizer decode --tokenizer kjv.bpe ids.txt
//   tokenizer stats --tokenizer kjv.bpe text.txt
// --tokenizer also takes a Hugging Face tokenizer.json, or the folder holding one.
// Exit codes: 0 ok, 1 a file could not be read or written, 2 usage error or bad input (an
// input that is no regular file or is over the size limit, an id outside the vocabulary,
// out of memory): one line, nothing written.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/common/cli.hpp"
#include "examples/tokenizer/commands.hpp"
#include "text/tokenizer_json.hpp"

using namespace tapegrad;
using namespace tapegrad::apps::tokenizer;

namespace {

constexpr const char* kProgram = "tokenizer";

struct Options {
  std::string input, out, tokenizer_path, mode = "regex";
  int vocab_size = 0;
  std::vector<std::string> specials;
  bool no_specials = false, bytes = false;
  std::size_t top = 20;
};

void write_output(const Options& options, const std::string& contents) {
  if (options.out.empty()) std::fwrite(contents.data(), 1, contents.size(), stdout);
  else write_file(options.out, contents);
}

int run(CLI::App& app, const Options& options) {
  if (app.got_subcommand("train")) {
    text::BpeMode mode = text::parse_bpe_mode(options.mode);
    text::BpeTokenizer tokenizer = text::BpeTokenizer::train(read_input(options.input, "input"),
                                                             options.vocab_size, mode, options.specials);
    tokenizer.save(options.out);
    std::fprintf(stderr, "%s: %zu merges, %zu special tokens -> %s\n", kProgram,
                 tokenizer.merges().size(), tokenizer.special_tokens().size(), options.out.c_str());
    return 0;
  }
  text::BpeTokenizer tokenizer = text::read_tokenizer_file(options.tokenizer_path);
  std::string input = read_input(options.input, "input");
  if (app.got_subcommand("encode")) {
    auto specials = options.no_specials ? text::SpecialTokens::as_text : text::SpecialTokens::allowed;
    write_output(options, format_ids(tokenizer.encode(input, specials)));
  } else if (app.got_subcommand("decode")) {
    std::vector<std::int32_t> ids = parse_ids(input, options.input);
    std::string decoded;
    try {
      decoded = options.bytes ? tokenizer.decode_bytes(ids) : tokenizer.decode(ids);
    } catch (const std::out_of_range& e) {  // an id the tokenizer lacks: the input is wrong
      throw std::invalid_argument("input " + options.input + ": " + e.what());
    }
    write_output(options, decoded);
  } else {
    print_stats(tokenizer, input, options.top, stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  apps::prepare_process();
  CLI::App app{"Train, use and inspect a byte-level BPE tokenizer. Exit codes: 0 ok, 1 a file "
               "error, 2 usage error.", kProgram};
  app.require_subcommand(1);
  Options options;
  CLI::App* train = app.add_subcommand("train", "train merges on a text file, save them (--out)");
  train->add_option("input", options.input, "the training text")->required()->check(CLI::ExistingFile);
  train->add_option("--vocab-size", options.vocab_size, "256 bytes + merges + special tokens")
      ->required()->check(CLI::Range(256, 1 << 20));
  train->add_option("--mode", options.mode, "basic (one sequence) or regex (GPT-4 split)")
      ->check(CLI::IsMember({"basic", "regex"}));
  train->add_option("--special", options.specials, "a special token (repeatable)");
  train->add_option("--out", options.out, "the tokenizer file to write")->required();
  for (const char* name : {"encode", "decode", "stats"}) {
    CLI::App* command = app.add_subcommand(name, std::string(name) == "encode"   ? "text file -> token ids"
                                                 : std::string(name) == "decode" ? "token ids file -> text"
                                                                                 : "compression and frequent merges");
    command->add_option("--tokenizer", options.tokenizer_path, "a file from train, a "
                        "tokenizer.json or a folder holding one")
        ->required()->check(CLI::ExistingPath);
    command->add_option("input", options.input, "the input file")->required()->check(CLI::ExistingFile);
    if (std::string(name) != "stats") command->add_option("--out", options.out, "write here, not stdout");
  }
  app.get_subcommand("encode")->add_flag("--no-specials", options.no_specials,
                                         "encode special tokens' text as ordinary text");
  app.get_subcommand("decode")->add_flag("--bytes", options.bytes,
                                         "the raw bytes (no U+FFFD for invalid UTF-8)");
  app.get_subcommand("stats")->add_option("--top", options.top, "merged tokens to list")
      ->check(apps::unsigned_integer());
  if (const std::optional<int> code = apps::parse_command_line(app, argc, argv, kProgram))
    return *code;
  try {
    return run(app, options);
  } catch (const std::invalid_argument& e) {  // a bad vocab size, special or input file
    std::fprintf(stderr, "%s: error: %s\n", kProgram, apps::one_line(e.what()).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::error_code unknown;
    const std::uintmax_t bytes = std::filesystem::file_size(options.input, unknown);
    std::fprintf(stderr, "%s: out of memory: an allocation failed (std::bad_alloc) working on "
                 "input %s (%ju bytes); use a smaller input or free memory\n", kProgram,
                 options.input.c_str(), unknown ? std::uintmax_t(0) : bytes);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, apps::one_line(e.what()).c_str());
    return 1;
  }
}
