#include "nn/io/pretrained.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/errors.hpp"
#include "platform/file_io.hpp"
#include "nn/io/finite_weights.hpp"  // nonfinite_value
#include "nn/io/hf_weights.hpp"
#include "nn/io/safetensors.hpp"
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

// Every name, shape and dtype of the folder against the tensors the configuration needs,
// before the model is built or any value read: a tensor it does not expect, one it needs that is missing, a
// wrong shape or a dtype that is not a float, each named with its file.
void check_folder(const SafetensorsFolder& folder, const std::vector<HfTensorSpec>& wanted,
                  const HfModelConfig& hf, const std::string& dir) {
  std::set<std::string> expected;
  for (const HfTensorSpec& t : wanted) expected.insert(t.name);
  for (const std::string& name : folder.names()) {
    if (expected.count(name) || hf_dropped_buffer(hf.model_type, name)) continue;
    if (name == kHeadName && hf.config.tie_embeddings) continue;  // check_tied_head_copy
    fail_with<CheckpointError>(load_op(dir), "{} holds tensor '{}', which a {} model of this "
                               "config.json does not have", folder.file_of(name), name,
                               hf.model_type);
  }
  for (const HfTensorSpec& t : wanted) {
    const SafetensorsTensor* held = folder.find(t.name);
    if (!held)
      fail_with<CheckpointError>(load_op(dir), "tensor '{}' {} is missing{}", t.name,
                                 shape_text(t.shape),
                                 t.name == kHeadName ? " (tie_word_embeddings is false)" : "");
    if (held->shape != t.shape)
      fail_with<CheckpointError>(load_op(dir), "{}: tensor '{}' has shape {}, config.json "
                                 "describes {}", folder.file_of(t.name), t.name,
                                 shape_text(held->shape), shape_text(t.shape));
    if (!safetensors_float_dtype(held->dtype))
      fail_with<CheckpointError>(load_op(dir), "{}: tensor '{}' is {}, not a float (F64, F32, "
                                 "BF16 or F16)", folder.file_of(t.name), t.name, held->dtype);
  }
}

// What transformers writes beside config.json: the token ids generation starts and stops
// at, from the kept fields.
std::string generation_config(const std::string& config_text) {
  const json config = json::parse(config_text);
  json out = {{"_from_model_config", true}};
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "transformers_version"})
    if (config.contains(key) && !config[key].is_null()) out[key] = config[key];
  return out.dump(2) + "\n";
}

// A model of at most this many parameters is cheap enough to build just to name the
// tensors a folder lacks (as the checkpoint loader does).
constexpr long double kAlwaysBuildable = 1 << 22;

// A config.json that describes more parameters than the folder holds values cannot load:
// said before a large model is built, which for a hostile or mismatched file could take
// more memory than there is.
void check_size(const SafetensorsFolder& folder, const HfModelConfig& hf, const std::string& dir) {
  long double held = 0;
  for (const std::string& name : folder.names()) held += folder.find(name)->elements();
  const long double wanted = ParameterPlan(hf.config).scalars();
  if (wanted > held && wanted > kAlwaysBuildable)
    fail_with<CheckpointError>(load_op(dir), "config.json describes a model of {:.0f} parameters, "
                               "the folder's tensors hold {:.0f} values", double(wanted), double(held));
}

// A folder a whole layer's tensors short cannot load: said from the description of one layer
// of each kind (hf_tensor_count), before the tensors are listed one by one or the model is
// built, which for a config.json of thousands of layers would take each of them. (A tensor
// or two short is named by check_folder.)
void check_tensor_count(const SafetensorsFolder& folder, const HfModelConfig& hf,
                        const HfLayout& layout, const std::string& dir) {
  const HfTensorCount wanted = hf_tensor_count(hf.config, layout);
  const std::uint64_t held = folder.names().size();
  if (wanted.smallest_layer > 0 && held + wanted.smallest_layer <= wanted.total)
    fail_with<CheckpointError>(load_op(dir), "config.json describes {} layers, whose {} model "
                               "has {} tensors; the folder holds {}", hf.config.layers,
                               hf.model_type, wanted.total, held);
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

// A value that is NaN or Inf would make every logit NaN: refused where it is read, naming
// the file's tensor and element, as the programs and load_checkpoint in Python refuse one.
template <class T>
void check_finite(const SafetensorsFolder& folder, const HfTensor<T>& t, const T* values,
                  const std::string& dir) {
  const std::string why =
      nonfinite_value(t.name, shape_text(t.shape), values, t.elements());
  if (!why.empty())
    fail_with<CheckpointError>(load_op(dir), "{}: tensor {} (allow_nonfinite loads it anyway)",
                               folder.file_of(t.name), why);
}

}  // namespace

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
  check_size(folder, hf, dir);
  check_tensor_count(folder, hf, layout, dir);
  const std::vector<HfTensorSpec> specs = hf_tensor_specs(hf.config, layout);
  check_folder(folder, specs, hf, dir);
  Transformer<T> model = Transformer<T>::to_be_loaded(hf.config);
  const std::vector<HfTensor<T>> tensors = hf_bind_tensors(model, specs, hf.model_type);
  std::vector<T> values;  // one tensor at a time, in the file's layout, where it differs
  for (const HfTensor<T>& t : tensors) {
    if (t.direct) {
      folder.read(t.name, t.direct);
      if (!allow_nonfinite) check_finite(folder, t, t.direct, dir);
      continue;
    }
    values.resize(t.elements());
    folder.read(t.name, values.data());
    if (!allow_nonfinite) check_finite(folder, t, values.data(), dir);
    t.load(values.data());
  }
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
