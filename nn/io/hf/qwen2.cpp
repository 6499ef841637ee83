// Qwen2 (Qwen2ForCausalLM): Llama with biases on q, k and v (none on o_proj or the
// feed-forward) and a sliding window the eager and flash paths of 4.49 apply differently.
#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// Named, not anonymous: the family files compile together in one unity batch.
namespace qwen2_parts {

const DecoderDefaults kDefaults = {151936, 4096, 22016, 32768, 32, 1e-6, 10000.0, 4096,
                                   32, 32, std::nullopt, false};

// The mask of 4.49's eager and sdpa paths applies sliding_window to every layer whatever
// use_sliding_window says, and flash-attention only to layers from max_window_layers on
// when use_sliding_window: the two agree only on every layer or none.
ConfigKey window_key() {
  ConfigKey row = sliding_window_key(kDefaults);
  row.read = [](ConfigReader& r, Config& c) {
    const std::optional<std::size_t> w = read_sliding_window(r, kDefaults);
    const bool use = r.flag("use_sliding_window", false);
    const std::size_t from_layer = r.size("max_window_layers", 28);
    c.window = 0;
    if (!w) return;
    if (use && from_layer == 0) {
      c.window = *w;
      return;
    }
    if (*w >= c.context) return;  // no key is that far back within the context
    if (use)
      r.refuse("use_sliding_window=true with max_window_layers={}: a window on some layers "
               "only is not supported", from_layer);
    r.refuse("sliding_window={} with use_sliding_window=false: transformers' eager and sdpa "
             "attention apply it to every layer, flash-attention to none", *w);
  };
  return row;
}

std::vector<ConfigKey> keys() {
  // read by window_key
  const ConfigKey use = {"use_sliding_window", nullptr,
                         [](const Config& c, const json&) { return json(c.window > 0); }};
  const ConfigKey from_layer = {"max_window_layers", nullptr, [](const Config& c, const json&) {
                                  return json(c.window > 0 ? std::size_t(0) : c.layers);
                                }};
  return concat<ConfigKey>({decoder_size_keys(kDefaults), {silu_key()},
                            decoder_position_keys(kDefaults),
                            {always([](Config& c) { c.attn_qkv_bias = true; }), window_key(), use,
                             from_layer, rope_scaling_key()}});
}

}  // namespace qwen2_parts

const Family& qwen2_family() {
  static const Family family = [] {
    using namespace qwen2_parts;
    Family f;
    f.model_type = "qwen2";
    f.causal_lm_class = "Qwen2ForCausalLM";
    f.preset = rope_preset;
    f.keys = keys();
    f.harmless_keys = {"attention_dropout"};
    f.requirements = concat<Requirement>(
        {parts({}),
         llama_parts_requirements(),
         rope_requirements(), expert_requirements(false),
         {need("attn_out_bias", [](const Config& c) { return !c.attn_out_bias; },
               "has no bias on o_proj"),
          need("mlp_bias", [](const Config& c) { return !c.mlp_bias; },
               "'s feed-forward has no biases")}});
    f.claims = [](const Config& c) {
      return c.positions == PositionKind::rope && c.attn_qkv_bias && !c.attn_out_bias && !c.mlp_bias;
    };
    f.biases = [](const Config&) { return FileBiases{true, false, false}; };
    f.tensors = decoder_tensor_names();
    return f;
  }();
  return family;
}

}  // namespace tapegrad::hf
