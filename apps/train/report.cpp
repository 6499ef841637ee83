#include "apps/train/report.hpp"

#include <algorithm>
#include <cmath>

#include "apps/common/text_prompt.hpp"



namespace tapegrad::train {

namespace {

void print_examples(Transformer<float>& model, const tasks::SequenceTask& seq,
                    const EvalData& eval, std::size_t count, std::FILE* log) {
  const std::size_t n = std::min(count, eval.examples.size());
  const std::vector<tasks::Example> shown(eval.examples.begin(),
                                          eval.examples.begin() + std::ptrdiff_t(n));
  const auto answers = tasks::greedy_answers(model, seq, shown);
  std::fprintf(log, "examples (input -> greedy prediction (target)):\n");
  for (std::size_t i = 0; i < shown.size(); ++i) {
    std::fprintf(log, "  %s -> %s (%s)%s\n", seq.format(shown[i].input).c_str(),
                 seq.format(answers[i]).c_str(), seq.format(shown[i].answer).c_str(),
                 answers[i] == shown[i].answer ? "" : "  <- wrong");
  }
}

// The prompt (checked at start-up, apps/train/setup.hpp) and s.sample new characters,
// past the context by examples/generate's rule.
std::string sample_text(Transformer<float>& model, const tasks::TextTask& text,
                        const Settings& s, std::FILE* log) {
  std::vector<std::int64_t> ids = apps::encode_text_prompt(text.coder(), s.prompt);
  GenerateOptions o;
  o.max_new_tokens = s.sample;
  o.sampling = {s.temperature, 0, s.top_p};
  o.at_context = apps::kAtContext;
  Generator sample_gen(s.seed + 99);
  const GenerateResult r = generate(model, ids, o, sample_gen);
  ids.insert(ids.end(), r.tokens.begin(), r.tokens.end());
  std::string result = text.decode(ids);
  std::fprintf(log, "sample (temperature %g, top-p %g):\n%s\n", s.temperature, s.top_p,
               result.c_str());
  return result;
}

}  // namespace

std::vector<std::string> expert_load_lines(const Transformer<float>& model,
                                           const std::vector<double>& dropped_in_training) {
  std::vector<std::string> lines;
  for (std::size_t l = 0; l < model.blocks().size(); ++l) {
    const MixtureOfExperts<float>* moe = model.blocks()[l].moe();
    if (!moe || moe->routing().fraction.empty()) continue;
    const std::vector<double>& f = moe->routing().fraction;
    char line[200];
    const int n = std::snprintf(line, sizeof line,
                                "  layer %zu expert load: max %.3f  min %.3f  (k/E = %.3f)", l,
                                *std::max_element(f.begin(), f.end()),
                                *std::min_element(f.begin(), f.end()),
                                double(moe->config().top_k) / double(moe->config().experts));
    if (moe->config().capacity > 0 && l < dropped_in_training.size())
      std::snprintf(line + n, sizeof line - std::size_t(n),
                    "  dropped in training %.3f (capacity factor %g)", dropped_in_training[l],
                    moe->config().capacity);
    lines.emplace_back(line);
  }
  return lines;
}

FinalReport evaluate_and_report(Transformer<float>& model, const TaskSetup& task,
                                const EvalData& eval, const Settings& s,
                                const std::vector<double>& dropped_in_training, std::FILE* log) {
  FinalReport r;
  if (!eval.batches.empty()) r.eval = tasks::evaluate(model, eval.batches);
  if (r.eval) {
    std::fprintf(log,
                 "held-out %s: loss %.6f  token accuracy %.4f  exact accuracy %.4f  (%zu %s)\n",
                 task.name.c_str(), r.eval->loss, r.eval->token_accuracy, r.eval->exact_accuracy,
                 r.eval->sequences, task.text ? "windows" : "sequences");
    // the load of the evaluation's last batch, as every periodic eval prints it
    for (const std::string& load : expert_load_lines(model, dropped_in_training))
      std::fprintf(log, "%s\n", load.c_str());
  }
  if (r.eval && task.text) {
    // models with different tokens compare only over the same bytes: --eval-size decides
    // how much of the held-out part the windows cover
    const std::size_t bytes = task.text->target_bytes(eval.batches);
    r.bits_per_byte = tasks::bits_per_byte(r.eval->loss, r.eval->tokens, bytes);
    std::fprintf(log, "held-out text: %.6f bits per byte (%s tokens, over %zu of the held-out "
                 "part's %zu bytes)\n", *r.bits_per_byte, task.text->coder().kind(), bytes,
                 task.text->eval_bytes());
  }
  if (task.repeat && !eval.batches.empty()) {
    r.halves = tasks::evaluate_halves(model, *task.repeat, eval.batches);
    std::fprintf(log, "held-out repeat halves: first half loss %.6f (chance: log %zu = %.6f)  "
                 "second half loss %.6f\n", r.halves->first, task.repeat->symbols(),
                 std::log(double(task.repeat->symbols())), r.halves->second);
  }
  if (task.seq && !s.quiet && s.examples > 0) print_examples(model, *task.seq, eval, s.examples, log);
  if (task.text && s.sample > 0) r.sample_text = sample_text(model, *task.text, s, log);
  std::fflush(log);
  return r;
}

}  // namespace tapegrad::train
