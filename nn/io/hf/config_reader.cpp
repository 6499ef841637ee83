#include "nn/io/hf/config_reader.hpp"

#include <cstdint>

namespace tapegrad::hf {

const ConfigReader::json* ConfigReader::get(const std::string& key) {
  read_.insert(key);
  const auto it = j_.find(key);
  return it == j_.end() || it->is_null() ? nullptr : &*it;
}

std::size_t ConfigReader::size(const std::string& key, std::size_t absent_value) {
  const json* v = get(key);
  if (!v && !absent(key)) refuse("{} is null, expected a non-negative integer", key);
  return v ? size_of(key, *v) : absent_value;
}

std::optional<std::size_t> ConfigReader::nullable_size(const std::string& key,
                                                       std::optional<std::size_t> absent_value) {
  const bool left_out = absent(key);
  const json* v = get(key);
  if (!v) return left_out ? absent_value : std::nullopt;
  return size_of(key, *v);
}

double ConfigReader::real(const std::string& key, double absent_value) {
  const json* v = get(key);
  if (!v && !absent(key)) refuse("{} is null, expected a number", key);
  if (!v) return absent_value;
  if (!v->is_number()) refuse("{} must be a number, got {}", key, v->dump());
  return v->get<double>();
}

bool ConfigReader::flag(const std::string& key, bool absent_value) {
  const json* v = get(key);
  if (!v) return absent_value;
  if (!v->is_boolean()) refuse("{} must be true or false, got {}", key, v->dump());
  return v->get<bool>();
}

std::string ConfigReader::text(const std::string& key, const std::string& absent_value) {
  const json* v = get(key);
  if (!v) return absent_value;
  if (!v->is_string()) refuse("{} must be a string, got {}", key, v->dump());
  return v->get<std::string>();
}

std::size_t ConfigReader::size_of(const std::string& key, const json& v) const {
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0))
    refuse("{} must be a non-negative integer, got {}", key, v.dump());
  return static_cast<std::size_t>(v.get<std::uint64_t>());
}

}  // namespace tapegrad::hf
