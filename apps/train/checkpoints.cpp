#include "apps/train/checkpoints.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "apps/common/cli.hpp"
#include "apps/common/model_file.hpp"
#include "apps/common/run_options.hpp"
#include "apps/train/outputs.hpp"
#include "nn/io/pretrained.hpp"

namespace fs = std::filesystem;

namespace tapegrad::train {

using apps::one_line;

namespace {

// The number of characters of `name` from `at` on that are decimal digits.
std::size_t digits_from(const std::string& name, std::size_t at) {
  std::size_t end = at;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
  return end - at;
}

// "ckpt-" + at least 8 digits + ".npz" (what checkpoint_path writes), then `tail` and, when
// the tail is not empty, at least one digit after it.
bool is_checkpoint_name(const std::string& name, const std::string& tail = "") {
  const std::string head = "ckpt-", ext = ".npz";
  if (name.compare(0, head.size(), head) != 0) return false;
  const std::size_t step_digits = digits_from(name, head.size());
  if (step_digits < 8) return false;
  std::size_t at = head.size() + step_digits;
  for (const std::string& part : {ext, tail}) {
    if (name.compare(at, part.size(), part) != 0) return false;
    at += part.size();
  }
  if (tail.empty()) return at == name.size();
  const std::size_t counter_digits = digits_from(name, at);
  return counter_digits > 0 && at + counter_digits == name.size();
}

// The settings a training checkpoint carries, with the ranges the options accept (a
// hostile file must not ask for a batch of 2^60 sequences).
struct RealSetting {
  const char* option;
  double Settings::*field;
  double lo, hi;
};
struct SizeSetting {
  const char* option;
  std::size_t Settings::*field;
  std::size_t lo, hi;
};
const RealSetting kRealSettings[] = {
    {"--lr", &Settings::lr, 1e-8, 10.0},
    {"--min-lr", &Settings::min_lr, 0.0, 10.0},
    {"--weight-decay", &Settings::weight_decay, 0.0, 10.0},
    {"--beta1", &Settings::beta1, 0.0, 0.999999},
    {"--beta2", &Settings::beta2, 0.0, 0.999999},
    {"--clip", &Settings::clip, 0.0, 1e6},
    {"--recall-chain", &Settings::recall_chain, 0.0, 1.0},
};
const SizeSetting kSizeSettings[] = {
    {"--batch", &Settings::batch, 1, 65536},
    {"--warmup", &Settings::warmup, 0, 100000000},
    {"--recall-min-pairs", &Settings::recall_min_pairs, 1, 8},
    {"--recall-grow-steps", &Settings::recall_grow_steps, 0, 100000000},
};

std::string setting_name(const char* option) {
  std::string name = option + 2;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

template <class V>
void notice_override(const char* option, V file_value, V given, std::vector<std::string>& notices) {
  notices.push_back(override_notice(option, fmt::format("{}", file_value), fmt::format("{}", given)));
}

template <class Map>
auto need_setting(const Map& map, const std::string& name) {
  const auto it = map.find(name);
  if (it == map.end()) throw UsageError("--resume: the training state lacks the setting '" + name + "'");
  return it->second;
}

// A setting that shapes the data the run continues on (the windows, the held-out set): the
// checkpoint's value, within [lo, hi]; none from a file written before it was recorded. An
// option given with another value is refused: the run could not go on as it was.
std::optional<std::size_t> data_setting(const Settings& s, const TrainingState<float>& st,
                                        const SizeSetting& setting) {
  const auto& [option, field, lo, hi] = setting;
  if (st.format < kDataSettingsSince) return std::nullopt;
  const std::int64_t v = need_setting(st.integer_settings, setting_name(option));
  if (v < std::int64_t(lo) || v > std::int64_t(hi))
    throw UsageError(fmt::format("--resume: the checkpoint's {} {} is outside [{}, {}]", option, v, lo, hi));
  const std::size_t value = std::size_t(v);
  if (s.given(option) && s.*field != value)
    throw apps::disagreement(option, std::to_string(s.*field),
                                 fmt::format("the checkpoint's {} {}", option, value));
  return value;
}

TrainingState<float> capture(const TrainerState& t) {
  const Settings& s = t.settings;
  TrainingState<float> st;
  st.step = t.progress.step;
  st.total_steps = s.steps;
  st.moments = collect_moments<float>(t.model, {&t.optimizers.decayed(), &t.optimizers.plain()});
  st.generators.emplace("data", generator_state(t.data));
  for (const LossRecord& r : t.progress.losses) {
    st.losses.push_back(r.loss);
    st.lrs.push_back(r.lr);
  }
  for (const RealSetting& r : kRealSettings) st.real_settings[setting_name(r.option)] = s.*r.field;
  for (const SizeSetting& z : kSizeSettings)
    st.integer_settings[setting_name(z.option)] = std::int64_t(s.*z.field);
  st.precision = matmul_precision_from_name(s.precision);
  st.integer_settings["seed"] = std::int64_t(s.seed);
  st.integer_settings["checkpoint_every"] = std::int64_t(s.checkpoint_every);
  st.integer_settings["grad_accum"] = std::int64_t(s.grad_accum);
  st.integer_settings["recall_dense_loss"] = s.recall_dense_loss;
  st.integer_settings["text_hash"] = t.task.text_hash;
  st.integer_settings["context"] = std::int64_t(t.task.context);  // the windows, not the model's
  st.integer_settings["eval_size"] = std::int64_t(s.eval_size);
  st.integer_settings["tokens_seen"] = std::int64_t(t.progress.tokens_seen);
  st.real_settings["train_seconds"] = t.progress.train_seconds;
  st.real_settings["train_cpu_seconds"] = t.progress.train_cpu_seconds;
  return st;
}

// Checkpoint names of one directory by step: a longer number is a later step (--steps
// reaches 9 digits), then by name.
bool earlier_step(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

void prune(const std::string& dir) {
  std::vector<std::string> all = list_checkpoints(dir);
  for (std::size_t i = 0; i + kCheckpointsKept < all.size(); ++i) {
    std::error_code ignored;  // a checkpoint we cannot remove only costs disk space
    fs::remove(all[i], ignored);
  }
}

}  // namespace

std::string override_notice(const std::string& option, const std::string& file_value,
                            const std::string& given) {
  return fmt::format("--resume: {} {} differs from the checkpoint's {}; the run goes on with {} "
                     "and no longer matches an uninterrupted one", option, given, file_value, given);
}

std::string checkpoint_path(const std::string& dir, std::size_t step) {
  return (fs::path(dir) / fmt::format("ckpt-{:08d}.npz", step)).string();
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_checkpoint_name(name)) found.push_back(e.path().string());
  }
  std::sort(found.begin(), found.end(), earlier_step);
  return found;
}

void check_no_later_checkpoints(const std::string& dir, std::size_t start_step) {
  const std::vector<std::string> found = list_checkpoints(dir);
  if (found.empty()) return;
  const std::string newest = fs::path(found.back()).filename().string();
  if (!earlier_step(fs::path(checkpoint_path(dir, start_step)).filename().string(), newest))
    return;
  throw UsageError("--out " + dir + " holds " + newest + ", a later step than the " +
                   std::to_string(start_step) + " this run starts from (another run's "
                   "checkpoints): choose another --out or remove them");
}

void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::error_code ignored;
    if (is_checkpoint_name(e.path().filename().string(), ".tmp."))
      fs::remove(e.path(), ignored);
  }
}

