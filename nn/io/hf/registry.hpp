#pragma once
// The Hugging Face model families tapegrad reads and writes, one descriptor each
// (nn/io/hf/family.hpp), in the order that decides which type a model naturally is.
#include <string>
#include <vector>

namespace tapegrad::hf {

struct Family;

const std::vector<const Family*>& families();
// The family of `model_type`, or nullptr.
const Family* find_family(const std::string& model_type);
// Every supported model_type, in the registry's order.
std::vector<std::string> model_types();
bool is_model_type(const std::string& model_type);
// The families with a native preset (--arch, Config.preset).
std::vector<std::string> preset_families();

}  // namespace tapegrad::hf
