#include "nn/io/hf/registry.hpp"

#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// The order is the one lists show, and decides the type a model is when several could write
// it: the first whose `claims` holds, else llama, which claims what no other type does.
const std::vector<const Family*>& families() {
  static const std::vector<const Family*> all = {
      &gpt2_family(),       &gpt_neo_family(), &llama_family(),   &gemma2_family(),
      &gemma_family(),      &granite_family(), &starcoder2_family(), &mixtral_family(),
      &qwen2_family(),      &mistral_family(), &bloom_family()};
  return all;
}

const Family* find_family(const std::string& model_type) {
  for (const Family* f : families())
    if (f->model_type == model_type) return f;
  return nullptr;
}

std::vector<std::string> model_types() {
  std::vector<std::string> out;
  for (const Family* f : families()) out.push_back(f->model_type);
  return out;
}

bool is_model_type(const std::string& model_type) { return find_family(model_type) != nullptr; }

std::vector<std::string> preset_families() {
  std::vector<std::string> out;
  for (const Family* f : families())
    if (f->is_preset) out.push_back(f->model_type);
  return out;
}

}  // namespace tapegrad::hf
