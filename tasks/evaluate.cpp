#include "tasks/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/tape.hpp"
#include "nn/generation.hpp"
#include "ops/cross_entropy.hpp"

namespace tapegrad::tasks {

namespace {

std::int64_t argmax(const float* row, std::size_t V) {
  return std::int64_t(std::max_element(row, row + V) - row);
}

}  // namespace

namespace {

// Rows [first, last) of a (B, T) batch.
Batch rows_of(const Batch& batch, std::size_t first, std::size_t last) {
  const std::size_t T = batch.tokens.shape()[1];
  Batch part{Indices::from_shape({last - first, T}), Indices::from_shape({last - first, T})};
  std::copy(batch.tokens.data() + first * T, batch.tokens.data() + last * T, part.tokens.data());
  std::copy(batch.targets.data() + first * T, batch.targets.data() + last * T,
            part.targets.data());
  return part;
}

}  // namespace

std::vector<Batch> groups_whose_logits_fit(const std::vector<Batch>& batches, std::size_t vocab,
                                           std::size_t max_logits_bytes) {
  std::vector<Batch> out;
  for (const Batch& batch : batches) {
    const std::size_t B = batch.tokens.shape()[0], T = batch.tokens.shape()[1];
    const std::size_t per_sequence = std::max<std::size_t>(T * vocab * sizeof(float), 1);
    const std::size_t group = std::max<std::size_t>(max_logits_bytes / per_sequence, 1);
    if (group >= B) {
      out.push_back(batch);
      continue;
    }
    for (std::size_t b = 0; b < B; b += group) out.push_back(rows_of(batch, b, std::min(B, b + group)));
  }
  return out;
}

EvalResult evaluate(Transformer<float>& model, const std::vector<Batch>& batches,
                    std::size_t max_logits_bytes) {
  return evaluate([&model](const Indices& tokens) { return model.forward(tokens); },
                  groups_whose_logits_fit(batches, model.config().vocab, max_logits_bytes));
}

EvalResult evaluate(const LogitsFn& logits_of, const std::vector<Batch>& batches) {
  NoGradGuard no_grad;
  EvalResult r;
  double loss_sum = 0;
  std::size_t correct = 0, exact = 0;
  for (const Batch& batch : batches) {
    const std::size_t B = batch.tokens.shape()[0], T = batch.tokens.shape()[1];
    Tensor<float> logits = logits_of(batch.tokens);
    std::size_t counted = 0;
    for (std::int64_t t : batch.targets) counted += t != kIgnore;
    if (counted > 0) {
      // The op's mean over this batch, weighted back to a sum so batches of different
      // sizes average correctly.
      loss_sum += double(cross_entropy(logits, batch.targets, kIgnore).item()) * double(counted);
    }
    const std::size_t V = logits.shape()[2];
    const float* data = logits.data();
    for (std::size_t b = 0; b < B; ++b) {
      bool all = true;
      for (std::size_t t = 0; t < T; ++t) {
        std::int64_t target = batch.targets(b, t);
        if (target == kIgnore) continue;
        bool ok = argmax(data + (b * T + t) * V, V) == target;
        correct += ok;
        all = all && ok;
      }
      exact += all;
    }
    r.sequences += B;
    r.tokens += counted;
  }
  if (r.tokens > 0) {
    r.loss = loss_sum / double(r.tokens);
    r.token_accuracy = double(correct) / double(r.tokens);
  }
  if (r.sequences > 0) r.exact_accuracy = double(exact) / double(r.sequences);
  return r;
}

namespace {

// Sums of the loss over each half's scored positions, and their counts: what batches of
// different sizes add up before one division.
struct HalfSums {
  double first = 0, second = 0;
  std::size_t first_tokens = 0, second_tokens = 0;

  void add(const RepeatTask& task, const Tensor<float>& logits, const Indices& targets) {
    add_half(task, logits, targets, RepeatTask::Half::first, first, first_tokens);
    add_half(task, logits, targets, RepeatTask::Half::second, second, second_tokens);
  }

