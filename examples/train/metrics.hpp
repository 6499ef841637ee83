#pragma once
// What a training run leaves behind besides the checkpoint: metrics.json (a flat JSON
// object, keys in insertion order), loss.csv (step,loss,lr) and loss.svg.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tapegrad::train {

// A flat JSON object that keeps its keys in insertion order. Numbers are written with 17
// significant digits (round-trip exact), so two identical runs give identical files and a
// reader recovers the exact double; a non-finite number is written as null.
class JsonObject {
 public:
  JsonObject& set(const std::string& key, double value);
  JsonObject& set(const std::string& key, std::int64_t value);
  JsonObject& set(const std::string& key, int value) { return set(key, std::int64_t(value)); }
  JsonObject& set(const std::string& key, std::size_t value) {
    return set(key, std::int64_t(value));
  }
  JsonObject& set(const std::string& key, bool value);
  JsonObject& set(const std::string& key, const std::string& value);
  JsonObject& set(const std::string& key, const char* value) {
    return set(key, std::string(value));
  }
  JsonObject& set_null(const std::string& key);
  std::string dump() const;  // pretty-printed, one key per line

 private:
  JsonObject& raw(const std::string& key, std::string json);
  std::vector<std::pair<std::string, std::string>> items_;
};

std::string json_string(const std::string& s);  // quoted and escaped
std::string json_number(double v);              // "%.17g", or null when not finite

struct LossRecord {
  std::size_t step;
  double loss;
  double lr;
};

std::string loss_csv(const std::vector<LossRecord>& records);  // "step,loss,lr\n..."
// The loss curve (log-scale loss against step) with a moving average over `smooth` steps.
std::string loss_svg(const std::vector<LossRecord>& records, const std::string& title,
                     std::size_t smooth = 25);

}  // namespace tapegrad::train
