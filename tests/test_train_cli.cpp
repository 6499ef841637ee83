// examples/train_tiny_transformer end to end: the binary is run through std::system.
// Usage errors exit 2 with one line on stderr and write nothing; a tiny run writes every
// output; the same seed reproduces the losses; --resume reproduces the eval loss exactly.
#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_TRAIN_BIN)
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "nn/io/checkpoint.hpp"
#include "ops/kernels/dispatch.hpp"  // bf16_products_are_fast
#include "json_file.hpp"
#include "run_program.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;

namespace {

using tapegrad::test::field;
using tapegrad::test::read_json;

using RunResult = tapegrad::test::ProgramRun;
using tapegrad::test::slurp;
fs::path scratch(const std::string& name) {
  return tapegrad::test::scratch_dir("test_train_cli", name);
}
// Runs the trainer with `args` (already shell-quoted where needed).
RunResult run(const std::string& args, const fs::path& dir) {
  return tapegrad::test::run_program(TAPEGRAD_TRAIN_BIN, args, dir);
}
std::size_t lines(const std::string& s) { return tapegrad::test::count_lines(s); }

const char* kTiny = "--d-model 16 --heads 2 --layers 1 --batch 8 --eval-size 40 --threads 1 --quiet";

// The runs that show an option learns sort train for 600 steps: seconds in the Release
// build, minutes each under AddressSanitizer. There they stop after 40 steps and check
// everything but the accuracy, which the Release build's run of the same test checks;
// what the sanitizers look for (every op of the option, forward and backward, the
// checkpoint) is exercised the same.
#ifdef __SANITIZE_ADDRESS__
constexpr bool kLearns = false;
#else
constexpr bool kLearns = true;
#endif
std::string until_learned() { return kLearns ? "" : " --steps 40 --warmup 4 --eval-size 100"; }
void check_learned(const nlohmann::json& metrics, double accuracy) {
  if (kLearns) CHECK(field(metrics, "eval_exact_accuracy").get<double>() >= accuracy);
}

}  // namespace

TEST_CASE("train cli: bad options and values exit 2 with one line and write nothing", "[train_cli]") {
  fs::path dir = scratch("usage");
  fs::path out = dir / "never";
  const std::string o = " --out '" + out.string() + "'";
  const char* cases[] = {
      "--bogus",                   // unknown option
      "--steps",                   // missing value
      "--steps abc",               // not a number
      "--steps -5",                // out of range
      "--lr 0",                    // out of range
      "--task copy",               // not a task
      "--norm batch",              // not a norm
      "--heads 3",                 // does not divide d_model 64
      "--warmup 50 --steps 10",    // warm-up longer than the run
      "--min-lr 0.1 --lr 0.01",    // min above peak
      "--text /nonexistent/input.txt",
      "--text /etc/hostname --task sort",
      "--sample 5",                // sampling needs a text model
      "--resume /nonexistent/model.npz",
      "extra_positional",
      "--task recall --recall-chain 1.5",       // a fraction above 1
      "--task recall --recall-chain nan",       // not finite
      "--task recall --recall-grow-steps -1",   // negative
      "--task recall --recall-grow-steps x",    // not a number
      "--task recall --recall-min-pairs 9",     // more pairs than the task has
      "--kv-heads 3",                           // does not divide heads 4
      "--arch llama --head-dim 5",              // rope needs an even head_dim
      "--arch mistral",                         // not a preset
      "--arch llama --rope-scaling linear --rope-factor 0",  // factor must be > 0
      "--arch llama --rope-scaling yarn",       // yarn needs --rope-original-context
      "--mlp swish",                            // not a feed-forward kind
      "--window -1",                            // negative
      "--no-scale --attention-scale 0.5",       // two scales
      "--mlp none --experts 2",                 // experts need a feed-forward
      "--repeat-length 8",                      // a repeat option on sort
      "--task repeat --repeat-length 1",        // too short to repeat
      "--task repeat --repeat-length 2 --repeat-symbols 4",  // 16 sequences: none held out
      "--task repeat --context 10",             // the repeat task fixes it (31)
  };
  for (const char* args : cases) {
    INFO(args);
    RunResult r = run(std::string(args) + o, dir);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find("train_tiny_transformer") == 0);
    CHECK(r.out.empty());
  }
  CHECK_FALSE(fs::exists(out));  // nothing written, not even the directory, before a
                                 // usage error found in the options themselves

  // An --out that cannot be a directory (it lies under a regular file).
  fs::path file = dir / "a_file";
  std::ofstream(file) << "x";
  RunResult r = run("--steps 1 --skip-gradcheck --out '" + (file / "sub").string() + "'", dir);
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("--out") != std::string::npos);

  // A damaged checkpoint is a usage error too, with a clear message.
  fs::path bad = dir / "bad.npz";
  std::ofstream(bad) << "PK\x03\x04 this is not a zip";
  RunResult b = run("--resume '" + bad.string() + "' --steps 0" + o, dir);
  CHECK(b.code == 2);
  CHECK(lines(b.err) == 1);
  CHECK(b.err.find("bad.npz") != std::string::npos);
}

