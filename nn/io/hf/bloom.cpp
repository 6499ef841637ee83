// BLOOM (BloomForCausalLM): ALiBi, a LayerNorm on the embeddings, GELU, every bias, and
// query_key_value an nn.Linear whose rows are per head [q (dh) k (dh) v (dh)].
#include "nn/io/hf/families.hpp"

namespace tapegrad::hf {

// Named, not anonymous: the family files compile together in one unity batch.
namespace bloom_parts {

// BLOOM's config.json has no context: the model is built for `seq_length` positions (the
// Megatron name, which tapegrad's export writes and 4.49 leaves unread) or this many, BLOOM's
// training length. ALiBi has no table to size: it bounds only the sequences tapegrad runs.
constexpr std::size_t kBloomContext = 2048;

// A BloomConfig size: `key`, or its attribute_map alias, which PretrainedConfig sets after it.
ConfigKey aliased_size_key(const char* key, const char* alias, std::size_t Config::*field,
                           std::size_t absent) {
  ConfigKey row = size_key(key, field, absent);
  row.read = [=](ConfigReader& r, Config& c) {
    const std::size_t v = r.size(key, absent);
    c.*field = r.absent(alias) ? v : r.size(alias, v);
  };
  return row;
}

std::vector<ConfigKey> keys() {
  ConfigKey hidden = size_key("hidden_size", &Config::d_model, 64);
  hidden.read = [](ConfigReader& r, Config& c) {
    c.d_model = r.size("hidden_size", 64);
    if (!r.absent("n_embed")) c.d_model = r.size("n_embed", c.d_model);  // the old name wins
  };
  return {size_key("vocab_size", &Config::vocab, 250880),
          hidden,
          aliased_size_key("n_layer", "num_hidden_layers", &Config::layers, 2),
          aliased_size_key("n_head", "num_attention_heads", &Config::heads, 8),
          // not BloomConfig's: tapegrad's context, read back on import
          size_key("seq_length", &Config::context, kBloomContext),
          always([](Config& c) { c.mlp_hidden = 4 * c.d_model; }),  // dense_h_to_4h
          real_key("layer_norm_epsilon", &Config::norm_eps, 1e-5),
          flag_key("tie_word_embeddings", &Config::tie_embeddings, true),
          constant_flag_key("apply_residual_connection_post_layernorm", false,
                            "tapegrad's residual stream is the block's input, not its "
                            "normalised copy")};
}

std::vector<Requirement> requirements() {
  Parts has;
  has.embed_norm = true;
  return concat<Requirement>(
      {parts(has),
       {need("positions", [](const Config& c) { return c.positions == PositionKind::alibi; }, "has ALiBi"),
        need("norm", [](const Config& c) { return c.norm == NormKind::layer_norm; }, "has LayerNorm"),
        need("mlp", [](const Config& c) { return c.mlp == MlpKind::gelu; }, "'s feed-forward is GELU"),
        need("mlp_hidden", [](const Config& c) { return c.resolved_mlp_hidden() == 4 * c.d_model; },
             "'s feed-forward is 4 x hidden_size wide"),
        need("experts", [](const Config& c) { return c.experts == 0; }, "has no mixture of experts"),
        need("window", [](const Config& c) { return c.window == 0; }, "has no sliding window"),
        need("kv_heads", [](const Config& c) { return c.resolved_kv_heads() == c.heads; },
             "has one K/V head per query head"),
        need("head_dim", [](const Config& c) { return c.resolved_head_dim() * c.heads == c.d_model; },
             "'s heads are hidden_size/n_head wide"),
        need(scale_field, default_scale, "scales by 1/sqrt(head_dim)")}});
}

TensorNames tensors() {
  TensorNames n;
  n.prefix = "transformer.";
  n.embed = "word_embeddings";
  n.embed_norm = "word_embeddings_layernorm";
  n.layers = "h.";
  n.final_norm = "ln_f";
  n.norm1 = "input_layernorm";
  n.norm2 = "post_attention_layernorm";
  n.qkv = "self_attention.query_key_value";
  n.fused_per_head = true;
  n.o = "self_attention.dense";
  n.fc = "mlp.dense_h_to_4h";
  n.proj = "mlp.dense_4h_to_h";
  return n;
}

}  // namespace bloom_parts

const Family& bloom_family() {
  static const Family family = [] {
    using namespace bloom_parts;
    Family f;
    f.model_type = "bloom";
    f.causal_lm_class = "BloomForCausalLM";
    f.preset = [] {
      TransformerConfig c;
      c.positions = PositionKind::alibi;
      c.embed_norm = true;
      c.attn_qkv_bias = true;
      c.attn_out_bias = true;
      c.tie_embeddings = true;
      return c;
    };
    f.is_preset = true;
    f.keys = keys();
    // the Megatron switches bigscience's files carry; 4.49 reads none of them.
    // slow_but_exact with pretraining_tp > 1 sums dense's slices: the same products, another
    // rounding order
    f.harmless_keys = {"attention_dropout", "hidden_dropout", "pretraining_tp", "slow_but_exact",
                       "attention_softmax_in_fp32", "bias_dropout_fusion", "masked_softmax_fusion",
                       "offset_alibi", "skip_bias_add", "skip_bias_add_qkv", "unk_token_id",
                       "n_inner"};
    f.requirements = requirements();
    f.claims = [](const Config& c) { return c.positions == PositionKind::alibi; };
    f.biases = [](const Config&) { return FileBiases{true, true, true}; };
    f.tensors = tensors();
    return f;
  }();
  return family;
}

}  // namespace tapegrad::hf

namespace tapegrad {

TransformerConfig bloom_preset() { return hf::bloom_family().preset(); }

}  // namespace tapegrad
