#pragma once
// The trainer's settings: every option of train_tiny_transformer that is not a model field
// (those come from apps/common/config_cli), the per-task defaults for the options the
// user left out, and the usage error the program reports with exit code 2.
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/common/config_cli.hpp"
#include "apps/common/run_options.hpp"

namespace tapegrad::train {

inline constexpr const char* kProgram = "train_tiny_transformer";

// A user error: one line on stderr, exit code 2. The shared type, so that the checks of
// apps/common/run_options.hpp are reported the same way.
using apps::UsageError;

struct Settings {
  // task
  std::string task = "sort";
  std::string text;
  std::size_t context = 64;  // --text only; the sequence tasks fix their own
  std::string tokenizer = "char";  // --text: char, bpe (trained on the text) or a tokenizer file
  std::size_t vocab_size = 512;    // --tokenizer bpe
  std::string bpe_mode = "regex";  // --tokenizer bpe
  std::size_t recall_min_pairs = 8;
  std::size_t recall_grow_steps = 0;
  bool recall_dense_loss = false;
  double recall_chain = 0;
  std::size_t repeat_length = 16, repeat_symbols = 32;  // the repeat task's (tasks::RepeatTask)
  // optimiser
  std::size_t batch = 64, steps = 600, warmup = 50;
  std::size_t grad_accum = 1;  // micro-batches per step (accumulate_gradients)
  double lr = 3e-3, min_lr = 3e-4, weight_decay = 0.01, clip = 1.0;
  double beta1 = 0.9, beta2 = 0.99;
  std::uint64_t seed = 1;
  // run
  std::string out = "out/train";
  std::string resume;
  std::string init_from;  // a Hugging Face folder to fine-tune
  std::string export_hf;  // a folder to write the trained model to, as Hugging Face reads it
  std::size_t checkpoint_every = 0;
  std::size_t stop_at = 0;
  bool allow_nonfinite = false;
  std::optional<double> max_memory;  // bytes; none: the memory available
  int threads = 1;
  std::string precision = "f32";  // f32 | bf16: the float32 matrix products' (kernels/precision.hpp)
  bool skip_gradcheck = false;
  bool detect_anomaly = false;
  std::size_t eval_every = 0, eval_size = 1000, log_every = 50, examples = 5;
  bool quiet = false;
  // sampling (--text)
  std::size_t sample = 0;
  double temperature = 0.8, top_p = 0.95;
  std::string prompt;

  // The options the user gave on the command line ("--steps", ...): the others may take
  // per-task defaults or a training checkpoint's values.
  std::set<std::string> given_options;
  bool given(const std::string& option) const { return given_options.count(option) > 0; }
  bool text_mode() const { return !text.empty(); }
};

// The options of the "Task" group, added before the model's options so --help lists them
// first.
void add_task_options(CLI::App& app, Settings& s);
// The optimisation, run and sampling groups.
void add_training_options(CLI::App& app, Settings& s);

// Per-task defaults for the options the user did not give (see docs/TRAINING.md).
struct TaskDefaults {
  std::size_t d_model, heads, layers, batch, steps, warmup;
  double lr, min_lr;
};
TaskDefaults defaults_for(const std::string& task);

// --help shows the defaults that apply: the sort value, then each task's that differs.
void show_task_defaults(CLI::App& app, apps::ConfigOptions& model);

}  // namespace tapegrad::train
