#include "apps/train/setup.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "apps/common/cli.hpp"
#include "apps/common/text_prompt.hpp"
#include "tasks/evaluate.hpp"
#include "apps/train/checkpoints.hpp"
#include "nn/io/checkpoint.hpp"
#include "platform/file_io.hpp"
#include "nn/io/pretrained.hpp"
#include "apps/common/model_source.hpp"
#include "text/tokenizer_json.hpp"

namespace tapegrad::train {

using apps::one_line;
using tasks::SequenceTask;
using tasks::TextCoder;
using tasks::TextTask;

namespace {

// The tokens of --tokenizer: a file, or char or bpe built from the training part.
TextCoder build_text_coder(const Settings& s, const std::string& content) {
  if (s.tokenizer == "char") return TextCoder::characters_of(content);
  if (s.tokenizer != "bpe") return TextCoder::bpe(text::read_tokenizer_file(s.tokenizer));
  const std::string train_part = content.substr(0, TextTask::held_out_start(content));
  try {
    return TextCoder::bpe(text::BpeTokenizer::train(train_part, int(s.vocab_size),
                                                    text::parse_bpe_mode(s.bpe_mode)));
  } catch (const std::invalid_argument& e) {
    throw UsageError("--tokenizer bpe --vocab-size " + std::to_string(s.vocab_size) + ": " +
                     one_line(e.what()));
  }
}

// --vocab-size and --bpe-mode shape a tokenizer this run trains: refused anywhere else.
void check_tokenizer_options(const Settings& s, const ResumeSource& resume) {
  const bool trains_bpe = s.tokenizer == "bpe" && !resume.active();
  for (const char* option : {"--vocab-size", "--bpe-mode"})
    if (s.given(option) && !trains_bpe)
      throw UsageError(std::string(option) + (resume.active()
                           ? " would train a new tokenizer: --resume keeps the checkpoint's"
                           : " applies to --tokenizer bpe only"));
  if (s.given("--tokenizer") && !s.text_mode())
    throw UsageError("--tokenizer applies to --text only");
  if (!resume.active() || !s.given("--tokenizer") || !resume.coder) return;
  const bool wants_bpe = s.tokenizer != "char";
  if (wants_bpe != resume.coder->is_bpe())
    throw apps::disagreement("--tokenizer", s.tokenizer, std::string("the checkpoint's ") +
                                 resume.coder->kind() + " tokens");
  if (s.tokenizer == "char" || s.tokenizer == "bpe") return;
  std::string given;
  try {
    given = text::saved_tokenizer(text::read_tokenizer_file(s.tokenizer)).contents;
  } catch (const std::exception& e) {
    throw UsageError(one_line(e.what()));
  }
  if (given != text::saved_tokenizer(*resume.coder->tokenizer()).contents)
    throw apps::disagreement("--tokenizer", s.tokenizer, "the checkpoint's tokenizer");
}

TextTask build_text_task(const Settings& s, const ResumeSource& resume, std::int64_t& hash) {
  std::size_t ctx = resume.active() ? resume.windows.value_or(resume.config->context) : s.context;
  if (resume.folder()) {  // fine-tuning may train on windows shorter than the model's context
    if (s.given("--context") && s.context > ctx)
      throw UsageError("--context " + std::to_string(s.context) + " exceeds " + resume.label() +
                       "'s context " + std::to_string(ctx));
    ctx = std::min(ctx, s.context);
  } else if (resume.active() && s.given("--context") && s.context != ctx)
    throw apps::disagreement("--context", std::to_string(s.context),
                                 "the checkpoint's context " + std::to_string(ctx));
  if (!s.text_mode()) return TextTask::vocabulary_only(resume.coder.value_or(TextCoder()), ctx);
  const std::string content = read_text_file(s.text, "--text " + s.text);
  if (const std::string why = tasks::text_warning(content); !why.empty())
    std::fprintf(stderr, "%s: warning: --text %s: %s\n", kProgram, s.text.c_str(), why.c_str());
  hash = std::int64_t(tasks::hash_tokens(std::vector<std::int64_t>(content.begin(), content.end())));
  if (!resume.coder) return TextTask::from_string(content, ctx, build_text_coder(s, content));
  if (!resume.coder->is_bpe())  // the checkpoint's characters must read every character
    apps::require_known_characters(resume.coder->characters(), content, "--text " + s.text,
                                       "the checkpoint's");
  return TextTask::from_string(content, ctx, *resume.coder);
}

// A task's own options on another task would be ignored: refused instead.
void check_task_options(const Settings& s, const std::string& task) {
  if (task != "recall")
    for (const char* option : {"--recall-min-pairs", "--recall-grow-steps",
                               "--recall-dense-loss", "--recall-chain"})
      if (s.given(option)) throw UsageError(std::string(option) + " applies to the recall task only");
  if (task != "repeat")
    for (const char* option : {"--repeat-length", "--repeat-symbols"})
      if (s.given(option)) throw UsageError(std::string(option) + " applies to the repeat task only");
}

// The options' length and symbols, or a checkpoint's (its context is 2 * length - 1, its
// vocabulary the symbols): an option given must agree with the checkpoint.
tasks::RepeatTask build_repeat_task(const Settings& s, const ResumeSource& resume) {
  std::size_t length = s.repeat_length, symbols = s.repeat_symbols;
  if (resume.active()) {
    const std::size_t fixed_length = (resume.config->context + 1) / 2;
    const std::size_t fixed_symbols = resume.config->vocab;
    if (s.given("--repeat-length") && length != fixed_length)
      throw apps::disagreement("--repeat-length", std::to_string(length),
                                   "the checkpoint's " + std::to_string(fixed_length));
    if (s.given("--repeat-symbols") && symbols != fixed_symbols)
      throw apps::disagreement("--repeat-symbols", std::to_string(symbols),
                                   "the checkpoint's " + std::to_string(fixed_symbols));
    length = fixed_length;
    symbols = fixed_symbols;
  }
  try {
    return tasks::RepeatTask(length, symbols);
  } catch (const std::exception& e) {
    throw UsageError("--repeat-length " + std::to_string(length) + " --repeat-symbols " +
                     std::to_string(symbols) + ": " + one_line(e.what()));
  }
}

// The objective's weights given on --resume replace the checkpoint's, each change with its
// notice; one that changes nothing in `c`'s model (a dense one) is refused, as when building.
void apply_given_objective(TransformerConfig& c, const apps::ConfigOptions& model_options,
                           std::vector<std::string>& notices) {
  TransformerConfig changed = c;
  std::map<std::string, std::string> given;
  try {
    given = model_options.given_objective(c);
    for (const auto& [field, text] : given) set_field_from_string(changed, field, text);
    changed.validate();
  } catch (const std::exception& e) {
    throw UsageError(one_line(e.what()));
  }
  const auto inapplicable = inapplicable_given_field(
      changed, [&](const std::string& field) { return given.count(field) > 0; },
      apps::option_name);
  if (inapplicable) throw UsageError(*inapplicable);
  for (const auto& [field, text] : given)
    if (field_to_string(c, field) != text)
      notices.push_back(override_notice(apps::option_name(field), field_to_string(c, field), text));
  c = changed;
}

// --resume DIR: the newest training checkpoint in it.
std::string resume_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path;
  const std::vector<std::string> found = list_checkpoints(path);
  if (found.empty()) throw UsageError("--resume " + path + ": the directory holds no training checkpoint (ckpt-*.npz)");
  return found.back();
}

}  // namespace

