// examples/model_card end to end: the parameter table of the published Llama 3 8B shapes
// reproduced from options, and misuse exits 2 with one line.
#ifdef TAPEGRAD_MODEL_CARD_BIN
#include <catch2/catch.hpp>

#include <string>

#include "run_program.hpp"
#include "test_paths.hpp"

namespace {
const std::string k8B_but_kv =
    "--arch llama --vocab 128256 --context 8192 --d-model 4096 --layers 32 --heads 32 "
    "--head-dim 128 --mlp-hidden 14336 --rope-theta 500000";
const std::string k8B = k8B_but_kv + " --kv-heads 8";

tapegrad::test::ProgramRun card(const std::string& args, const std::string& name) {
  return tapegrad::test::run_program(TAPEGRAD_MODEL_CARD_BIN, args,
                                     tapegrad::test::scratch_dir("test_model_card", name));
}
}  // namespace

TEST_CASE("model_card: the specification's 8B table, row by row", "[model_card]") {
  const tapegrad::test::ProgramRun r = card(k8B, "8b");
  INFO(r.err);
  REQUIRE(r.code == 0);
  // lines the card must print, spacing and thousands separators included
  for (const char* row : {"token embedding              525,336,576    6.5%",
                          "attention Q                  536,870,912    6.7%",
                          "attention K and V            268,435,456    3.3%",
                          "attention output             536,870,912    6.7%",
                          "feed-forward (3 matrices)  5,637,144,576   70.2%",
                          "RMSNorm scales                   266,240    0.0%",
                          "unembedding                  525,336,576    6.5%",
                          "TOTAL                      8,030,261,248  100.0%", "= 128 KiB"}) {
    INFO(row);
    CHECK(r.out.find(row) != std::string::npos);
  }
  // what generate's cache would take, float32 and bf16
  CHECK(r.out.find("generate's KV cache per token: 256 KiB with --kv-dtype f32, 128 KiB with "
                   "--kv-dtype bf16") != std::string::npos);
  const tapegrad::test::ProgramRun mha = card(k8B_but_kv + " --kv-heads 32", "8b_mha");
  CHECK(mha.out.find("= 512 KiB") != std::string::npos);
}

TEST_CASE("model_card: Mixtral 8x7B's public shapes, total and active", "[model_card][moe]") {
  const tapegrad::test::ProgramRun r =
      card("--arch mixtral --vocab 32000 --context 32768 --d-model 4096 --layers 32 --heads 32 "
           "--kv-heads 8 --head-dim 128 --mlp-hidden 14336", "mixtral");
  INFO(r.err);
  REQUIRE(r.code == 0);
  // the published totals; the routers are 32 layers x 4096 x 8
  for (const char* row : {"MoE routers                    1,048,576",
                          "TOTAL                     46,702,792,704  100.0%",
                          "ACTIVE per token          12,879,925,248   27.6%"}) {
    INFO(row);
    CHECK(r.out.find(row) != std::string::npos);
  }
}

TEST_CASE("model_card: bad configurations exit 2 with one line naming the field", "[model_card]") {
  const std::pair<const char*, const char*> cases[] = {
      {"--vocab 10 --context 8 --heads 6 --d-model 48 --kv-heads 4", "heads=6 is not divisible by kv_heads=4"},
      {"--vocab 10 --context 8 --arch llama --d-model 20 --heads 4", "head_dim=5"},
      {"--context 8", "--vocab"},
      {"--vocab 10 --context 8 --arch nope", "--arch"},
      // the initialisation changes no count: its options are not offered
      {"--vocab 10 --context 8 --qk-norm --qk-norm-gain 2", "--qk-norm-gain"},
      {"--vocab 10 --context 8 --seed 3", "--seed"},
      // a field that changes nothing given the others is refused, as by every program
      {"--vocab 10 --context 8 --experts-top-k 1", "--experts-top-k applies to experts > 0 only"},
  };
  for (const auto& [args, wanted] : cases) {
    INFO(args);
    const tapegrad::test::ProgramRun r = card(args, "errors");
    CHECK(r.code == 2);
    CHECK(tapegrad::test::count_lines(r.err) == 1);
    CHECK(r.err.find(wanted) != std::string::npos);
    CHECK(r.out.empty());
  }
}
#endif
