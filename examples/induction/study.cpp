#include "examples/induction/study.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "autograd/tape.hpp"  // NoGradGuard
#include "nn/hooks.hpp"
#include "nn/interpret.hpp"
#include "nn/optim.hpp"
#include "nn/schedule.hpp"
#include "nn/transformer.hpp"

namespace tapegrad::induction {

namespace {

// The held-out sequences are the same for every run; training streams differ by seed.
constexpr std::uint64_t kEvalSeed = 0x1d0c7105ULL;

std::string pattern_point(std::size_t layer) { return block_point(layer, "attn.pattern"); }

// -log softmax(logits)[target] at position t of row b; logits (B, T, V).
double token_loss(const Array<float>& logits, const Indices& targets, std::size_t b, std::size_t t) {
  const std::size_t T = targets.shape()[1], V = logits.shape()[2];
  const float* row = logits.data() + (b * T + t) * V;
  const double top = *std::max_element(row, row + V);
  double sum = 0;
  for (std::size_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - top);
  return top + std::log(sum) - double(row[targets(b, t)]);
}

// The losses of a held-out run over each copy's predictable-or-not targets: the first copy's
// r_2..r_n (read at positions s..s+n-2) and the second's (s+n..s+2n-2). The prediction of
// the second copy's r_1 counts in neither: nothing before it says the copy begins.
void half_losses(const Array<float>& logits, const Sequences& s, double& first, double& repeat) {
  double sum_first = 0, sum_repeat = 0;
  std::size_t count = 0;
  for (std::size_t b = 0; b < s.start.size(); ++b)
    for (std::size_t k = 0; k + 1 < s.period[b]; ++k, ++count) {
      sum_first += token_loss(logits, s.targets, b, s.start[b] + k);
      sum_repeat += token_loss(logits, s.targets, b, s.start[b] + s.period[b] + k);
    }
  first = sum_first / double(count);
  repeat = sum_repeat / double(count);
}

struct Evaluation {
  EvalPoint point;
  std::vector<std::vector<float>> patterns;
};

Evaluation evaluate(Transformer<float>& model, const Sequences& held_out, const StudyOptions& o,
                    std::size_t step) {
  NoGradGuard no_grad;
  std::vector<std::string> names;
  for (std::size_t l = 0; l < o.layers; ++l) names.push_back(pattern_point(l));
  const CachedRun<float> run = run_with_cache(model, held_out.tokens, names);
  Evaluation e;
  e.point.step = step;
  half_losses(run.logits.value(), held_out, e.point.loss_first, e.point.loss_repeat);
  for (const std::string& name : names) {
    const Array<float>& w = run.cache[name].value();
    e.patterns.emplace_back(w.data(), w.data() + w.size());
  }
  e.point.scores = head_scores(e.patterns, held_out, o.heads);
  return e;
}

// Every head zeroed in turn at its attn.z point, the model otherwise unchanged.
std::vector<AblatedHead> ablate_each_head(Transformer<float>& model, const Sequences& held_out,
                                          const StudyOptions& o) {
  NoGradGuard no_grad;
  std::vector<AblatedHead> out;
  for (std::size_t l = 0; l < o.layers; ++l)
    for (std::size_t h = 0; h < o.heads; ++h) {
      Hooks<float> hooks;
      hooks.add(block_point(l, "attn.z"), zero_head<float>(h));
      AblatedHead r{l, h, 0, 0};
      half_losses(model.run_with_hooks(held_out.tokens, hooks).value(), held_out, r.loss_first,
                  r.loss_repeat);
      out.push_back(r);
    }
  return out;
}

// The first evaluation at which the second half's advantage reaches half its final size,
// when that final advantage is a real one (0.5 nats).
std::optional<std::size_t> phase_change(const std::vector<EvalPoint>& points) {
  const double final_gap = points.back().in_context();
  if (final_gap < 0.5) return std::nullopt;
  for (const EvalPoint& p : points)
    if (p.in_context() >= final_gap / 2) return p.step;
  return std::nullopt;
}

}  // namespace

EvalPoint score_given_model(Transformer<float>& model, StudyOptions o, std::uint64_t seed) {
  const TransformerConfig& c = model.config();
  if (o.vocab > c.vocab || 2 * o.half - 1 > c.context)
    throw std::invalid_argument("induction: sequences of " + std::to_string(2 * o.half - 1) +
                                " tokens over a vocab of " + std::to_string(o.vocab) +
                                " do not fit a model of vocab " + std::to_string(c.vocab) +
                                " and context " + std::to_string(c.context));
  o.layers = c.layers;
  o.heads = c.heads;
  return evaluate(model, repeated_sequences(o, o.batch, seed, true), o, 0).point;
}

std::string to_string(Variant v) {
  switch (v) {
    case Variant::scaled: return "scaled";
    case Variant::unscaled: return "unscaled";
    case Variant::qk_norm: return "qk_norm";
  }
  return "?";
}

Variant variant_of(const std::string& name) {
  for (Variant v : {Variant::scaled, Variant::unscaled, Variant::qk_norm})
    if (to_string(v) == name) return v;
  throw std::invalid_argument("unknown variant '" + name + "' (scaled, unscaled or qk_norm)");
}

TransformerConfig run_config(const StudyOptions& o, Variant v, std::uint64_t seed) {
  TransformerConfig c = gpt2_preset();
  c.vocab = o.vocab;
  c.context = 2 * o.half - 1;
  c.d_model = o.d_model;
  c.heads = o.heads;
  c.layers = o.layers;
  c.mlp = MlpKind::none;
  c.positions = o.positions;
  c.seed = seed;
  if (v == Variant::unscaled) c.attention_scale = 1.0;
  c.qk_norm = v == Variant::qk_norm;
  return c;
}

Sequences repeated_sequences(const StudyOptions& o, std::size_t batch, std::uint64_t seed,
                             bool distinct) {
  if (distinct && o.vocab < min_vocab(o))
    throw std::invalid_argument("repeated_sequences: distinct tokens need vocab >= 2 * half, got vocab " +
                                std::to_string(o.vocab) + ", half " + std::to_string(o.half));
  Generator gen(seed);
  std::vector<std::int64_t> ids(o.vocab);
  for (std::size_t v = 0; v < o.vocab; ++v) ids[v] = static_cast<std::int64_t>(v);
  // a uniform token, or with `distinct` the next of a partial Fisher-Yates shuffle
  std::size_t drawn = 0;
  auto draw = [&]() -> std::int64_t {
    if (!distinct) return static_cast<std::int64_t>(gen.integer(o.vocab));
    std::swap(ids[drawn], ids[drawn + gen.integer(o.vocab - drawn)]);
    return ids[drawn++];
  };
  const std::size_t T = 2 * o.half - 1, shortest = std::max<std::size_t>(2, o.half / 2);
  Sequences s{Indices::from_shape({batch, T}), Indices::from_shape({batch, T}), {}, {}};
  std::vector<std::int64_t> seq(2 * o.half);
  for (std::size_t b = 0; b < batch; ++b) {
    const std::size_t n = o.fixed_period ? o.half : shortest + gen.integer(o.half - shortest + 1);
    const std::size_t m = 2 * (o.half - n);  // the random prefix
    drawn = 0;
    for (std::size_t i = 0; i < m; ++i) seq[i] = draw();
    for (std::size_t i = 0; i < n; ++i) seq[m + i] = seq[m + n + i] = draw();
    s.start.push_back(m);
    s.period.push_back(n);
    for (std::size_t t = 0; t < T; ++t) {
      s.tokens(b, t) = seq[t];
      s.targets(b, t) = seq[t + 1];
    }
  }
  return s;
}

HeadScores head_scores(const std::vector<std::vector<float>>& patterns, const Sequences& seq,
                       std::size_t heads) {
  const std::size_t B = seq.tokens.shape()[0], T = seq.tokens.shape()[1];
  HeadScores s;
  for (const std::vector<float>& w : patterns)
    for (std::size_t h = 0; h < heads; ++h) {
      double induction = 0, previous = 0;
      std::size_t repeats = 0;
      for (std::size_t b = 0; b < B; ++b) {
        const float* m = w.data() + (b * heads + h) * T * T;  // (T, T): query row, key column
        const std::size_t n = seq.period[b], second = seq.start[b] + n;
        for (std::size_t i = second; i < T; ++i, ++repeats) induction += m[i * T + (i - n + 1)];
        for (std::size_t i = 1; i < T; ++i) previous += m[i * T + (i - 1)];
      }
      s.induction.push_back(induction / double(repeats));
      s.previous.push_back(previous / double(B * (T - 1)));
    }
  return s;
}

RunResult run_one(const StudyOptions& o, Variant v, std::uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  Transformer<float> model(run_config(o, v, seed));
  const Sequences held_out = repeated_sequences(o, o.eval_size, kEvalSeed, true);
  AdamW<float> opt(model.parameters(), {o.lr, 0.9, 0.98, 1e-8, 0.0});
  const WarmupCosine schedule(o.lr, o.lr / 10, std::min(o.warmup, o.steps), std::max<std::size_t>(o.steps, 1));
  RunResult r;
  r.variant = v;
  r.seed = seed;
  Evaluation e = evaluate(model, held_out, o, 0);
  r.points.push_back(e.point);
  for (std::size_t step = 1; step <= o.steps; ++step) {
    // a fresh stream per seed, the same for every variant of it
    const Sequences batch = repeated_sequences(o, o.batch, seed * 1000003 + step);
    opt.set_lr(schedule(step - 1));
    opt.zero_grad();
    model.loss(batch.tokens, batch.targets).backward();
    clip_grad_norm(model.parameters(), 1.0);
    opt.step();
    if (step % o.eval_every == 0 || step == o.steps) {
      e = evaluate(model, held_out, o, step);
      r.points.push_back(e.point);
    }
  }
  const std::vector<double>& induction = r.last().scores.induction;
  const std::size_t best = std::max_element(induction.begin(), induction.end()) - induction.begin();
  r.best_layer = best / o.heads;
  r.best_head = best % o.heads;
  r.best_induction = induction[best];
  r.phase_step = phase_change(r.points);
  r.ablation = ablate_each_head(model, held_out, o);
  const std::size_t T = 2 * o.half - 1;
  for (const std::vector<float>& w : e.patterns)  // sequence 0 of the last evaluation
    r.patterns.emplace_back(w.begin(), w.begin() + o.heads * T * T);
  r.tokens.assign(held_out.tokens.data(), held_out.tokens.data() + T);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace tapegrad::induction