std::string write_training_checkpoint(const TrainerState& t) {
  const std::string path = checkpoint_path(t.settings.out, t.progress.step);
  // Pruning before the write too keeps at most three on disk whatever a kill interrupts: a
  // run killed between a rename and its pruning leaves three, and the resumed run's first
  // write would otherwise add a fourth.
  prune(t.settings.out);
  std::vector<NpzEntry> extra = model_entries(t.model, t.task);
  for (NpzEntry& e : training_state_entries(capture(t))) extra.push_back(std::move(e));
  try {
    save_parameters(path, t.model, extra);
  } catch (const std::exception& e) {
    const std::vector<std::string> kept = list_checkpoints(t.settings.out);
    throw std::runtime_error(
        "cannot write the training checkpoint " + path + ": " + one_line(e.what()) +
        (kept.empty() ? std::string("; no earlier checkpoint exists")
                      : "; the previous checkpoint " + kept.back() + " is intact"));
  }
  prune(t.settings.out);
  return path;
}

Transformer<float> load_resumed_model(const Settings& s, const ResumeSource& resume) {
  std::optional<Transformer<float>> model;
  try {
    if (resume.folder())
      model.emplace(std::move(load_pretrained<float>(resume.path, /*allow_nonfinite=*/true).model));
    else
      model.emplace(checkpoint_model<float>(resume.entries, resume.path));  // read once
  } catch (const std::exception& e) {
    throw UsageError(resume.label() + ": " + one_line(e.what()));
  }
  apps::require_finite_parameters(*model, resume.label(), s.allow_nonfinite);
  return std::move(*model);
}

std::optional<TrainingState<float>> read_training_state(const ResumeSource& resume,
                                                        const Transformer<float>& model) {
  if (!holds_training_state(resume.entries)) return std::nullopt;
  try {
    return training_state_from_entries<float>(resume.entries, model, resume.path);
  } catch (const std::exception& e) {
    throw UsageError("--resume " + resume.path + ": " + one_line(e.what()));
  }
}

