#pragma once
// One config.json as an import reads it: each key marked as read when a row asks for it, so
// that what is left unread at the end is either kept (it changes nothing) or refused.
#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/errors.hpp"
#include "nn/io/checkpoint_error.hpp"

namespace tapegrad::hf {

class ConfigReader {
 public:
  using json = nlohmann::json;
  ConfigReader(const json& j, const std::string& source, std::string type)
      : j_(j), op_("hf config " + source), type_(std::move(type)) {}

  // CheckpointError "hf config <source>: ...".
  template <class... Args>
  [[noreturn]] void refuse(fmt::format_string<Args...> format, Args&&... args) const {
    fail_with<CheckpointError>(op_, format, std::forward<Args>(args)...);
  }
  const std::string& type() const { return type_; }
  const json& all() const { return j_; }
  bool was_read(const std::string& key) const { return read_.count(key) > 0; }
  bool absent(const std::string& key) const { return j_.find(key) == j_.end(); }

  // The value, or null when the file leaves it out or writes null.
  const json* get(const std::string& key);
  // A non-negative integer; `absent_value` when left out, refused when null.
  std::size_t size(const std::string& key, std::size_t absent_value);
  // A size that may be null: `absent_value` when left out, nullopt for null.
  std::optional<std::size_t> nullable_size(const std::string& key,
                                           std::optional<std::size_t> absent_value);
  double real(const std::string& key, double absent_value);
  bool flag(const std::string& key, bool absent_value);
  std::string text(const std::string& key, const std::string& absent_value);

  // A key read and kept as the file has it (an export writes it back): a dynamic RoPE
  // scaling, which within the context is no scaling at all.
  void keep_as_is(const std::string& key) { kept_as_is_.insert(key); }
  const std::set<std::string>& kept_as_is() const { return kept_as_is_; }

 private:
  std::size_t size_of(const std::string& key, const json& v) const;

  const json& j_;
  std::string op_, type_;
  std::set<std::string> read_, kept_as_is_;
};

}  // namespace tapegrad::hf
