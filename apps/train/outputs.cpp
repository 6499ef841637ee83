#include "apps/train/outputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "apps/common/model_source.hpp"
#include "apps/common/svg_plot.hpp"
#include "nn/io/checkpoint.hpp"
#include "ops/precision.hpp"
#include "ops/threads.hpp"
#include "text/tokenizer_json.hpp"

namespace fs = std::filesystem;

namespace tapegrad::train {

std::vector<NpzEntry> model_entries(const Transformer<float>& model, const TaskSetup& task) {
  return apps::checkpoint_extras(model.config(), task.name,
                                     task.text ? &task.text->coder() : nullptr);
}

namespace {

double mean_of_last(const std::vector<LossRecord>& losses, std::size_t count) {
  if (losses.empty()) return std::nan("");
  const std::size_t n = std::min(count, losses.size());
  double sum = 0;
  for (std::size_t i = losses.size() - n; i < losses.size(); ++i) sum += losses[i].loss;
  return sum / double(n);
}

void set_results(nlohmann::ordered_json& m, const RunSummary& r) {
  const Settings& s = r.settings;
  const std::optional<tasks::EvalResult>& eval = r.report.eval;
  const TrainingProgress& p = r.progress;
  m["task"] = r.task.name;
  if (s.text_mode()) m["text_file"] = s.text;
  m["steps"] = s.steps;
  m["final_train_loss"] = p.losses.empty() ? std::nan("") : p.losses.back().loss;
  m["final_train_loss_avg50"] = mean_of_last(p.losses, 50);
  // the LM loss above; a mixture of experts' raw auxiliary losses beside it, never inside
  if (r.model.config().experts > 0) {
    m["final_moe_aux_loss"] = p.last_moe_aux;
    m["final_moe_z_loss"] = p.last_moe_z;
    m["parameters_active"] = count_parameters(r.model.config()).active();
  }
  m["eval_loss"] = eval ? eval->loss : std::nan("");
  m["eval_token_accuracy"] = eval ? eval->token_accuracy : std::nan("");
  m["eval_exact_accuracy"] = eval ? eval->exact_accuracy : std::nan("");
  m["eval_sequences"] = eval ? eval->sequences : std::size_t(0);
  m["eval_tokens"] = eval ? eval->tokens : std::size_t(0);
  if (r.task.text) {
    m["tokenizer"] = r.task.text->coder().kind();
    m["eval_bits_per_byte"] = r.report.bits_per_byte.value_or(std::nan(""));
  }
  if (r.task.repeat) {
    const std::optional<tasks::HalfLosses>& halves = r.report.halves;
    m["eval_first_half_loss"] = halves ? halves->first : std::nan("");
    m["eval_second_half_loss"] = halves ? halves->second : std::nan("");
    m["eval_first_half_chance_loss"] = std::log(double(r.task.repeat->symbols()));
  }
  m["accuracy_method"] =
      r.task.repeat ? "teacher-forced argmax at every position; exact = every position right "
                      "(near 0: the first half is random)"
                    : "teacher-forced argmax on answer positions; exact = every answer token "
                      "right (equal to greedy decoding's exact accuracy)";
  m["train_seconds"] = p.train_seconds;
  m["train_cpu_seconds"] = p.train_cpu_seconds;
  m["tokens_per_second"] = p.train_seconds > 0 ? double(p.tokens_seen) / p.train_seconds : 0.0;
  m["tokens_seen"] = p.tokens_seen;
  m["parameters"] = r.model.parameter_count();
  m["seed"] = std::int64_t(s.seed);
  m["gradcheck"] = r.gradcheck.status;
  m["gradcheck_max_rel_error"] = r.gradcheck.max_rel_error;
  m["gradcheck_seconds"] = r.gradcheck.seconds;
  m["resumed_from"] = s.resume;
  m["resumed_at_step"] = r.resumed_at_step;
  m["checkpoints_written"] = p.checkpoints_written;
  m["checkpoint_ms_mean"] = p.checkpoints_written > 0
                                ? 1e3 * p.checkpoint_seconds / double(p.checkpoints_written)
                                : std::nan("");
  m["checkpoint_bytes"] = p.checkpoint_bytes;
}

void set_settings(nlohmann::ordered_json& m, const RunSummary& r) {
  const Settings& s = r.settings;
  const TransformerConfig& c = r.model.config();
  for (const FieldInfo& f : config_fields()) {
    if (f.kind == FieldInfo::Kind::size) m[f.name] = std::size_t(field_to_int64(c, f.name));
    else if (f.kind == FieldInfo::Kind::real) m[f.name] = field_to_double(c, f.name);
    else if (f.kind != FieldInfo::Kind::seed) m[f.name] = field_to_string(c, f.name);
  }
  m["init_seed"] = std::int64_t(c.seed);
  m["batch"] = s.batch;
  m["grad_accum"] = s.grad_accum;
  m["lr"] = s.lr;
  m["min_lr"] = s.min_lr;
  m["warmup"] = s.warmup;
  m["weight_decay"] = s.weight_decay;
  m["beta1"] = s.beta1;
  m["beta2"] = s.beta2;
  m["clip"] = s.clip;
  m["threads"] = num_threads();
  m["precision"] = matmul_precision_name(matmul_precision());
  if (r.task.repeat) {
    m["repeat_length"] = r.task.repeat->length();
    m["repeat_symbols"] = r.task.repeat->symbols();
  }
  if (r.task.name == "recall") {
    m["recall_min_pairs"] = s.recall_min_pairs;
    m["recall_grow_steps"] = s.recall_grow_steps;
    m["recall_chain"] = s.recall_chain;
    m["recall_dense_loss"] = s.recall_dense_loss ? "on" : "off";
  }
}

}  // namespace

std::string metrics_json(const RunSummary& run) {
  nlohmann::ordered_json m;
  set_results(m, run);
  set_settings(m, run);
  // A path or a text file's name need not be UTF-8: replace what is not instead of failing.
  return m.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

void write_outputs(const RunSummary& run, std::FILE* log) {
  const fs::path out(run.settings.out);
  save_parameters((out / "model.npz").string(), run.model, model_entries(run.model, run.task));
  const std::vector<LossRecord>& losses = run.progress.losses;
  plot::write_file_atomic((out / "metrics.json").string(), metrics_json(run));
  const tasks::TextTask* text = run.task.text ? &*run.task.text : nullptr;
  const bool text_data = text && text->train_tokens() > 0;
  plot::write_file_atomic((out / "loss.csv").string(),
                          loss_csv(losses, text_data ? std::optional(text->train_bytes_per_token())
                                                     : std::nullopt));
  // the tokenizer beside the model, to reuse with --tokenizer FILE or the tokenizer program
  std::string tokenizer_name;
  if (text && text->coder().is_bpe()) {
    const text::SavedTokenizer saved = text::saved_tokenizer(*text->coder().tokenizer());
    plot::write_file_atomic((out / saved.file_name).string(), saved.contents);
    tokenizer_name = ", " + saved.file_name;
  }
  plot::write_file_atomic((out / "loss.svg").string(),
                          loss_svg(losses, "Transformer on " + run.task.name + ": training loss"));
  if (!run.report.sample_text.empty())
    plot::write_file_atomic((out / "sample.txt").string(), run.report.sample_text + "\n");
  const TrainingProgress& p = run.progress;
  std::fprintf(log, "train_seconds %.2f (cpu %.2f)  tokens/s %.0f  wrote %s/{model.npz, metrics.json, "
               "loss.csv, loss.svg%s%s}\n", p.train_seconds, p.train_cpu_seconds,
               p.train_seconds > 0 ? double(p.tokens_seen) / p.train_seconds : 0.0,
               run.settings.out.c_str(), tokenizer_name.c_str(),
               run.report.sample_text.empty() ? "" : ", sample.txt");
}

}  // namespace tapegrad::train
