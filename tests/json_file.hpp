#pragma once
// Reading the programs' JSON files in a test: parsed by nlohmann-json, so a file that is not
// valid JSON fails the test with the parser's message instead of matching by accident.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "run_program.hpp"

namespace tapegrad::test {

inline nlohmann::json read_json(const std::filesystem::path& path) {
  return nlohmann::json::parse(slurp(path));
}

// The value at `key`, or a discarded value when the key is absent: a discarded value
// compares unequal to everything, itself included, so a missing key never passes a check.
inline nlohmann::json field(const nlohmann::json& object, const std::string& key) {
  const auto it = object.find(key);
  return it == object.end() ? nlohmann::json(nlohmann::json::value_t::discarded) : *it;
}

}  // namespace tapegrad::test