namespace {

// --init-from DIR: the folder's config and tokenizer; its weights are read with the model.
ResumeSource read_init_folder(const Settings& s) {
  ResumeSource r;
  r.path = s.init_from;
  r.option = "--init-from";
  if (!s.resume.empty()) throw UsageError("--init-from and --resume: give one");
  if (!is_pretrained_folder(s.init_from))
    throw UsageError(r.label() + ": not a Hugging Face model folder (no config.json); "
                     "--resume starts from a checkpoint");
  if (!s.text_mode()) throw UsageError(r.label() + ": fine-tuning needs --text FILE");
  if (s.given("--tokenizer"))
    throw UsageError("--tokenizer: --init-from reads the folder's tokenizer.json");
  try {
    const std::string file = (std::filesystem::path(s.init_from) / "config.json").string();
    HfModelConfig hf = hf_config_from_json(read_text_file(file, file), file);
    r.config = hf.config;
    r.kept_json = hf.kept_json;
    r.coder = apps::folder_text_coder(s.init_from);
  } catch (const std::exception& e) {
    throw UsageError(r.label() + ": " + one_line(e.what()));
  }
  if (!r.coder) throw UsageError(r.label() + ": the folder has no tokenizer.json to read --text with");
  r.task = "text";
  return r;
}

}  // namespace

ResumeSource read_resume_source(Settings& s) {
  if (!s.init_from.empty()) {
    ResumeSource r = read_init_folder(s);
    s.task = r.task;
    return r;
  }
  ResumeSource r;
  if (s.resume.empty()) return r;
  s.resume = resume_file(s.resume);
  r.path = s.resume;
  try {
    r.entries = load_npz(s.resume);
    r.config = config_from_entries(r.entries, s.resume);
    r.task = tasks::task_from_entries(r.entries);
    r.coder = tasks::text_coder_from_entries(r.entries, s.resume);
  } catch (const std::exception& e) {
    throw UsageError("--resume " + s.resume + ": " + one_line(e.what()));
  }
  if (r.task.empty()) r.task = "sort";  // a checkpoint written elsewhere
  const std::string wanted = s.text_mode() ? "text" : s.given("--task") ? s.task : r.task;
  if (wanted != r.task) {
    throw UsageError("--resume " + s.resume + " was trained on task '" + r.task + "', not '" +
                     wanted + "'");
  }
  s.task = r.task;
  return r;
}