TEST_CASE("train cli: --help documents every option and exits 0", "[train_cli]") {
  fs::path dir = scratch("help");
  RunResult r = run("--help", dir);
  CHECK(r.code == 0);
  for (const char* opt : {"--task", "--text", "--d-model", "--heads", "--layers", "--mlp-ratio",
                          "--arch", "--kv-heads", "--head-dim", "--mlp", "--mlp-hidden",
                          "--mlp-multiple", "--positions", "--rope-theta", "--rope-style",
                          "--rope-scaling", "--rope-factor", "--window", "--qk-norm",
                          "--tie-embeddings", "--norm-eps", "--attention-scale", "--attention-init",
                          "--norm", "--no-scale", "--batch", "--steps", "--lr", "--min-lr",
                          "--warmup", "--weight-decay", "--clip", "--seed", "--out", "--resume",
                          "--threads", "--skip-gradcheck", "--detect-anomaly", "--eval-every", "--quiet", "--sample",
                          "--temperature", "--top-p", "--prompt", "--recall-min-pairs",
                          "--recall-grow-steps", "--recall-dense-loss", "--recall-chain",
                          "--repeat-length", "--repeat-symbols"}) {
    INFO(opt);
    CHECK(r.out.find(opt) != std::string::npos);
  }
}

TEST_CASE("train cli: a tiny run writes its outputs and --resume reproduces eval loss", "[train_cli]") {
  fs::path dir = scratch("tiny");
  fs::path a = dir / "a", b = dir / "b", c = dir / "c";
  std::string common = std::string(kTiny) + " --steps 20 --warmup 5 --skip-gradcheck --seed 3";
  RunResult r1 = run(common + " --out '" + a.string() + "'", dir);
  INFO(r1.err);
  REQUIRE(r1.code == 0);
  for (const char* f : {"model.npz", "metrics.json", "loss.csv", "loss.svg"}) {
    INFO(f);
    CHECK(fs::is_regular_file(a / f));
  }
  const nlohmann::json metrics = read_json(a / "metrics.json");
  for (const char* key : {"task", "steps", "final_train_loss", "eval_loss", "eval_token_accuracy",
                          "eval_exact_accuracy", "train_seconds", "tokens_per_second",
                          "parameters", "seed", "d_model", "heads", "layers", "lr"}) {
    INFO(key);
    CHECK(metrics.contains(key));
    CHECK(!field(metrics, key).is_null());
  }
  CHECK(field(metrics, "task") == "sort");
  CHECK(field(metrics, "steps") == 20);
  CHECK(field(metrics, "seed") == 3);
  // d_model 16, 1 layer, vocab 11, context 16, mlp 4x: embeddings 11*16 + 16*16, block
  // 2*16 + 4*16*16 + 2*16 + (16*64 + 64) + (64*16 + 16), final norm 2*16, head 16*11
  CHECK(field(metrics, "parameters") == 176 + 256 + 32 + 1024 + 32 + 1088 + 1040 + 32 + 176);
  std::string csv = slurp(a / "loss.csv");
  CHECK(csv.rfind("step,loss,lr\n", 0) == 0);
  CHECK(lines(csv) == 21);
  std::string svg = slurp(a / "loss.svg");
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("class=\"series\"") != std::string::npos);
  // numpy-readable checkpoint, loadable by nn
  tapegrad::Transformer<float> model = tapegrad::load_checkpoint<float>((a / "model.npz").string());
  CHECK(model.config().d_model == 16);
  CHECK(model.config().vocab == 11);

  // Same seed, same losses, bit for bit.
  RunResult r2 = run(common + " --out '" + b.string() + "'", dir);
  REQUIRE(r2.code == 0);
  const nlohmann::json metrics2 = read_json(b / "metrics.json");
  CHECK(field(metrics2, "final_train_loss") == field(metrics, "final_train_loss"));
  CHECK(field(metrics2, "eval_loss") == field(metrics, "eval_loss"));
  CHECK(slurp(b / "loss.csv") == csv);

  // The checkpoint evaluates to the identical eval loss.
  RunResult r3 = run(std::string("--resume '") + (a / "model.npz").string() +
                         "' --steps 0 --eval-size 40 --threads 1 --quiet --out '" + c.string() + "'",
                     dir);
  INFO(r3.err);
  REQUIRE(r3.code == 0);
  const nlohmann::json metrics3 = read_json(c / "metrics.json");
  CHECK(field(metrics3, "eval_loss") == field(metrics, "eval_loss"));
  CHECK(field(metrics3, "eval_exact_accuracy") == field(metrics, "eval_exact_accuracy"));
  CHECK(field(metrics3, "task") == "sort");
  CHECK(field(metrics3, "steps") == 0);

  // Resuming with a different task is refused.
  RunResult r4 = run(std::string("--resume '") + (a / "model.npz").string() +
                         "' --task reverse --steps 0 --out '" + c.string() + "'", dir);
  CHECK(r4.code == 2);
  CHECK(lines(r4.err) == 1);
}