  HalfLosses means() const {
    const double nan = std::nan("");
    return {first_tokens > 0 ? first / double(first_tokens) : nan,
            second_tokens > 0 ? second / double(second_tokens) : nan, first_tokens, second_tokens};
  }

 private:
  // The cross_entropy op's mean over the half's positions, weighted back to a sum.
  static void add_half(const RepeatTask& task, const Tensor<float>& logits, const Indices& targets,
                       RepeatTask::Half half, double& sum, std::size_t& tokens) {
    const Indices scored = task.half_targets(targets, half);
    std::size_t counted = 0;
    for (std::int64_t t : scored) counted += t != kIgnore;
    if (counted == 0) return;
    sum += double(cross_entropy(logits, scored, kIgnore).item()) * double(counted);
    tokens += counted;
  }
};

}  // namespace

HalfLosses half_losses(const RepeatTask& task, const Tensor<float>& logits, const Indices& targets) {
  NoGradGuard no_grad;
  HalfSums sums;
  sums.add(task, logits, targets);
  return sums.means();
}

HalfLosses evaluate_halves(Transformer<float>& model, const RepeatTask& task,
                           const std::vector<Batch>& batches) {
  NoGradGuard no_grad;
  HalfSums sums;
  for (const Batch& batch : batches) sums.add(task, model.forward(batch.tokens), batch.targets);
  return sums.means();
}

std::vector<Batch> batch_examples(const SequenceTask& task, const std::vector<Example>& examples,
                                  std::size_t batch) {
  std::vector<Batch> out;
  for (std::size_t i = 0; i < examples.size(); i += batch) {
    std::size_t end = std::min(examples.size(), i + batch);
    out.push_back(task.make_batch({examples.begin() + std::ptrdiff_t(i),
                                   examples.begin() + std::ptrdiff_t(end)}));
  }
  return out;
}

std::vector<std::vector<std::int64_t>> greedy_answers(Transformer<float>& model,
                                                      const SequenceTask& task,
                                                      const std::vector<Example>& examples) {
  NoGradGuard no_grad;
  const std::size_t B = examples.size(), L = task.input_len(), A = task.answer_len();
  std::vector<std::vector<std::int64_t>> answers(B);
  if (B == 0) return answers;
  // tokens grows by one column per decoded answer token.
  for (std::size_t i = 0; i < A; ++i) {
    const std::size_t T = L + 1 + i;
    Indices tokens = Indices::from_shape({B, T});
    for (std::size_t b = 0; b < B; ++b) {
      for (std::size_t t = 0; t < L; ++t) tokens(b, t) = examples[b].input[t];
      tokens(b, L) = task.separator();
      for (std::size_t k = 0; k < i; ++k) tokens(b, L + 1 + k) = answers[b][k];
    }
    Tensor<float> logits = model.forward(tokens);
    const std::size_t V = logits.shape()[2];
    for (std::size_t b = 0; b < B; ++b) {
      answers[b].push_back(argmax(logits.data() + (b * T + T - 1) * V, V));
    }
  }
  return answers;
}

// nn/sampling's sampler without top-k: one definition of sampling in the whole tree.
std::int64_t sample_logits(const float* logits, std::size_t V, double temperature, double top_p,
                           Generator& gen) {
  return sample_token(logits, V, SamplingOptions{temperature, 0, top_p}, gen);
}

// The generation engine with its KV cache (nn/generation.hpp); past the context the
// sequence slides, as this sampler always did.
std::vector<std::int64_t> sample(Transformer<float>& model, std::vector<std::int64_t> prompt,
                                 const SampleOptions& options, Generator& gen) {
  GenerateOptions g;
  g.max_new_tokens = options.tokens;
  g.sampling = {options.temperature, 0, options.top_p};
  g.at_context = AtContext::slide;
  const GenerateResult r = generate(model, prompt, g, gen);
  prompt.insert(prompt.end(), r.tokens.begin(), r.tokens.end());
  return prompt;
}

}  // namespace tapegrad::tasks
