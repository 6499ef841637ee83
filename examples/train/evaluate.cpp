#include "examples/train/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/tape.hpp"
#include "ops/cross_entropy.hpp"

namespace tapegrad::train {

namespace {

std::int64_t argmax(const float* row, std::size_t V) {
  return std::int64_t(std::max_element(row, row + V) - row);
}

}  // namespace

EvalResult evaluate(TinyGPT<float>& model, const std::vector<Batch>& batches) {
  NoGradGuard no_grad;
  EvalResult r;
  double loss_sum = 0;
  std::size_t correct = 0, exact = 0;
  for (const Batch& batch : batches) {
    const std::size_t B = batch.tokens.shape()[0], T = batch.tokens.shape()[1];
    Tensor<float> logits = model.forward(batch.tokens);
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

std::vector<std::vector<std::int64_t>> greedy_answers(TinyGPT<float>& model,
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

std::int64_t sample_logits(const float* logits, std::size_t V, double temperature, double top_p,
                           Generator& gen) {
  if (temperature <= 0.0) return argmax(logits, V);
  // softmax(logits / temperature) in double, largest logit subtracted for stability
  double m = *std::max_element(logits, logits + V);
  std::vector<double> p(V);
  double total = 0;
  for (std::size_t v = 0; v < V; ++v) total += p[v] = std::exp((logits[v] - m) / temperature);
  for (double& x : p) x /= total;
  std::vector<std::size_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  // ties keep the lower id first, so the draw is reproducible
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
  // nucleus: the smallest prefix (by probability) whose mass reaches top_p
  std::size_t keep = 0;
  double mass = 0;
  while (keep < V && (keep == 0 || mass < top_p)) mass += p[order[keep++]];
  double u = gen.uniform(0.0, mass);
  for (std::size_t k = 0; k < keep; ++k) {
    u -= p[order[k]];
    if (u <= 0) return std::int64_t(order[k]);
  }
  return std::int64_t(order[keep - 1]);
}

std::vector<std::int64_t> sample(TinyGPT<float>& model, std::vector<std::int64_t> prompt,
                                 const SampleOptions& options, Generator& gen) {
  NoGradGuard no_grad;
  const std::size_t context = model.config().context;
  std::vector<std::int64_t> out = std::move(prompt);
  for (std::size_t n = 0; n < options.tokens; ++n) {
    std::size_t start = out.size() > context ? out.size() - context : 0;
    std::size_t T = out.size() - start;
    Indices tokens = Indices::from_shape({std::size_t(1), T});
    for (std::size_t t = 0; t < T; ++t) tokens(0, t) = out[start + t];
    Tensor<float> logits = model.forward(tokens);
    const std::size_t V = logits.shape()[2];
    out.push_back(sample_logits(logits.data() + (T - 1) * V, V, options.temperature,
                                options.top_p, gen));
  }
  return out;
}

}  // namespace tapegrad::train
