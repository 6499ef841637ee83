#pragma once
// Induction heads in a two-layer attention-only transformer (Olsson et al. 2022, "In-context
// Learning and Induction Heads"), trained on random tokens repeated once after a random
// prefix:
//     p_1 .. p_m  r_1 .. r_n  r_1 .. r_n      m + 2n = 2 * half (all but the last token read)
// with the period n drawn per sequence from [half/2, half] (or n = half, m = 0 with a fixed
// period). The first copy cannot be predicted (loss near log vocab); in the second each next
// token is the one that followed the current token's earlier occurrence, which a
// previous-token head in layer 0 and an induction head in layer 1 can copy. A fixed period
// leaves a shortcut that needs no content: with learned positions one layer can attend to
// position i - n + 1 by position alone. The study logs, over training, the loss on each
// copy and every head's scores, read through the model's hook points:
//   induction score: mean attention from query i of the second copy to key i - n + 1, the
//                    position after the current token's earlier occurrence;
//   previous-token score: mean attention from query i to key i - 1 (i >= 1).
// It finds the phase change (the step at which the second half's advantage reaches half its
// final size) and ablates every head in turn. Variants: the usual 1/sqrt(d_k) scale, no
// scale, and QK-norm.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/config.hpp"
#include "nn/transformer.hpp"
#include "ops/embedding.hpp"  // Indices

namespace tapegrad::induction {

enum class Variant { scaled, unscaled, qk_norm };
std::string to_string(Variant v);
Variant variant_of(const std::string& name);  // throws std::invalid_argument

struct StudyOptions {
  std::size_t vocab = 64, half = 16;              // tokens drawn from [0, vocab); length 2 half
  bool fixed_period = false;                      // n = half for every sequence (the shortcut)
  PositionKind positions = PositionKind::rope;
  std::size_t d_model = 64, heads = 2, layers = 2;
  std::size_t batch = 64, steps = 3000, warmup = 50, eval_every = 25, eval_size = 128;
  double lr = 1e-3;
  std::vector<std::uint64_t> seeds = {1, 2, 3};
  std::vector<Variant> variants = {Variant::scaled, Variant::unscaled, Variant::qk_norm};
};

// Per head, index layer * heads + head.
struct HeadScores {
  std::vector<double> induction, previous;
};

struct EvalPoint {
  std::size_t step = 0;
  double loss_first = 0, loss_repeat = 0;  // mean next-token loss over each copy's targets
  HeadScores scores;
  double in_context() const { return loss_first - loss_repeat; }
};

struct AblatedHead {
  std::size_t layer = 0, head = 0;
  double loss_first = 0, loss_repeat = 0;  // held out, with that head's output zeroed
};

struct RunResult {
  Variant variant = Variant::scaled;
  std::uint64_t seed = 0;
  std::vector<EvalPoint> points;          // step 0, every eval_every steps, the last step
  std::vector<AblatedHead> ablation;      // every head of every layer, one at a time
  std::optional<std::size_t> phase_step;  // none when the second half never gains 0.5 nats
  std::size_t best_layer = 0, best_head = 0;  // the head with the highest final induction score
  double best_induction = 0;                  // and that score
  std::vector<std::vector<double>> patterns;  // per layer: (heads, T, T) of held-out sequence 0
  std::vector<std::int64_t> tokens;           // that sequence, as the model read it
  double seconds = 0;
  const EvalPoint& last() const { return points.back(); }
};

// The model: the gpt2 preset with no feed-forward (mlp none), `positions`, context 2 half - 1.
TransformerConfig run_config(const StudyOptions& o, Variant v, std::uint64_t seed);
// `batch` sequences from Generator(seed): tokens (batch, T = 2 half - 1) and the next tokens
// as targets; row b's first copy starts at position start[b] and has period[b] tokens. With
// `distinct`, no token occurs twice in a row's prefix and segment (vocab >= 2 half), so each
// repeated token has one earlier occurrence: the held-out set, on which a head that follows
// induction exactly scores 1 (training data repeat tokens as chance has it).
struct Sequences {
  Indices tokens, targets;
  std::vector<std::size_t> start, period;
};
Sequences repeated_sequences(const StudyOptions& o, std::size_t batch, std::uint64_t seed,
                             bool distinct = false);
// The smallest vocab the held-out set's distinct tokens allow (run_one needs it).
inline std::size_t min_vocab(const StudyOptions& o) { return 2 * o.half; }
// patterns: one (B, heads, T, T) array per layer, row-major.
HeadScores head_scores(const std::vector<std::vector<float>>& patterns, const Sequences& s,
                       std::size_t heads);

RunResult run_one(const StudyOptions& o, Variant v, std::uint64_t seed);

// A model trained elsewhere (a checkpoint or a Hugging Face folder), read as the study reads
// its own: each copy's loss and every head's scores on o.batch held-out sequences of
// distinct tokens from [0, o.vocab) drawn from Generator(seed). o.layers and o.heads are the
// model's. std::invalid_argument when the sequences do not fit the model's vocab or context.
EvalPoint score_given_model(Transformer<float>& model, StudyOptions o, std::uint64_t seed);

}  // namespace tapegrad::induction