TEST_CASE("train cli: --detect-anomaly checks a healthy run without changing its numbers", "[train_cli]") {
  // Anomaly mode only inspects values and gradients: the same seed must give the same
  // losses bit for bit with and without it, and a finite run must not be stopped.
  fs::path dir = scratch("anomaly");
  std::string common = std::string(kTiny) + " --steps 8 --warmup 2 --skip-gradcheck --seed 5";
  RunResult plain = run(common + " --out '" + (dir / "plain").string() + "'", dir);
  RunResult checked = run(common + " --detect-anomaly --out '" + (dir / "checked").string() + "'", dir);
  INFO(plain.err << checked.err);
  REQUIRE(plain.code == 0);
  REQUIRE(checked.code == 0);
  CHECK(slurp(dir / "plain" / "loss.csv") == slurp(dir / "checked" / "loss.csv"));
  const nlohmann::json a = read_json(dir / "plain" / "metrics.json"),
                     b = read_json(dir / "checked" / "metrics.json");
  CHECK(field(a, "final_train_loss") == field(b, "final_train_loss"));
  CHECK(field(a, "eval_loss") == field(b, "eval_loss"));
}

TEST_CASE("train cli: recall takes its curriculum defaults and the options override them", "[train_cli]") {
  fs::path dir = scratch("recall_curriculum");
  RunResult d = run(std::string(kTiny) + " --task recall --steps 2 --warmup 0 --skip-gradcheck --out '" +
                        (dir / "defaults").string() + "'",
                    dir);
  INFO(d.err);
  REQUIRE(d.code == 0);
  const nlohmann::json m = read_json(dir / "defaults" / "metrics.json");
  CHECK(field(m, "recall_min_pairs") == 2);
  CHECK(field(m, "recall_chain") == 0.5);
  CHECK(field(m, "recall_dense_loss") == "on");
  CHECK(field(m, "recall_grow_steps") == 0);
  CHECK(field(m, "weight_decay") == 0);
  CHECK(field(m, "attention_init") == "variance_preserving");
  CHECK(field(m, "eval_sequences") == 40);  // evaluation unchanged: --eval-size

  RunResult o = run(std::string(kTiny) + " --task recall --steps 2 --warmup 0 --skip-gradcheck "
                        "--recall-min-pairs 8 --recall-chain 0 --no-recall-dense-loss "
                        "--recall-grow-steps 1 --weight-decay 0.01 --attention-init gpt2 --out '" +
                        (dir / "given").string() + "'",
                    dir);
  INFO(o.err);
  REQUIRE(o.code == 0);
  const nlohmann::json g = read_json(dir / "given" / "metrics.json");
  CHECK(field(g, "recall_min_pairs") == 8);
  CHECK(field(g, "recall_chain") == 0);
  CHECK(field(g, "recall_dense_loss") == "off");
  CHECK(field(g, "recall_grow_steps") == 1);
  CHECK(field(g, "attention_init") == "gpt2");
  // sort records no recall settings
  RunResult sr = run(std::string(kTiny) + " --steps 1 --warmup 0 --skip-gradcheck --out '" +
                         (dir / "sort").string() + "'",
                     dir);
  REQUIRE(sr.code == 0);
  CHECK(!read_json(dir / "sort" / "metrics.json").contains("recall_chain"));
}

