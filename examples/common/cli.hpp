#pragma once
// Command-line handling shared by the example programs (CLI11): one line per error and the
// exit codes every program documents (0 help, 2 usage error).
#include <cstdio>
#include <optional>
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