std::map<std::string, std::string> apply_task_defaults(Settings& s, const std::string& task,
                                                       const std::string& arch) {
  TaskDefaults d = defaults_for(task);
  std::map<std::string, std::string> model_defaults = {{"d_model", std::to_string(d.d_model)},
                                                       {"heads", std::to_string(d.heads)},
                                                       {"layers", std::to_string(d.layers)}};
  if ((arch == "llama" || arch == "mixtral") && (task == "sort" || task == "reverse")) {
    // The toy Llama recipe (docs/TRAINING.md, "--arch llama"): in 300-600 steps the plain
    // preset reached 0.98-0.99 on sort and 0.10-0.34 on reverse; QK-norm, a RoPE base that
    // suits a context of 16-24 positions and a slightly higher peak rate reached >= 0.997
    // on both for seeds 1-3, keeping GQA.
    model_defaults["qk_norm"] = "true";
    model_defaults["rope_theta"] = "100";
    d.lr = 4e-3;
  }
  // Each expert trains on about k/E of the tokens: at sort's 600 steps a 4-expert model
  // ended between 0.989 and 0.996 depending on the seed and the CPU's kernels; 1000 steps
  // reached 0.997-1.000.
  if (arch == "mixtral" && task == "sort") d.steps = 1000;
  // BLOOM's LayerNorm on the embeddings starts the residual stream at unit scale, far above
  // the blocks' first outputs: at sort's 600 steps and 3e-3 the preset ended at 0.955-0.985
  // exact (seeds 1-3), the same model without that norm at 0.993-1.000; 1000 steps at 6e-3
  // reached 0.996-1.000 (docs/TRAINING.md, "--arch gemma2 and --arch bloom").
  if (arch == "bloom" && task == "sort") {
    d.steps = 1000;
    d.lr = 6e-3;
  }
  if (!s.given("--batch")) s.batch = d.batch;
  if (!s.given("--steps")) s.steps = d.steps;
  if (!s.given("--warmup")) s.warmup = std::min(d.warmup, s.steps / 5);
  if (!s.given("--lr")) s.lr = d.lr;
  if (!s.given("--min-lr")) s.min_lr = std::min(d.min_lr, s.lr);
  if (task == "recall") {
    // recall's training recipe (docs/TRAINING.md, "recall"): without it every setting
    // tried sat on the "a value from the context" plateau (held-out exact ~0.3).
    if (!s.given("--weight-decay")) s.weight_decay = 0.0;
    model_defaults["attention_init"] = "variance_preserving";
    if (!s.given("--recall-min-pairs")) s.recall_min_pairs = 2;
    if (!s.given("--recall-chain")) s.recall_chain = 0.5;
    if (!s.given("--recall-dense-loss")) s.recall_dense_loss = true;
  }
  return model_defaults;
}

TaskSetup build_task(Settings& s, const ResumeSource& resume) {
  TaskSetup t;
  t.name = s.text_mode() || s.task == "text" ? "text" : s.task;
  apps::check_optimiser_settings(
      {s.steps, s.batch, s.warmup, s.lr, s.min_lr, s.weight_decay, s.clip});
  if (s.sample > 0 && t.name != "text") {
    throw UsageError("--sample needs a text model (--text FILE, or --resume of one)");
  }
  check_task_options(s, t.name);
  check_tokenizer_options(s, resume);
  if (t.name == "text") {
    try {
      t.text = build_text_task(s, resume, t.text_hash);
    } catch (const std::exception& e) {
      throw UsageError(one_line(e.what()));
    }
    t.context = t.text->context();
    t.vocab = t.text->vocab_size();
    if (t.vocab == 0) throw UsageError("the text model has an empty vocabulary");
  } else if (t.name == "repeat") {
    t.repeat = build_repeat_task(s, resume);
    if (s.given("--context") && s.context != t.repeat->context())
      throw apps::disagreement("--context", std::to_string(s.context),
                                   "the repeat task's context " + std::to_string(t.repeat->context()) +
                                   " (2 * --repeat-length - 1)");
    t.context = t.repeat->context();
    t.vocab = t.repeat->vocab_size();
  } else {
    t.seq = SequenceTask::make(t.name);
    if (s.given("--context") && s.context != t.seq->context())
      throw apps::disagreement("--context", std::to_string(s.context), "the " + t.name +
                                   " task's context " + std::to_string(t.seq->context()));
    if (t.name == "recall") {
      t.seq->set_recall_min_pairs(s.recall_min_pairs);
      t.seq->set_recall_grow_steps(s.recall_grow_steps);
      t.seq->set_recall_dense(s.recall_dense_loss);
      t.seq->set_recall_chain_fraction(s.recall_chain);
    }
    t.context = t.seq->context();
    t.vocab = t.seq->vocab_size();
  }
  if (!s.text_mode() && t.name == "text" && s.steps > 0 && s.given("--steps")) {
    throw UsageError("training a text model needs --text FILE");
  }
  // Without its text a resumed text model can only sample: a run with nothing to sample
  // would train and evaluate on nothing and still report success.
  if (!s.text_mode() && t.name == "text" && s.sample == 0) {
    throw UsageError("--resume " + resume.path + " is a text model: give --text FILE to train "
                     "or evaluate it, or --sample N to sample from it");
  }
  if (!s.text_mode() && t.name == "text") s.steps = 0;  // sampling from a checkpoint only
  return t;
}

