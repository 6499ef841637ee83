#include "nn/io/pretrained.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/errors.hpp"
#include "platform/file_io.hpp"
#include "nn/io/hf_weights.hpp"
#include "nn/io/safetensors.hpp"
#include "nn/io/weight_loader.hpp"
#include "nn/parameter_plan.hpp"

namespace tapegrad {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;

std::string shape_text(const std::vector<std::size_t>& shape) {
  return "(" + fmt::format("{}", fmt::join(shape, ", ")) + ")";
}

std::string load_op(const std::string& dir) { return "load_pretrained " + dir; }

// GPT-2 and BLOOM files on the hub name their tensors without the `transformer.` prefix
// (saved from the base model); so may files saved from LlamaModel and its kin.
void adapt_prefix(HfLayout& layout, const SafetensorsFolder& folder) {
  HfLayout bare = layout;
  bare.prefix.clear();
  if (!folder.find(hf_embedding_name(layout)) && folder.find(hf_embedding_name(bare)))
    layout.prefix.clear();
}

constexpr const char* kHeadName = "lm_head.weight";

// What transformers writes beside config.json: the token ids generation starts and stops
// at, from the kept fields.
std::string generation_config(const std::string& config_text) {
  const json config = json::parse(config_text);
  json out = {{"_from_model_config", true}};
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "transformers_version"})
    if (config.contains(key) && !config[key].is_null()) out[key] = config[key];
  return out.dump(2) + "\n";
}

// A tied model's folder may hold the head anyway (some tools write it); transformers then
// ties it to the embedding, ignoring the copy. A copy equal to the embedding, value for
// value as the model holds them, changes nothing and is taken; one that differs would give
// logits its author did not mean either way, so it is refused. Read after the embedding, so
// that only the head's values are held beside the model.
template <class T>
void check_tied_head_copy(const SafetensorsFolder& folder, const std::vector<HfTensor<T>>& tensors,
                          const HfLayout& layout, const std::string& dir) {
  const SafetensorsTensor* head = folder.find(kHeadName);
  if (!head) return;
  const std::string name = hf_embedding_name(layout);
  const auto embedding = std::find_if(tensors.begin(), tensors.end(),
                                      [&](const HfTensor<T>& t) { return t.name == name; });
  if (embedding == tensors.end() || head->shape != embedding->shape)
    fail_with<CheckpointError>(load_op(dir), "{}: tensor '{}' {} is not shaped as the embedding "
                               "'{}': tie_word_embeddings is true, so the head is the embedding",
                               folder.file_of(kHeadName), kHeadName, shape_text(head->shape), name);
  std::vector<T> stored(head->elements()), saved;
  folder.read(kHeadName, stored.data());
  const T* held = embedding->direct;
  if (!held) {
    saved.resize(embedding->elements());
    embedding->save(saved.data());
    held = saved.data();
  }
  const auto differ = std::mismatch(stored.begin(), stored.end(), held, [](T x, T y) {
    return std::memcmp(&x, &y, sizeof x) == 0;
  });
  if (differ.first != stored.end())
    fail_with<CheckpointError>(load_op(dir), "{}: tensor '{}' differs from the embedding '{}' at "
                               "element {} ({} against {}), but tie_word_embeddings is true: "
                               "transformers ignores the stored head and uses the embedding; "
                               "remove '{}' from the file, or set tie_word_embeddings to false "
                               "to use it", folder.file_of(kHeadName), kHeadName, name,
                               differ.first - stored.begin(), *differ.first, *differ.second,
                               kHeadName);
}

// transformers' older format, pytorch_model.bin (or its shards), is a pickle: reading one
// runs whatever code it names, so it is not read. Said with the way to the format that is.
void refuse_pickled_weights(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  for (const char* safe : {"model.safetensors", "model.safetensors.index.json"})
    if (fs::exists(d / safe, ec)) return;
  for (const char* pickled : {"pytorch_model.bin", "pytorch_model.bin.index.json"})
    if (fs::exists(d / pickled, ec))
      fail_with<CheckpointError>(load_op(dir), "the folder holds {} but no model.safetensors: "
                                 "pickled weights are not read (loading a pickle runs code it "
                                 "names); re-save them with transformers: "
                                 "AutoModelForCausalLM.from_pretrained(dir).save_pretrained(dir, "
                                 "safe_serialization=True)", pickled);
}

}  // namespace

