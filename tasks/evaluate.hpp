#pragma once
// Evaluation, greedy decoding and sampling of a trained Transformer (no gradients recorded).
//
// Accuracy is teacher-forced: every position whose target is not kIgnore is predicted by
// the argmax of its logits with the true prefix as input. A sequence counts as exact when
// every such position is right. For the sequence tasks this exact accuracy equals greedy
// decoding's: when all teacher-forced argmaxes are right, greedy decoding feeds back the
// same tokens and so produces the same answer, and the first wrong teacher-forced argmax
// is also greedy decoding's first wrong token. Per-token accuracy is the teacher-forced
// one (greedy decoding's would count the tokens after a first mistake as well).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tasks/tasks.hpp"
#include "nn/transformer.hpp"

namespace tapegrad::tasks {

struct EvalResult {
  double loss = 0;            // mean cross-entropy over the scored positions
  double token_accuracy = 0;  // scored positions whose argmax is the target
  double exact_accuracy = 0;  // sequences with every scored position right
  std::size_t sequences = 0, tokens = 0;
};

// The most logits (bytes) one evaluation forward holds. (B, T, V) of a large vocabulary at a
// long context is gigabytes (32 sequences of GPT-2's 1024 tokens and 50257 ids: 6.6 GB), so
// the model's evaluate runs each batch in groups of sequences whose logits fit (one sequence
// at least); exact accuracy is per sequence and the loss a sum over positions, so the groups
// change no result.
inline constexpr std::size_t kEvalLogitsBytes = std::size_t(256) << 20;

EvalResult evaluate(Transformer<float>& model, const std::vector<Batch>& batches,
                    std::size_t max_logits_bytes = kEvalLogitsBytes);
// The batches split along B into groups whose float logits over `vocab` ids fit in
// max_logits_bytes (a batch that fits is kept whole; a group has one sequence at least).
std::vector<Batch> groups_whose_logits_fit(const std::vector<Batch>& batches, std::size_t vocab,
                                           std::size_t max_logits_bytes);
// The same with the logits (B, T, V) of tokens (B, T) from any function: a run with hooks
// (an ablated head, a patched activation), for instance.
using LogitsFn = std::function<Tensor<float>(const Indices& tokens)>;
EvalResult evaluate(const LogitsFn& logits_of, const std::vector<Batch>& batches);

// The repeat task's loss on each half of its sequences (RepeatTask, tasks/repeat_task.hpp): the
// first half's targets are random (about log(symbols) nats at best), the second half's are
// a copy of the first (near 0 once the model has induction heads). Means over the scored
// positions of each half; NaN for a half with none.
struct HalfLosses {
  double first = 0, second = 0;
  std::size_t first_tokens = 0, second_tokens = 0;
};

// From logits (B, T, V) and the batch's targets (B, T).
HalfLosses half_losses(const RepeatTask& task, const Tensor<float>& logits, const Indices& targets);
// Over held-out batches of the repeat task, one forward pass each.
HalfLosses evaluate_halves(Transformer<float>& model, const RepeatTask& task,
                           const std::vector<Batch>& batches);

// The eval set of a sequence task in batches of at most `batch` examples.
std::vector<Batch> batch_examples(const SequenceTask& task, const std::vector<Example>& examples,
                                  std::size_t batch);

// Greedy decoding of the answers: feed input + SEP, append the argmax, repeat.
std::vector<std::vector<std::int64_t>> greedy_answers(Transformer<float>& model,
                                                      const SequenceTask& task,
                                                      const std::vector<Example>& examples);

struct SampleOptions {
  std::size_t tokens = 0;
  double temperature = 1.0;  // 0: greedy
  double top_p = 1.0;        // nucleus sampling: smallest set with probability >= top_p
};

// Continues `prompt` by `options.tokens` tokens through nn/generation's cached engine
// (past the context it slides: AtContext::slide).
std::vector<std::int64_t> sample(Transformer<float>& model, std::vector<std::int64_t> prompt,
                                 const SampleOptions& options, Generator& gen);

// Picks a token from logits (V) at `temperature` with nucleus `top_p` (exposed for tests).
std::int64_t sample_logits(const float* logits, std::size_t V, double temperature, double top_p,
                           Generator& gen);

}  // namespace tapegrad::tasks
