#pragma once
// Command-line handling shared by the example programs (CLI11): one line per error and the
// exit codes every program documents (0 help, 2 usage error).
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

namespace tapegrad::examples {

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
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: usage error: %s (see --help)\n", program,
                 one_line(e.what()).c_str());
    return 2;
  }
  return std::nullopt;
}

}  // namespace tapegrad::examples
