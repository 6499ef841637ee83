#pragma once
// Command-line handling shared by the example programs (CLI11): one line per error and the
// exit codes every program documents (0 help, 2 usage error).
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace tapegrad::apps {

// What every program's main does first. A write past a file-size limit (ulimit -f) raises
// SIGXFSZ, which ends the process without a word and leaves its temporary file behind;
// ignored, the write fails with EFBIG and is reported, and cleaned up, as any failed write.
inline void prepare_process() { std::signal(SIGXFSZ, SIG_IGN); }

// An exception's text on one line (CLI11 and xtensor messages can span several).
inline std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// A finite number in [lo, hi]. CLI::Range lets NaN through (every comparison with NaN is
// false), and a NaN learning rate or weight decay would only show up as a NaN loss later.
inline CLI::Validator finite_range(double lo, double hi) {
  std::ostringstream description;
  description << "FLOAT in [" << lo << " - " << hi << "]";
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "value " + text + " is not a number";
        if (!std::isfinite(value) || value < lo || value > hi) {
          std::ostringstream why;
          why << "value " << text << " is not a finite number in [" << lo << ", " << hi << "]";
          return why.str();
        }
        return std::string();
      },
      description.str());
}

// An unsigned integer written without a sign. CLI11 reads "-1" into a std::uint64_t as
// 2^64 - 1, so a negative seed would silently become a huge one.
inline CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::size_t first = text.find_first_not_of(" \t");
        if (first == std::string::npos || text[first] == '-' || text[first] == '+')
          return "value " + text + " is not a non-negative integer";
        unsigned long long value = 0;
        if (!CLI::detail::lexical_cast(text, value))
          return "value " + text + " is not a non-negative integer";
        return std::string();
      },
      "UINT");
}

// The help's formatter. CLI11 prints a flag with a negated form as
// "--qk-norm,--no-qk-norm{false}", where "{false}" is the value --no-qk-norm sets but reads
// as the default; this prints "--qk-norm, --no-qk-norm" and then the flag's default as
// "=on" or "=off" (or the text given with default_str), as options show theirs.
class HelpFormatter : public CLI::Formatter {
 public:
  // A flag takes no value (CLI11 gives it a type size, but expects no argument).
  static bool is_flag(const CLI::Option* opt) { return opt->get_expected_min() == 0; }
  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    if (positional || !is_flag(opt)) return CLI::Formatter::make_option_name(opt, positional);
    std::string names;
    for (const std::string& n : opt->get_snames()) names += (names.empty() ? "-" : ", -") + n;
    for (const std::string& n : opt->get_lnames()) names += (names.empty() ? "--" : ", --") + n;
    return names;
  }
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (!is_flag(opt)) return CLI::Formatter::make_option_opts(opt);
    const std::string d = opt->get_default_str();
    return d.empty() ? "" : "=" + (d == "false" ? std::string("off") : d == "true" ? std::string("on") : d);
  }
};

// Installs HelpFormatter (column width as given) on `app`.
inline void use_help_formatter(CLI::App& app, std::size_t column_width = 30) {
  auto formatter = std::make_shared<HelpFormatter>();
  formatter->column_width(column_width);
  app.formatter(formatter);
}

// A default that depends on the case (the task, the preset), as --help shows it: the first
// case's value, then each other case whose value differs, e.g. "600 (reverse 300, recall
// 12000, text 1000)".
inline std::string per_case_default(const std::vector<std::pair<std::string, std::string>>& values) {
  if (values.empty()) return "";
  std::string others;
  for (std::size_t i = 1; i < values.size(); ++i)
    if (values[i].second != values[0].second)
      others += (others.empty() ? "" : ", ") + values[i].first + " " + values[i].second;
  return values[0].second + (others.empty() ? "" : " (" + others + ")");
}

// A library field's option: "top_k" -> "--top-k".
inline std::string option_name(const std::string& field) {
  std::string s = field;
  std::replace(s.begin(), s.end(), '_', '-');
  return "--" + s;
}

// The options the command line gave, by their long name ("--top-k"), for the options that
// matter only with others.
inline std::set<std::string> given_options(const CLI::App& app) {
  std::set<std::string> given;
  for (const CLI::Option* o : app.get_options())
    if (o->count() > 0 && !o->get_lnames().empty()) given.insert("--" + o->get_lnames()[0]);
  return given;
}

// Exit 2 naming the arguments nothing took, the subcommands' included. CLI11 joins them in
// reverse ("-1 --steps" for "--steps -1"): say them as typed.
inline int unexpected_arguments(const CLI::App& app, const char* program) {
  std::string extras;
  for (const std::string& arg : app.remaining(true)) extras += (extras.empty() ? "" : " ") + arg;
  std::fprintf(stderr, "%s: usage error: unexpected argument%s: %s (see --help)\n", program,
               app.remaining_size(true) > 1 ? "s" : "", extras.c_str());
  return 2;
}

// Parses argv. Returns the exit code when the program should stop now: 0 after printing
// --help, 2 after a one-line usage error on stderr; nothing when it should go on.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv,
                                             const char* program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError&) {
    return unexpected_arguments(app, program);
  } catch (const CLI::RequiredError& e) {
    // "--bogus" where a subcommand is required: the argument is the mistake to name
    if (app.remaining_size(true) > 0) return unexpected_arguments(app, program);
    std::fprintf(stderr, "%s: usage error: %s (see --help)\n", program,
                 one_line(e.what()).c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: usage error: %s (see --help)\n", program,
                 one_line(e.what()).c_str());
    return 2;
  }
  return std::nullopt;
}

}  // namespace tapegrad::apps