TEST_CASE("train cli: the gradient check table covers every parameter tensor", "[train_cli]") {
  fs::path dir = scratch("gradcheck");
  RunResult r = run("--d-model 16 --heads 2 --layers 1 --batch 4 --steps 1 --warmup 0 "
                    "--eval-size 10 --threads 1 --task recall --out '" + (dir / "o").string() + "'",
                    dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (const char* name : {"tok_emb.weight", "pos_emb.weight", "blocks.0.attn.Wq",
                           "blocks.0.attn.Wo", "blocks.0.mlp.fc.bias", "norm_f.weight",
                           "head.weight"}) {
    INFO(name);
    CHECK(r.out.find(name) != std::string::npos);
  }
  CHECK(r.out.find("gradient check passed") != std::string::npos);
  CHECK(r.out.find(" NO\n") == std::string::npos);
  CHECK(field(read_json(dir / "o" / "metrics.json"), "gradcheck") == "passed");
}

TEST_CASE("train cli: a text model trains samples and resumes for sampling", "[train_cli]") {
  fs::path dir = scratch("text");
  // A quote, a backslash and a tab in the name: metrics.json must still parse and hold it.
  fs::path corpus = dir / "corpus \"quoted\" \\ \t.txt";
  {
    std::ofstream f(corpus, std::ios::binary);
    for (int i = 0; i < 60; ++i) f << "the quick brown fox jumps over the lazy dog. caf\xc3\xa9!\n";
  }
  fs::path a = dir / "a", b = dir / "b";
  RunResult r = run(std::string(kTiny) + " --text '" + corpus.string() +
                        "' --context 16 --steps 5 --warmup 1 --skip-gradcheck --sample 20 "
                        "--prompt the --out '" + a.string() + "'",
                    dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json metrics = read_json(a / "metrics.json");
  CHECK(field(metrics, "task") == "text");
  CHECK(field(metrics, "text_file") == corpus.string());
  CHECK(!field(metrics, "eval_loss").is_null());
  std::string sample = slurp(a / "sample.txt");
  CHECK(sample.rfind("the", 0) == 0);  // the prompt, then the continuation
  RunResult s = run("--resume '" + (a / "model.npz").string() +
                        "' --steps 0 --sample 10 --temperature 0 --threads 1 --quiet --out '" +
                        b.string() + "'",
                    dir);
  INFO(s.err);
  REQUIRE(s.code == 0);
  CHECK(fs::is_regular_file(b / "sample.txt"));
}
#endif

#if defined(TAPEGRAD_WITH_EXAMPLES) && defined(TAPEGRAD_TRAIN_BIN)
TEST_CASE("train cli: a bad model option names its field in one line", "[train_cli]") {
  fs::path dir = scratch("config_errors");
  const std::string o = " --out '" + (dir / "never").string() + "'";
  const std::pair<const char*, const char*> cases[] = {
      {"--heads 6 --d-model 48 --kv-heads 4", "heads=6 is not divisible by kv_heads=4"},
      {"--arch llama --head-dim 5", "head_dim=5"},
      {"--arch bogus", "--arch"},
      {"--arch llama --rope-scaling linear --rope-factor 0", "rope_factor=0"},
  };
  for (const auto& [args, wanted] : cases) {
    INFO(args);
    RunResult r = run(std::string(args) + o, dir);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find(wanted) != std::string::npos);
  }
}

TEST_CASE("train cli: --arch llama passes the start-up gradient check and trains", "[train_cli][llama]") {
  fs::path dir = scratch("llama");
  RunResult r = run(std::string(kTiny) + " --arch llama --qk-norm --window 5 --steps 3 --warmup 0 --out '" +
                        (dir / "out").string() + "'", dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json metrics = read_json(dir / "out" / "metrics.json");
  CHECK(field(metrics, "gradcheck") == "passed");
  CHECK(field(metrics, "positions") == "rope");
  CHECK(field(metrics, "mlp") == "swiglu");
  CHECK(field(metrics, "kv_heads") == 1);  // llama: heads 2 -> 1 K/V head
  const tapegrad::TransformerConfig c = tapegrad::read_checkpoint_config((dir / "out" / "model.npz").string());
  CHECK(c.qk_norm);
  CHECK(c.window == 5);
}

TEST_CASE("train cli: --arch mixtral with 4 experts, top 2, learns sort and reports its "
          "auxiliary losses beside the LM loss", "[train_cli][moe]") {
  fs::path dir = scratch("mixtral");
  RunResult r = run("--arch mixtral --experts 4 --experts-top-k 2 --threads 1 --quiet --out '" +
                        (dir / "out").string() + "'" + until_learned(), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json metrics = read_json(dir / "out" / "metrics.json");
  CHECK(field(metrics, "gradcheck") == "passed");
  CHECK(field(metrics, "experts") == 4);
  check_learned(metrics, 0.99);
  // the raw aux loss (about 1 or more per layer, k = 2 at balance), not in the LM loss
  const double aux = field(metrics, "final_moe_aux_loss").get<double>();
  CHECK(aux > 0.5);
  CHECK(aux < 5);
  CHECK(field(metrics, "final_moe_z_loss").get<double>() > 0);
  CHECK(field(metrics, "parameters_active").get<double>() <
        field(metrics, "parameters").get<double>());
  const tapegrad::TransformerConfig c = tapegrad::read_checkpoint_config((dir / "out" / "model.npz").string());
  CHECK(c.experts == 4);
  CHECK(c.experts_top_k == 2);
}

TEST_CASE("train cli: a mixture of experts reports its raw aux loss at --moe-aux-coef 0, and "
          "the final evaluation its expert load and training's dropped fraction",
          "[train_cli][moe]") {
  fs::path dir = scratch("mixtral-capacity");
  RunResult r = run(std::string(kTiny) + " --arch mixtral --experts 4 --moe-capacity 0.5 "
                    "--moe-aux-coef 0 --steps 3 --warmup 0 --skip-gradcheck --out '" +
                        (dir / "out").string() + "'", dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json metrics = read_json(dir / "out" / "metrics.json");
  // E * sum_e f_e P_e is k = 2 at balance and never 0: watched though not trained on
  CHECK(field(metrics, "final_moe_aux_loss").get<double>() > 0.5);
  const std::size_t held_out = r.out.find("held-out");
  REQUIRE(held_out != std::string::npos);
  const std::string final_report = r.out.substr(held_out);
  CHECK(final_report.find("layer 0 expert load: max") != std::string::npos);
  CHECK(final_report.find("dropped in training") != std::string::npos);
}

TEST_CASE("train cli: --positions alibi learns sort with the default settings", "[train_cli][alibi]") {
  // no positional table and no rotation: the order comes from the causal mask and ALiBi's
  // distance penalty alone
  fs::path dir = scratch("alibi");
  RunResult r = run("--positions alibi --quiet --out '" + (dir / "out").string() + "'" + until_learned(), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json metrics = read_json(dir / "out" / "metrics.json");
  CHECK(field(metrics, "gradcheck") == "passed");
  CHECK(field(metrics, "positions") == "alibi");
  check_learned(metrics, 0.99);
  CHECK(tapegrad::read_checkpoint_config((dir / "out" / "model.npz").string()).positions ==
        tapegrad::PositionKind::alibi);
}

TEST_CASE("train cli: --precision bf16 learns sort and writes a float32 checkpoint that matches f32's evaluation", "[train_cli][bf16]") {
  fs::path dir = scratch("bf16");
  RunResult r = run("--precision bf16 --quiet --out '" + (dir / "out").string() + "'" + until_learned(), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json metrics = read_json(dir / "out" / "metrics.json");
  CHECK(field(metrics, "precision") == "bf16");
  CHECK(field(metrics, "gradcheck") == "passed");  // float64: bf16 does not touch it
  check_learned(metrics, 0.99);
  // the warning that bf16 runs at float32's speed: once where no faster instruction is used,
  // never where it is
  std::size_t warnings = 0;
  for (std::size_t at = r.err.find("bf16's results, no faster than float32"); at != std::string::npos;
       at = r.err.find("bf16's results, no faster than float32", at + 1))
    ++warnings;
  CHECK(warnings == (tapegrad::kernels::bf16_products_are_fast() ? 0u : 1u));
  // the checkpoint holds float32 weights: evaluated in f32 it still sorts
  RunResult again = run("--resume '" + (dir / "out" / "model.npz").string() +
                            "' --steps 0 --eval-size 200 --quiet --out '" + (dir / "f32").string() + "'",
                        dir);
  INFO(again.err);
  REQUIRE(again.code == 0);
  const nlohmann::json f32 = read_json(dir / "f32" / "metrics.json");
  CHECK(field(f32, "precision") == "f32");
  check_learned(f32, 0.98);
}

TEST_CASE("train cli: a checkpoint of format 1 evaluates to the loss its own run reported", "[train_cli][checkpoint]") {
  // tests/fixtures/checkpoints/README.md: the run that wrote it reported this eval loss
  fs::path dir = scratch("v1");
  const std::string file = std::string(TAPEGRAD_FIXTURES_DIR) + "/checkpoints/format1/sort_gpt2.npz";
  RunResult r = run("--resume '" + file + "' --steps 0 --eval-size 50 --threads 1 --quiet --out '" +
                        (dir / "out").string() + "'", dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const double loss = field(read_json(dir / "out" / "metrics.json"), "eval_loss").get<double>();
  CHECK(loss == Approx(1.9032962322235107).epsilon(1e-6));
}
TEST_CASE("train cli: --mlp none trains an attention-only model", "[train_cli][attention_only]") {
  fs::path dir = scratch("attention_only");
  RunResult r = run(std::string(kTiny) + " --mlp none --steps 3 --warmup 0 --out '" +
                        (dir / "out").string() + "'", dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json metrics = read_json(dir / "out" / "metrics.json");
  CHECK(field(metrics, "gradcheck") == "passed");
  CHECK(field(metrics, "mlp") == "none");
  // sort (vocab 11, context 16), d_model 16, one layer: token and position embeddings,
  // norm1 (gain, bias), Wq Wk Wv Wo, the final norm and the head; no norm2, no MLP
  CHECK(field(metrics, "parameters") == 11 * 16 + 16 * 16 + 2 * 16 + 4 * 16 * 16 + 2 * 16 + 16 * 11);
  CHECK(tapegrad::read_checkpoint_config((dir / "out" / "model.npz").string()).mlp ==
        tapegrad::MlpKind::none);
}

TEST_CASE("train cli: --task repeat --mlp none --layers 2 trains and reports each half's loss",
          "[train_cli][repeat]") {
  fs::path dir = scratch("repeat");
  RunResult r = run("--task repeat --mlp none --layers 2 --d-model 16 --heads 2 --repeat-length 8 "
                    "--repeat-symbols 16 --batch 8 --eval-size 40 --steps 5 --warmup 0 "
                    "--eval-every 2 --threads 1 --quiet --out '" + (dir / "out").string() + "'",
                    dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("held-out repeat halves: first half loss") != std::string::npos);
  const nlohmann::json metrics = read_json(dir / "out" / "metrics.json");
  CHECK(field(metrics, "task") == "repeat");
  CHECK(field(metrics, "gradcheck") == "passed");
  CHECK(field(metrics, "repeat_length") == 8);
  CHECK(field(metrics, "repeat_symbols") == 16);
  CHECK(field(metrics, "eval_sequences") == 40);
  CHECK(field(metrics, "eval_tokens") == 40 * 15);  // every position of every sequence
  // vocab 16, context 15, two attention-only layers of d_model 16
  CHECK(field(metrics, "parameters") ==
        16 * 16 + 15 * 16 + 2 * (2 * 16 + 4 * 16 * 16) + 2 * 16 + 16 * 16);
  const double first = field(metrics, "eval_first_half_loss").get<double>();
  const double second = field(metrics, "eval_second_half_loss").get<double>();
  CHECK(field(metrics, "eval_first_half_chance_loss").get<double>() == Approx(std::log(16.0)));
  // 7 first-half and 8 second-half positions: the whole loss is their weighted mean
  CHECK(field(metrics, "eval_loss").get<double>() == Approx((7 * first + 8 * second) / 15).epsilon(1e-4));
  // 5 steps learn nothing yet: both halves are still near chance, log 16 = 2.77
  CHECK(first > 2.0);
  CHECK(second > 2.0);

  // --resume takes the length and symbols from the checkpoint and evaluates the same
  RunResult e = run("--task repeat --resume '" + (dir / "out" / "model.npz").string() +
                    "' --steps 0 --eval-size 40 --threads 1 --quiet --out '" +
                    (dir / "eval").string() + "'", dir);
  INFO(e.err);
  REQUIRE(e.code == 0);
  const nlohmann::json again = read_json(dir / "eval" / "metrics.json");
  CHECK(field(again, "repeat_length") == 8);
  CHECK(field(again, "eval_second_half_loss") == field(metrics, "eval_second_half_loss"));
  RunResult d = run("--task repeat --resume '" + (dir / "out" / "model.npz").string() +
                    "' --repeat-length 9 --steps 0 --out '" + (dir / "never").string() + "'", dir);
  CHECK(d.code == 2);
  CHECK(d.err.find("--repeat-length 9 disagrees with the checkpoint's 8") != std::string::npos);
}
#endif