tasks::Batch TaskSetup::train_batch(std::size_t batch, Generator& gen, std::size_t step) const {
  if (seq) return seq->train_batch(batch, gen, step);
  return repeat ? repeat->train_batch(batch, gen) : text->train_batch(batch, gen);
}

tasks::Batch TaskSetup::check_batch(std::size_t batch, Generator& gen) const {
  if (seq) return seq->train_batch(batch, gen);
  return repeat ? repeat->train_batch(batch, gen) : text->train_batch(batch, gen);
}

TransformerConfig build_config(const Settings& s, const TaskSetup& task, const ResumeSource& resume,
                           const apps::ConfigOptions& model_options,
                           const std::map<std::string, std::string>& model_defaults,
                           std::vector<std::string>& notices) {
  if (resume.active()) {
    TransformerConfig c = *resume.config;
    model_options.check_agrees_with(c, "the checkpoint's");
    // a folder's vocab_size may pad its tokenizer's, and fine-tuning (and its checkpoints)
    // may use shorter windows
    const bool fits = (resume.folder() ? task.vocab <= c.vocab : task.vocab == c.vocab) &&
                      (resume.folder() || resume.windows ? task.context <= c.context
                                                         : task.context == c.context);
    if (!fits) {
      throw UsageError(resume.label() + ": the model has vocab " +
                       std::to_string(c.vocab) + " and context " + std::to_string(c.context) +
                       ", the task needs " + std::to_string(task.vocab) + " and " +
                       std::to_string(task.context));
    }
    apply_given_objective(c, model_options, notices);
    // how the run computes (--checkpoint-activations): a checkpoint stores none of it, and
    // it changes no number, so it is taken as given, without a notice
    try {
      for (const auto& [field, text] : model_options.given_of_role(FieldRole::execution, c))
        set_field_from_string(c, field, text);
      c.validate();
    } catch (const std::exception& e) {
      throw UsageError(one_line(e.what()));
    }
    return c;
  }
  try {
    // the task's sizes before the preset's size rules (gemma2's window is half the context)
    std::map<std::string, std::string> defaults = model_defaults;
    defaults["vocab"] = std::to_string(task.vocab);
    defaults["context"] = std::to_string(task.context);
    TransformerConfig config = model_options.build(defaults);
    config.vocab = task.vocab;
    config.context = task.context;
    config.seed = s.seed;
    config.validate();
    return config;
  } catch (const std::exception& e) {
    throw UsageError(one_line(e.what()));
  }
}

void check_sample_prompt(const Settings& s, const TaskSetup& task, const TransformerConfig& config) {
  if (s.sample == 0 || !task.text) return;
  const std::vector<std::int64_t> ids = apps::encode_text_prompt(task.text->coder(), s.prompt);
  apps::require_prompt_fits(ids.size(), config);
}

std::size_t eval_batch_size(const TaskSetup& task) { return task.seq || task.repeat ? 250 : 32; }

EvalData build_eval_data(const TaskSetup& task, std::size_t eval_size) {
  EvalData d;
  if (task.seq) {
    Generator eval_gen(kEvalSeed);
    for (std::size_t i = 0; i < eval_size; ++i) d.examples.push_back(task.seq->sample_eval(eval_gen));
    d.batches = tasks::batch_examples(*task.seq, d.examples, eval_batch_size(task));
  } else if (task.repeat) {
    Generator eval_gen(kEvalSeed);
    d.batches = task.repeat->eval_batches(eval_batch_size(task), eval_size, eval_gen);
  } else if (task.text && task.text->eval_tokens() > 0) {
    d.batches = task.text->eval_batches(eval_batch_size(task), eval_size);
  }
  return d;
}

}  // namespace tapegrad::train