void apply_checkpoint_settings(Settings& s, const TrainingState<float>& st,
                               std::vector<std::string>& notices) {
  for (const RealSetting& r : kRealSettings) {
    const double v = need_setting(st.real_settings, setting_name(r.option));
    if (!(v >= r.lo && v <= r.hi))
      throw UsageError(fmt::format("--resume: the checkpoint's {} {} is outside [{}, {}]", r.option, v, r.lo, r.hi));
    if (!s.given(r.option)) s.*r.field = v;
    else if (s.*r.field != v) notice_override(r.option, v, s.*r.field, notices);
  }
  for (const SizeSetting& z : kSizeSettings) {
    const std::int64_t v = need_setting(st.integer_settings, setting_name(z.option));
    if (v < std::int64_t(z.lo) || v > std::int64_t(z.hi))
      throw UsageError(fmt::format("--resume: the checkpoint's {} {} is outside [{}, {}]", z.option, v, z.lo, z.hi));
    if (!s.given(z.option)) s.*z.field = std::size_t(v);
    else if (s.*z.field != std::size_t(v)) notice_override(z.option, std::size_t(v), s.*z.field, notices);
  }
  const std::uint64_t seed = std::uint64_t(need_setting(st.integer_settings, "seed"));
  if (s.given("--seed") && s.seed != seed)
    throw apps::disagreement("--seed", std::to_string(s.seed),
                                 "the checkpoint's seed " + std::to_string(seed));
  s.seed = seed;
  const std::int64_t dense = need_setting(st.integer_settings, "recall_dense_loss");
  if (dense != 0 && dense != 1)
    throw UsageError(fmt::format("--resume: the checkpoint's recall_dense_loss is {}, not 0 or 1", dense));
  if (!s.given("--recall-dense-loss")) s.recall_dense_loss = dense == 1;
  // the interval carries over (a checkpoint written before it was recorded has none)
  const auto every = st.integer_settings.find("checkpoint_every");
  if (every != st.integer_settings.end() && !s.given("--checkpoint-every")) {
    if (every->second < 0 || every->second > 100000000)
      throw UsageError(fmt::format("--resume: the checkpoint's --checkpoint-every {} is outside [0, 100000000]",
                                   every->second));
    s.checkpoint_every = std::size_t(every->second);
  }
  // --grad-accum shapes the arithmetic (the order of the sums), so it carries over as the
  // batch does; a checkpoint written before it was recorded ran every batch whole
  {
    const auto accum = st.integer_settings.find("grad_accum");
    const std::int64_t v = accum == st.integer_settings.end() ? 1 : accum->second;
    if (v < 1 || v > 65536)
      throw UsageError(fmt::format("--resume: the checkpoint's --grad-accum {} is outside [1, 65536]", v));
    if (!s.given("--grad-accum")) s.grad_accum = std::size_t(v);
    else if (s.grad_accum != std::size_t(v)) notice_override("--grad-accum", std::size_t(v), s.grad_accum, notices);
  }
  if (const auto eval_size = data_setting(s, st, {"--eval-size", &Settings::eval_size, 0, 100000000}))
    s.eval_size = *eval_size;
  const std::string& precision = matmul_precision_name(st.precision);
  if (!s.given("--precision")) s.precision = precision;
  else if (s.precision != precision) notices.push_back(override_notice("--precision", precision, s.precision));
  if (!s.given("--steps")) s.steps = st.total_steps;
  if (st.step > s.steps)
    throw UsageError(fmt::format("--resume: the checkpoint is at step {}, past --steps {}",
                                 st.step, s.steps));
  if (s.steps != st.total_steps) notice_override("--steps", st.total_steps, s.steps, notices);
}

std::optional<std::size_t> checkpoint_windows(const Settings& s, const TrainingState<float>& st,
                                              const TransformerConfig& model) {
  return data_setting(s, st, {"--context", &Settings::context, 1, model.context});
}

void restore_training(const TrainingState<float>& st, const TaskSetup& task,
                      const Transformer<float>& model, Optimizers& optimizers, Generator& data,
                      TrainingProgress& progress, const std::string& label) {
  if (need_setting(st.integer_settings, "text_hash") != task.text_hash)
    throw UsageError("--resume " + label + ": the --text file is not the one this run was "
                     "trained on (its model.npz resumes as weights only on another text)");
  const auto data_state = st.generators.find("data");
  if (data_state == st.generators.end())
    throw UsageError("--resume " + label + ": the training state lacks the batch generator");
  try {
    restore_moments<float>(st.moments, model, {&optimizers.decayed(), &optimizers.plain()}, label);
    restore_generator(data, data_state->second, label);
  } catch (const std::exception& e) {
    throw UsageError("--resume " + label + ": " + one_line(e.what()));
  }
  progress.step = st.step;
  progress.losses.clear();
  for (std::size_t i = 0; i < st.losses.size(); ++i) progress.losses.push_back({i + 1, st.losses[i], st.lrs[i]});
  const std::int64_t tokens = need_setting(st.integer_settings, "tokens_seen");
  progress.tokens_seen = tokens > 0 ? std::size_t(tokens) : 0;
  progress.train_seconds = std::max(0.0, need_setting(st.real_settings, "train_seconds"));
  progress.train_cpu_seconds = std::max(0.0, need_setting(st.real_settings, "train_cpu_seconds"));
}

}  // namespace tapegrad::train
