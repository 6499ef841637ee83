#pragma once
// Building the run from the settings: what a --resume checkpoint says (architecture, task,
// vocabulary), the per-task defaults, the task itself, the model configuration and the
// held-out data. Everything here only reads: nothing touches --out, so a bad option or
// checkpoint costs nothing and leaves nothing behind.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/config_cli.hpp"
#include "apps/train/options.hpp"
#include "nn/io/npz.hpp"
#include "nn/transformer.hpp"
#include "tasks/tasks.hpp"

namespace tapegrad::train {

// The held-out set does not depend on --seed, so runs with different seeds (and a
// --resume) are evaluated on the same examples.
inline constexpr std::uint64_t kEvalSeed = 0x5eed0fe7a1ULL;

// What a --resume checkpoint or an --init-from folder holds besides its parameters.
struct ResumeSource {
  std::string path;
  std::string option = "--resume";  // or "--init-from": the option that named `path`
  std::string kept_json;            // a folder's config.json fields kept for --export-hf
  bool folder() const { return option == "--init-from"; }
  std::string label() const { return option + " " + path; }
  std::vector<NpzEntry> entries;  // the whole file, read once
  std::optional<TransformerConfig> config;
  std::string task;
  std::optional<tasks::TextCoder> coder;  // a text model's tokens
  // The windows a training checkpoint's run trained on (checkpoint_windows); none: the
  // model's context
  std::optional<std::size_t> windows;
  bool active() const { return config.has_value(); }
};

// Reads s.resume (nothing when it is empty; a directory stands for its newest training
// checkpoint) or the s.init_from folder and checks its task against the options; sets
// s.task to the checkpoint's task ("text" for a folder). UsageError on any problem.
ResumeSource read_resume_source(Settings& s);

// The task a run trains on: a sequence task, the repeat (induction) task or a text model.
struct TaskSetup {
  std::string name;
  std::optional<tasks::SequenceTask> seq;
  std::optional<tasks::RepeatTask> repeat;
  std::optional<tasks::TextTask> text;
  std::size_t context = 0, vocab = 0;
  // A hash of the --text file's bytes (0 for the built-in tasks): a training checkpoint
  // continues only on the text it was trained on.
  std::int64_t text_hash = 0;
  // The training batch of optimiser step `step` (0-based) drawn from `gen`.
  tasks::Batch train_batch(std::size_t batch, Generator& gen, std::size_t step) const;
  // Plain training inputs (no curriculum) for the start-up gradient check.
  tasks::Batch check_batch(std::size_t batch, Generator& gen) const;
};

// The task's defaults for every option the user left out; returns the model fields'
// defaults (d_model, heads, layers and the task's recipe) for ConfigOptions::build.
std::map<std::string, std::string> apply_task_defaults(Settings& s, const std::string& task,
                                                       const std::string& arch);

// Builds the task (reading --text), after checking the settings against each other and
// against what the task or the checkpoint fixes (--context, the recall options, the
// characters of --text and of --sample's --prompt, the repeat task's length and symbols).
TaskSetup build_task(Settings& s, const ResumeSource& resume);

// The checkpoint's configuration (every model option given must agree with it, but the
// objective's weights, which replace the checkpoint's with a notice in `notices` for each
// change), or the options' (with the task's vocab and context).
TransformerConfig build_config(const Settings& s, const TaskSetup& task, const ResumeSource& resume,
                           const apps::ConfigOptions& model_options,
                           const std::map<std::string, std::string>& model_defaults,
                           std::vector<std::string>& notices);

// --sample's --prompt read as examples/generate reads it (every character in the
// vocabulary, the tokens within the context): UsageError before any work otherwise.
void check_sample_prompt(const Settings& s, const TaskSetup& task, const TransformerConfig& config);

// The held-out data: eval_size examples (text: windows) in batches of eval_batch_size.
std::size_t eval_batch_size(const TaskSetup& task);
struct EvalData {
  std::vector<tasks::Batch> batches;
  std::vector<tasks::Example> examples;  // sequence tasks only (repeat: in the batches alone)
};
EvalData build_eval_data(const TaskSetup& task, std::size_t eval_size);

}  // namespace tapegrad::train
