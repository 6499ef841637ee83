// The induction study (examples/induction): its data repeat a random segment after a random
// prefix with a period that varies (a fixed one is exactly half); the head scores read
// hand-built patterns as their definitions say; and a short run of the attention-only model
// forms an induction head in layer 1 whose zeroing takes most of the repeat's advantage away,
// more than zeroing the other head of that layer.
#ifdef TAPEGRAD_WITH_INDUCTION
#include <catch2/catch.hpp>

#include <set>
#include <vector>

#include "examples/induction/study.hpp"

using namespace tapegrad;
using namespace tapegrad::induction;

TEST_CASE("induction: sequences repeat a random segment after a random prefix", "[induction]") {
  StudyOptions o;
  o.half = 8;
  o.vocab = 50;
  const Sequences s = repeated_sequences(o, 200, 7);
  const std::size_t T = 2 * o.half - 1;
  REQUIRE(s.tokens.shape()[1] == T);
  std::set<std::size_t> periods;
  for (std::size_t b = 0; b < 200; ++b) {
    const std::size_t n = s.period[b], m = s.start[b];
    CHECK(n >= 4);
    CHECK(n <= 8);
    CHECK(m + 2 * n == 2 * o.half);
    periods.insert(n);
    std::set<std::int64_t> distinct;
    for (std::size_t i = 0; i < n; ++i) {
      distinct.insert(s.tokens(b, m + i));
      if (m + n + i < T) CHECK(s.tokens(b, m + n + i) == s.tokens(b, m + i));
    }
    CHECK(distinct.size() > 1);  // random, not one token repeated
    for (std::size_t t = 0; t + 1 < T; ++t) CHECK(s.targets(b, t) == s.tokens(b, t + 1));
  }
  CHECK(periods.size() == 5);  // every period in [4, 8] occurs
  o.fixed_period = true;
  const Sequences fixed = repeated_sequences(o, 10, 7);
  for (std::size_t b = 0; b < 10; ++b) {
    CHECK(fixed.period[b] == 8);
    CHECK(fixed.start[b] == 0);
  }
}

TEST_CASE("induction: the scores read attention to i-n+1 and to i-1", "[induction]") {
  StudyOptions o;
  o.half = 4;
  o.fixed_period = true;  // n = 4, T = 7: the second copy's queries are 4, 5, 6
  const Sequences s = repeated_sequences(o, 1, 3);
  const std::size_t T = 7;
  // head 0 an exact induction head (query i >= 4 on key i - 3, else on itself), head 1 an
  // exact previous-token head (query i on i - 1; query 0 on itself)
  std::vector<float> w(2 * T * T, 0.0f);
  for (std::size_t i = 0; i < T; ++i) {
    w[i * T + (i >= 4 ? i - 3 : i)] = 1;
    w[T * T + i * T + (i >= 1 ? i - 1 : 0)] = 1;
  }
  HeadScores scores = head_scores({w}, s, 2);
  CHECK(scores.induction[0] == Approx(1.0));
  CHECK(scores.previous[1] == Approx(1.0));
  // head 0's previous-token score: only query 4 -> key 1 is not i-1... none of them is
  CHECK(scores.previous[0] == Approx(0.0));
  // head 1 puts query 4 on key 3, 5 on 4, 6 on 5: the induction keys are 1, 2, 3
  CHECK(scores.induction[1] == Approx(0.0));
  // uniform causal attention: query i gives each key 1 / (i + 1)
  std::fill(w.begin(), w.end(), 0.0f);
  for (std::size_t i = 0; i < T; ++i)
    for (std::size_t j = 0; j <= i; ++j) w[i * T + j] = w[T * T + i * T + j] = 1.0f / float(i + 1);
  scores = head_scores({w}, s, 2);
  CHECK(scores.induction[0] == Approx((1.0 / 5 + 1.0 / 6 + 1.0 / 7) / 3));
  CHECK(scores.previous[0] == Approx((1.0 / 2 + 1.0 / 3 + 1.0 / 4 + 1.0 / 5 + 1.0 / 6 + 1.0 / 7) / 6));
}

TEST_CASE("induction: a two-layer attention-only model forms an induction head in layer 1",
          "[induction]") {
  StudyOptions o;
  o.variants = {Variant::scaled};
#ifdef __SANITIZE_ADDRESS__
  o.steps = 20;  // under the sanitizers the run is exercised, not trained (Release checks it)
#else
  o.steps = 1500;
#endif
  o.eval_every = 100;
  o.vocab = 64;
  o.batch = 32;  // half the study's batch keeps the test short; the circuit forms all the same
  const RunResult r = run_one(o, Variant::scaled, 1);
  REQUIRE(r.ablation.size() == 4);
  REQUIRE(r.points.front().step == 0);
#ifndef __SANITIZE_ADDRESS__
  const EvalPoint& end = r.last();
  CHECK(end.loss_first > 3.5);    // the first copy stays unpredictable (log 64 = 4.16)
  CHECK(end.loss_repeat < 1.5);   // the second is copied
  REQUIRE(r.phase_step);
  CHECK(r.best_layer == 1);
  CHECK(r.best_induction > 0.5);
  // layer 0 holds a previous-token head
  CHECK(std::max(end.scores.previous[0], end.scores.previous[1]) > 0.4);
  // zeroing the induction head undoes most of the advantage, and more than zeroing the other
  const AblatedHead& best = r.ablation[2 + r.best_head];
  const AblatedHead& other = r.ablation[2 + (1 - r.best_head)];
  CHECK(best.loss_repeat > end.loss_repeat + 0.5 * end.in_context());
  CHECK(best.loss_repeat > other.loss_repeat);
#endif
}
#endif
