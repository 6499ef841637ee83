#include "apps/train/options.hpp"

#include <fmt/format.h>

#include "apps/common/cli.hpp"
#include "apps/common/memory_budget.hpp"
#include "apps/common/model_file.hpp"
#include "platform/format_bytes.hpp"
#include "platform/file_io.hpp"

namespace tapegrad::train {

void add_task_options(CLI::App& app, Settings& s) {
  auto* group = "Task";
  app.add_option("--task", s.task, "built-in task: sort (8 tokens over 10 symbols -> sorted), "
                 "reverse (12 tokens -> reversed), recall (8 key-value pairs, then a key -> its "
                 "value), repeat (random tokens, then the same again: induction; the held-out "
                 "loss is also reported on each half)")
      ->check(CLI::IsMember({"sort", "reverse", "recall", "repeat"}))->group(group);
  app.add_option("--text", s.text, "train a language model on this UTF-8 file, a regular file "
                 "of at most " + format_bytes(double(kMaxTextBytes)) + " (first 90% of its bytes train, last 10% eval)")
      ->group(group);
  app.add_option("--tokenizer", s.tokenizer, "--text: char (one token per character, the "
                 "vocabulary its distinct code points; default), bpe (byte-level BPE trained on "
                 "the training part), a tokenizer file written by the tokenizer program, a "
                 "tokenizer.json or a folder holding one")
      ->group(group);
  app.add_option("--vocab-size", s.vocab_size, "--tokenizer bpe: 256 byte tokens plus the merges "
                 "(default 512)")
      ->check(CLI::Range(std::size_t(256), std::size_t(65536)))->group(group);
  app.add_option("--bpe-mode", s.bpe_mode, "--tokenizer bpe: regex (chunks by the GPT-4 split "
                 "pattern; default) or basic (the whole text one sequence)")
      ->check(CLI::IsMember({"regex", "basic"}))->group(group);
  app.add_option("--context", s.context, "--text: tokens per training window")
      ->check(CLI::Range(std::size_t(2), std::size_t(4096)))->group(group);
  app.add_option("--recall-min-pairs", s.recall_min_pairs,
                 "recall: training inputs hold between this many and 8 distinct pairs (repeats "
                 "fill the 8 slots; recall default 2); evaluation always uses 8 distinct pairs")
      ->check(CLI::Range(std::size_t(1), std::size_t(8)))->group(group);
  app.add_option("--recall-grow-steps", s.recall_grow_steps,
                 "recall: growing curriculum; the most distinct pairs a training input may hold "
                 "rises in equal stages from --recall-min-pairs to 8 over this many steps (0: off)")
      ->check(CLI::Range(std::size_t(0), std::size_t(100000000)))->group(group);
  app.add_flag("--recall-dense-loss,!--no-recall-dense-loss", s.recall_dense_loss,
               "recall (default on): every repeated key of a training input, the query "
               "included, also learns to predict that key's value at its repeat")
      ->group(group);
  app.add_option("--recall-chain", s.recall_chain,
                 "recall: this fraction of training inputs have keys in a fixed order (each key "
                 "+5 mod 16 of the one before) and also learn to predict each next key at the "
                 "value before it, which grows the previous-token head recall needs (recall default 0.5)")
      ->check(apps::finite_range(0.0, 1.0))->group(group);
  app.add_option("--repeat-length", s.repeat_length,
                 "repeat: random tokens in each half (the context is twice this, minus 1)")
      ->check(CLI::Range(std::size_t(2), std::size_t(2048)))->group(group);
  app.add_option("--repeat-symbols", s.repeat_symbols,
                 "repeat: the vocabulary the random tokens are drawn from, uniformly")
      ->check(CLI::Range(std::size_t(2), std::size_t(65536)))->group(group);
  app.add_option("--eval-size", s.eval_size, "held-out sequences (text: windows) to evaluate")
      ->check(CLI::Range(std::size_t(1), std::size_t(1000000)))->group(group);
}

namespace {

void add_optimisation_options(CLI::App& app, Settings& s) {
  auto* group = "Optimisation (AdamW, warm-up + cosine)";
  app.add_option("--batch", s.batch, "sequences per step (default per task)")
      ->check(CLI::Range(std::size_t(1), std::size_t(65536)))->group(group);
  app.add_option("--grad-accum", s.grad_accum, "gradient accumulation: each step's --batch runs as "
                 "this many micro-batches, one after another, their gradients summed (the "
                 "whole batch's step, with one micro-batch's activations in memory); it must "
                 "divide --batch (per rank with --data-parallel)")
      ->check(CLI::Range(std::size_t(1), std::size_t(65536)))->group(group);
  app.add_option("--steps", s.steps, "optimiser steps (default per task; 0 with --resume: evaluate only)")
      ->check(CLI::Range(std::size_t(0), std::size_t(100000000)))->group(group);
  app.add_option("--lr", s.lr, "peak learning rate")
      ->check(apps::finite_range(1e-8, 10.0))->group(group);
  app.add_option("--min-lr", s.min_lr, "final learning rate of the cosine decay")
      ->check(apps::finite_range(0.0, 10.0))->group(group);
  app.add_option("--warmup", s.warmup, "linear warm-up steps")
      ->check(CLI::Range(std::size_t(0), std::size_t(100000000)))->group(group);
  app.add_option("--weight-decay", s.weight_decay, "AdamW decoupled weight decay (matrices only; recall default 0)")
      ->check(apps::finite_range(0.0, 10.0))->group(group);
  app.add_option("--beta1", s.beta1, "AdamW beta1")->check(apps::finite_range(0.0, 0.999999))->group(group);
  app.add_option("--beta2", s.beta2, "AdamW beta2")->check(apps::finite_range(0.0, 0.999999))->group(group);
  app.add_option("--clip", s.clip, "clip the global gradient norm to this (0: off)")
      ->check(apps::finite_range(0.0, 1e6))->group(group);
  app.add_option("--seed", s.seed, "seed of the initialisation and of the training data")
      ->check(apps::unsigned_integer())->group(group);
}

void add_run_options(CLI::App& app, Settings& s) {
  auto* group = "Run";
  app.add_option("--out", s.out, "output directory")->group(group);
  app.add_option("--resume", s.resume, "continue from this training checkpoint (ckpt-*.npz, or a "
                 "directory: its newest), or start from the weights of a model.npz; its "
                 "architecture, task and settings take the place of the options not given")
      ->group(group);
  app.add_option("--init-from", s.init_from, "fine-tune the model of this Hugging Face folder "
                 "(config.json, model.safetensors, tokenizer.json) on --text: its architecture "
                 "and tokenizer take the place of the model options; --context may shorten the "
                 "training windows")
      ->group(group);
  app.add_option("--export-hf", s.export_hf, "also write the trained model (and a BPE model's "
                 "tokenizer) to this folder as Hugging Face's from_pretrained reads it")
      ->group(group);
  app.add_option("--checkpoint-every", s.checkpoint_every, "write a training checkpoint "
                 "(ckpt-<step>.npz in --out, the last two kept) every N steps and at the end "
                 "(0: only on SIGINT/SIGTERM and --stop-at; --resume: the checkpoint's interval)")
      ->check(CLI::Range(std::size_t(0), std::size_t(100000000)))->group(group);
  app.add_option("--stop-at", s.stop_at, "stop after this step of the run: write a training "
                 "checkpoint and exit 0 (a run in slices; 0: off)")
      ->check(CLI::Range(std::size_t(0), std::size_t(100000000)))->group(group);
  apps::add_allow_nonfinite_option(app, s.allow_nonfinite, group);
  apps::add_max_memory_option(app, s.max_memory, group);
  app.add_option("--threads", s.threads, "threads for tapegrad's kernels and BLAS (0: all cores; 1 is fastest for the small default models)")
      ->check(CLI::Range(0, 256))->group(group);
  apps::add_precision_option(app, s.precision, group);
  app.add_flag("--skip-gradcheck", s.skip_gradcheck, "do not check gradients before training")
      ->group(group);
  app.add_flag("--detect-anomaly", s.detect_anomaly, "check every op's output and gradient for "
               "NaN/Inf while training and stop at the first, naming the op (slower)")
      ->group(group);
  app.add_option("--eval-every", s.eval_every, "evaluate on held-out data every N steps (0: at the end only)")
      ->check(CLI::Range(std::size_t(0), std::size_t(100000000)))->group(group);
  app.add_option("--log-every", s.log_every, "progress line every N steps when stderr is not a terminal")
      ->check(CLI::Range(std::size_t(1), std::size_t(100000000)))->group(group);
  app.add_option("--examples", s.examples, "held-out examples to print with their prediction")
      ->check(CLI::Range(std::size_t(0), std::size_t(1000)))->group(group);
  app.add_flag("--quiet", s.quiet, "no progress line, gradient table or examples")->group(group);
}

void add_sampling_options(CLI::App& app, Settings& s) {
  auto* group = "Sampling (text models)";
  app.add_option("--sample", s.sample, "characters to generate after training")
      ->check(CLI::Range(std::size_t(0), std::size_t(1000000)))->group(group);
  app.add_option("--temperature", s.temperature, "sampling temperature (0: greedy)")
      ->check(apps::finite_range(0.0, 100.0))->group(group);
  app.add_option("--top-p", s.top_p, "nucleus sampling: keep the most likely tokens up to this mass")
      ->check(apps::finite_range(1e-6, 1.0))->group(group);
  app.add_option("--prompt", s.prompt, "text to continue (default: a newline)")->group(group);
}

}  // namespace

void add_training_options(CLI::App& app, Settings& s) {
  add_optimisation_options(app, s);
  add_run_options(app, s);
  add_sampling_options(app, s);
}

TaskDefaults defaults_for(const std::string& task) {
  if (task == "reverse") return {64, 4, 2, 64, 300, 30, 3e-3, 3e-4};
  if (task == "recall") return {64, 1, 3, 64, 12000, 200, 3e-3, 3e-4};
  if (task == "text") return {128, 4, 2, 32, 1000, 100, 3e-3, 3e-4};
  if (task == "repeat") return {64, 4, 2, 64, 1000, 50, 3e-3, 3e-4};
  return {64, 4, 2, 64, 600, 50, 3e-3, 3e-4};  // sort
}

void show_task_defaults(CLI::App& app, apps::ConfigOptions& model) {
  const std::vector<std::string> tasks = {"sort", "reverse", "recall", "repeat", "text"};
  auto per_task = [&](auto value) {
    std::vector<std::pair<std::string, std::string>> values;
    for (const std::string& t : tasks) values.emplace_back(t, fmt::format("{}", value(defaults_for(t))));
    return apps::per_case_default(values);
  };
  app.get_option("--batch")->default_str(per_task([](const TaskDefaults& d) { return d.batch; }));
  app.get_option("--steps")->default_str(per_task([](const TaskDefaults& d) { return d.steps; }) +
                                        " (--arch mixtral, bloom on sort 1000)");
  app.get_option("--warmup")->default_str(
      per_task([](const TaskDefaults& d) { return d.warmup; }) + ", at most --steps/5");
  app.get_option("--lr")->default_str(per_task([](const TaskDefaults& d) { return d.lr; }) +
                                      " (--arch llama on sort, reverse 0.004; --arch bloom on sort 0.006)");
  app.get_option("--min-lr")->default_str(per_task([](const TaskDefaults& d) { return d.min_lr; }));
  app.get_option("--weight-decay")->default_str("0.01 (recall 0)");
  // the recall-only options show recall's defaults, the ones that apply
  app.get_option("--recall-min-pairs")->default_str("2");
  app.get_option("--recall-chain")->default_str("0.5");
  app.get_option("--recall-dense-loss")->default_str("on");
  model.show_default("d_model", per_task([](const TaskDefaults& d) { return d.d_model; }));
  model.show_default("heads", per_task([](const TaskDefaults& d) { return d.heads; }));
  model.show_default("layers", per_task([](const TaskDefaults& d) { return d.layers; }));
  model.show_default("attention_init", "gpt2 (recall variance_preserving)");
  model.show_default("qk_norm", "off (--arch llama on sort, reverse: on)");
  model.show_default("rope_theta", "10000 (--arch llama on sort, reverse: 100)");
}

}  // namespace tapegrad::train
