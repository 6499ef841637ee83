// model_card: where a transformer's parameters are, and what its KV cache costs per token,
// from the configuration alone (nothing is allocated, so an 8B model is as quick as a toy).
//
//   model_card --arch llama --vocab 128256 --context 8192 --d-model 4096 --layers 32
//              --heads 32 --kv-heads 8 --head-dim 128 --mlp-hidden 14336
//
// Exit codes: 0 done; 2 a usage error (bad option, or a configuration that cannot be built).
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/common/cli.hpp"
#include "apps/common/config_cli.hpp"
#include "platform/format_bytes.hpp"
#include "nn/config.hpp"

using namespace tapegrad;

namespace {

constexpr const char* kProgram = "model_card";

std::string with_commas(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

struct Row {
  std::string name;
  std::uint64_t count;
};

std::vector<Row> rows_of(const TransformerConfig& c) {
  const ParameterCounts p = count_parameters(c);
  // fixed row names (tests/test_model_card.cpp checks the printed lines), short enough for
  // the 26-column layout
  const std::string matrices = std::to_string(mlp_matrices(c.mlp));
  const std::string mlp = "feed-forward (" + matrices + (c.mlp_bias ? " + biases)" : " matrices)");
  const std::string norms = c.norm == NormKind::rms_norm ? "RMSNorm scales" : "LayerNorm scales, shifts";
  std::vector<Row> rows = {{"token embedding", p.token_embedding}};
  if (p.position_embedding) rows.push_back({"position embedding", p.position_embedding});
  rows.push_back({"attention Q", p.attention_q});
  rows.push_back({"attention K and V", p.attention_kv});
  rows.push_back({"attention output", p.attention_out});
  if (p.qk_norm) rows.push_back({"QK-norm gains", p.qk_norm});
  if (p.router) {
    // every expert of the MoE layers (and the dense layers' MLPs), then the routers
    rows.push_back({"feed-forward + experts", p.feed_forward});
    rows.push_back({"MoE routers", p.router});
  } else if (c.mlp != MlpKind::none) {
    rows.push_back({mlp, p.feed_forward});
  }
  rows.push_back({norms, p.norms});
  rows.push_back({c.tie_embeddings ? "unembedding (tied)" : "unembedding", p.unembedding});
  return rows;
}

void print_card(const TransformerConfig& c, std::size_t cache_bytes) {
  const std::uint64_t total = count_parameters(c).total();
  std::printf("%s\n\n", config_summary(c).c_str());
  std::printf("%-26s%14s%8s\n", "component", "parameters", "share");
  for (const Row& r : rows_of(c))
    std::printf("%-26s%14s%7.1f%%\n", r.name.c_str(), with_commas(r.count).c_str(),
                100.0 * double(r.count) / double(total));
  std::printf("%-26s%14s%7.1f%%\n", "TOTAL", with_commas(total).c_str(), 100.0);
  // a sparse model: compute follows the active parameters, memory the total
  const ParameterCounts p = count_parameters(c);
  if (p.router)
    std::printf("%-26s%14s%7.1f%%  (top %zu of %zu experts per token)\n", "ACTIVE per token",
                with_commas(p.active()).c_str(), 100.0 * double(p.active()) / double(total),
                c.experts_top_k, c.experts);
  std::printf("\nKV cache per token = 2 x %zu layers x %zu kv_heads x %zu head_dim x %zu bytes = %s\n",
              c.layers, c.resolved_kv_heads(), c.resolved_head_dim(), cache_bytes,
              format_bytes(kv_cache_bytes_per_token(c, cache_bytes)).c_str());
  std::printf("generate's KV cache per token: %s with --kv-dtype f32, %s with --kv-dtype bf16\n",
              format_bytes(kv_cache_bytes_per_token(c, kv_value_bytes<float>(KVDtype::model))).c_str(),
              format_bytes(kv_cache_bytes_per_token(c, kv_value_bytes<float>(KVDtype::bf16))).c_str());
  if (c.window > 0 && !c.uniform_window())
    std::printf("the windowed layers' caches hold at most %zu positions; the global layers' "
                "(every %zu-th) grow with the sequence\n", c.window, c.window_pattern);
  else if (c.window > 0)
    std::printf("with window %zu the cache holds at most %zu positions: %s per sequence\n", c.window,
                c.window, format_bytes(kv_cache_bytes_per_token(c, cache_bytes) * c.window).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  apps::prepare_process();
  CLI::App app{"Print a transformer's parameters per component and its KV cache per token, from "
               "its configuration alone (--arch preset plus any architecture field as an option). "
               "Exit codes: 0 ok, 2 usage error.", kProgram};
  app.option_defaults()->always_capture_default();
  std::size_t cache_bytes = 2;
  // the initialisation's fields (seed, attention_init, qk_norm_gain) and the execution's
  // (checkpoint_activations) change nothing in a card
  std::set<std::string> initialisation;
  for (const FieldInfo& f : config_fields())
    if (f.role == FieldRole::initialisation || f.role == FieldRole::execution)
      initialisation.insert(f.name);
  apps::ConfigOptions model_options(app, initialisation);
  app.add_option("--cache-bytes", cache_bytes, "bytes per cached value (2: 16-bit)")
      ->check(CLI::Range(std::size_t(1), std::size_t(16)));
  if (const std::optional<int> code = apps::parse_command_line(app, argc, argv, kProgram))
    return *code;
  try {
    TransformerConfig c = model_options.build();
    if (!model_options.given("vocab") || !model_options.given("context"))
      throw std::invalid_argument("config: --vocab and --context are needed (no task fixes them here)");
    c.validate();
    print_card(c, cache_bytes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, apps::one_line(e.what()).c_str());
    return 2;
  }
  return 0;
}