// Named, not anonymous: the library compiles in unity batches.
namespace pretrained_parts {

// A folder's safetensors file or shards as a source of weights (nn/io/weight_loader.hpp):
// every float dtype converts (BF16 and F16 widen exactly, F64 into float rounds to nearest);
// the model_type's buffers that carry no weight are passed over, and so is a tied model's
// stored head (check_tied_head_copy compares it with the embedding). Each refusal names the
// tensor's file.
class FolderWeights final : public WeightSource {
 public:
  FolderWeights(const SafetensorsFolder& folder, const HfModelConfig& hf, std::string dir)
      : folder_(folder), hf_(hf), dir_(std::move(dir)) {
    for (const std::string& name : folder.names()) {
      const SafetensorsTensor* t = folder.find(name);
      held_.emplace(name, HeldTensor{t->shape, t->dtype});
    }
  }
  std::vector<std::string> names() const override { return folder_.names(); }
  const HeldTensor* find(const std::string& name) const override {
    const auto it = held_.find(name);
    return it == held_.end() ? nullptr : &it->second;
  }
  bool ignored(const std::string& name) const override {
    return hf_dropped_buffer(hf_.model_type, name) || (name == kHeadName && hf_.config.tie_embeddings);
  }
  bool converts(const std::string& dtype, bool) const override {
    return safetensors_float_dtype(dtype);
  }
  void read(const std::string& name, float* out) const override { folder_.read(name, out); }
  void read(const std::string& name, double* out) const override { folder_.read(name, out); }

  std::string op() const override { return load_op(dir_); }
  std::string unexpected(const std::string& name) const override {
    return fmt::format("{} holds tensor '{}', which a {} model of this config.json does not have",
                       folder_.file_of(name), name, hf_.model_type);
  }
  std::string missing(const std::string& name, const std::vector<std::size_t>& shape) const override {
    return fmt::format("tensor '{}' {} is missing{}", name, shape_text(shape),
                       name == kHeadName ? " (tie_word_embeddings is false)" : "");
  }
  std::string wrong_shape(const std::string& name, const std::vector<std::size_t>& held,
                          const std::vector<std::size_t>& wanted) const override {
    return fmt::format("{}: tensor '{}' has shape {}, config.json describes {}",
                       folder_.file_of(name), name, shape_text(held), shape_text(wanted));
  }
  std::string wrong_dtype(const std::string& name, const std::string& dtype, bool) const override {
    return fmt::format("{}: tensor '{}' is {}, not a float (F64, F32, BF16 or F16)",
                       folder_.file_of(name), name, dtype);
  }
  std::string too_few_scalars(long double wanted, long double held) const override {
    return fmt::format("config.json describes a model of {:.0f} parameters, the folder's tensors "
                       "hold {:.0f} values", double(wanted), double(held));
  }
  std::string too_few_tensors(long double wanted, long double held) const override {
    return fmt::format("config.json describes {} layers, whose {} model has {:.0f} tensors; the "
                       "folder holds {:.0f}", hf_.config.layers, hf_.model_type, double(wanted),
                       double(held));
  }
  // A value that is NaN or Inf would make every logit NaN: refused where it is read, as the
  // programs and load_checkpoint in Python refuse one.
  std::string nonfinite(const std::string& name, const std::string& why) const override {
    return fmt::format("{}: tensor {} (allow_nonfinite loads it anyway)", folder_.file_of(name), why);
  }

 private:
  const SafetensorsFolder& folder_;
  const HfModelConfig& hf_;
  std::string dir_;
  std::map<std::string, HeldTensor> held_;
};

// What a config.json describes: the plan's scalars, and the folder's tensors counted from one
// layer of each kind (hf_tensor_count). A folder one whole layer short is refused before the
// tensors are listed one by one or the model is built, which for a config.json of thousands
// of layers would take each of them; a tensor or two short is named by check_names.
WantedCounts wanted_counts(const HfModelConfig& hf, const HfLayout& layout) {
  const HfTensorCount count = hf_tensor_count(hf.config, layout);
  WantedCounts wanted;
  wanted.scalars = ParameterPlan(hf.config).scalars();
  wanted.tensors = static_cast<long double>(count.total);
  wanted.tolerated_shortfall = count.smallest_layer > 0
                                   ? static_cast<long double>(count.smallest_layer) - 1
                                   : std::numeric_limits<long double>::infinity();
  return wanted;
}

}  // namespace pretrained_parts

bool is_pretrained_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

template <class T>
PretrainedModel<T> load_pretrained(const std::string& dir, bool allow_nonfinite) {
  if (!is_pretrained_folder(dir))
    fail_with<CheckpointError>(load_op(dir), "not a folder holding config.json");
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const HfModelConfig hf = hf_config_from_json(read_text_file(config_path, config_path), config_path);
  refuse_pickled_weights(dir);
  const SafetensorsFolder folder(dir);
  HfLayout layout = hf_layout(hf.config, hf.model_type);
  adapt_prefix(layout, folder);
  const pretrained_parts::FolderWeights source(folder, hf, dir);
  check_counts(source, pretrained_parts::wanted_counts(hf, layout));
  const std::vector<HfTensorSpec> specs = hf_tensor_specs(hf.config, layout);
  std::vector<WantedTensor> wanted;
  for (const HfTensorSpec& t : specs) wanted.push_back({t.name, t.shape});
  check_names(source, wanted, std::is_same_v<T, double>);
  Transformer<T> model = Transformer<T>::to_be_loaded(hf.config);
  const std::vector<HfTensor<T>> tensors = hf_bind_tensors(model, specs, hf.model_type);
  std::vector<LoadTarget<T>> targets;
  for (const HfTensor<T>& t : tensors) targets.push_back({t.name, t.shape, t.direct, t.load});
  read_weights(source, targets, !allow_nonfinite);
  if (hf.config.tie_embeddings) check_tied_head_copy(folder, tensors, layout, dir);
  return {std::move(model), hf.model_type, hf.kept_json};
}

template <class T>
void save_pretrained(const Transformer<T>& model, const std::string& dir,
                     const std::string& kept_json) {
  // every refusal comes from these two, before anything is written
  json config = json::parse(hf_config_to_json(model.config(), kept_json));
  config["torch_dtype"] = std::is_same_v<T, float> ? "float32" : "float64";
  const std::vector<HfTensor<T>> tensors =
      hf_tensors(model, hf_layout(model.config(), config.at("model_type").get<std::string>()));
  std::vector<SafetensorsSource<T>> sources;
  for (const HfTensor<T>& t : tensors)
    sources.emplace_back(t.name, t.shape, std::function<void(T*)>(t.save));
  const std::string config_text = config.dump(2) + "\n";
  fs::create_directories(dir);
  const fs::path d(dir);
  save_safetensors<T>((d / "model.safetensors").string(), sources);
  detail::write_file_atomically((d / "config.json").string(), config_text,
                                "save_pretrained: '" + (d / "config.json").string() + "'");
  detail::write_file_atomically((d / "generation_config.json").string(),
                                generation_config(config_text),
                                "save_pretrained: '" + (d / "generation_config.json").string() + "'");
}

template struct PretrainedModel<float>;
template struct PretrainedModel<double>;
#define TAPEGRAD_INSTANTIATE(T)                                                        \
  template PretrainedModel<T> load_pretrained<T>(const std::string&, bool);             \
  template void save_pretrained<T>(const Transformer<T>&, const std::string&, const std::string&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
