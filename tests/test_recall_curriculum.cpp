// The recall training curriculum of train_tiny_transformer (apps/train/tasks): the
// growing number of distinct pairs, the chained inputs and the dense recall targets. The
// expected values come from the documented definitions, computed here with independent
// code (never with the generator's own solve() or schedule on the other side).
#ifdef TAPEGRAD_WITH_EXAMPLES  // built only together with the example programs
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "tasks/tasks.hpp"

using namespace tapegrad;
using namespace tapegrad::tasks;

namespace {

// key -> value of the 8 pairs; fails the test if a repeated key changes its value
std::map<std::int64_t, std::int64_t> pairs_of(const std::vector<std::int64_t>& input) {
  std::map<std::int64_t, std::int64_t> value_of;
  for (std::size_t p = 0; p < 8; ++p) {
    std::int64_t k = input[2 * p], v = input[2 * p + 1];
    CHECK(k >= 0);
    CHECK(k < 16);
    CHECK(v >= 16);
    CHECK(v < 26);
    auto it = value_of.find(k);
    if (it != value_of.end()) CHECK(it->second == v);
    value_of[k] = v;
  }
  return value_of;
}

}  // namespace

TEST_CASE("recall curriculum: the largest number of distinct pairs grows in equal stages", "[tasks]") {
  SequenceTask task = SequenceTask::make("recall");
  CHECK(task.recall_max_pairs(0) == 8);  // no curriculum: 8 from the first step
  task.set_recall_min_pairs(2);
  task.set_recall_grow_steps(700);  // 7 stages (2, 3, ..., 8) of 100 steps
  CHECK(task.recall_max_pairs(0) == 2);
  CHECK(task.recall_max_pairs(99) == 2);
  CHECK(task.recall_max_pairs(100) == 3);
  CHECK(task.recall_max_pairs(350) == 5);
  CHECK(task.recall_max_pairs(599) == 7);
  CHECK(task.recall_max_pairs(600) == 8);
  CHECK(task.recall_max_pairs(700) == 8);
  CHECK(task.recall_max_pairs(100000) == 8);
  // a grow length shorter than the number of stages: one step per stage
  task.set_recall_grow_steps(3);
  CHECK(task.recall_max_pairs(0) == 2);
  CHECK(task.recall_max_pairs(2) == 4);
  CHECK(task.recall_max_pairs(3) == 8);
  CHECK_THROWS_AS(SequenceTask::make("sort").set_recall_grow_steps(10), std::invalid_argument);

  // the training inputs of a step hold between min_pairs and max_pairs(step) distinct pairs
  task.set_recall_grow_steps(700);
  Generator gen(5);
  for (std::size_t step : {0, 150, 650}) {
    std::set<std::size_t> counts;
    for (int i = 0; i < 300; ++i) {
      Example ex = task.sample_train(gen, step);
      REQUIRE(ex.input.size() == 17);
      auto value_of = pairs_of(ex.input);
      counts.insert(value_of.size());
      REQUIRE(value_of.count(ex.input[16]) == 1);
      CHECK(ex.answer == std::vector<std::int64_t>{value_of[ex.input[16]]});
    }
    INFO("step " << step);
    CHECK(*counts.begin() == 2);
    CHECK(*counts.rbegin() == (step == 0 ? 2u : step == 150 ? 3u : 8u));
  }
}

TEST_CASE("recall curriculum: chained inputs follow key + 5 mod 16 and are valid recall inputs", "[tasks]") {
  SequenceTask task = SequenceTask::make("recall");
  CHECK_THROWS_AS(task.set_recall_chain_fraction(-0.1), std::invalid_argument);
  CHECK_THROWS_AS(task.set_recall_chain_fraction(1.5), std::invalid_argument);
  CHECK_THROWS_AS(SequenceTask::make("reverse").set_recall_chain_fraction(0.5), std::invalid_argument);
  Generator gen(6);
  std::set<std::int64_t> first_keys;
  for (int i = 0; i < 200; ++i) {
    Example ex = task.generate_recall_chain(gen);
    REQUIRE(ex.input.size() == 17);
    auto value_of = pairs_of(ex.input);
    CHECK(value_of.size() == 8);  // 8 distinct keys, as in evaluation
    for (std::size_t p = 0; p + 1 < 8; ++p) CHECK(ex.input[2 * p + 2] == (ex.input[2 * p] + 5) % 16);
    CHECK(task.is_recall_chain(ex.input));
    REQUIRE(value_of.count(ex.input[16]) == 1);
    CHECK(ex.answer == std::vector<std::int64_t>{value_of[ex.input[16]]});
    first_keys.insert(ex.input[0]);
  }
  CHECK(first_keys.size() == 16);  // every starting key occurs
  std::vector<std::int64_t> plain = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 3};
  CHECK_FALSE(task.is_recall_chain(plain));

  // with fraction 1 every training input is chained; with 0.5 about half
  task.set_recall_chain_fraction(1.0);
  for (int i = 0; i < 50; ++i) CHECK(task.is_recall_chain(task.sample_train(gen, 0).input));
  task.set_recall_chain_fraction(0.5);
  int chained = 0;
  for (int i = 0; i < 1000; ++i) chained += task.is_recall_chain(task.sample_train(gen, 0).input);
  CHECK(chained > 400);
  CHECK(chained < 600);
}

TEST_CASE("recall curriculum: training inputs never fall in the held-out bucket", "[tasks]") {
  SequenceTask task = SequenceTask::make("recall");
  task.set_recall_min_pairs(2);
  task.set_recall_grow_steps(1000);
  task.set_recall_chain_fraction(0.5);
  task.set_recall_dense(true);
  // held-out inputs: 8 distinct pairs, hash bucket 0 (computed here from hash_tokens)
  std::set<std::vector<std::int64_t>> held_out;
  Generator eval_gen(7);
  for (int i = 0; i < 2000; ++i) {
    Example ex = task.sample_eval(eval_gen);
    CHECK(hash_tokens(ex.input) % 16 == 0);
    CHECK(pairs_of(ex.input).size() == 8);
    held_out.insert(ex.input);
  }
  Generator gen(8);
  std::size_t chained = 0;
  for (std::size_t step = 0; step < 1200; step += 3) {
    for (int i = 0; i < 20; ++i) {
      Example ex = task.sample_train(gen, step);
      CHECK(hash_tokens(ex.input) % 16 != 0);
      CHECK(held_out.count(ex.input) == 0);
      chained += task.is_recall_chain(ex.input);
    }
  }
  CHECK(chained > 0);
  // chained inputs that hash into bucket 0 exist, and are exactly the ones training skips
  Generator chain_gen(9);
  bool some_held_out_chain = false;
  for (int i = 0; i < 5000 && !some_held_out_chain; ++i) {
    some_held_out_chain = hash_tokens(task.generate_recall_chain(chain_gen).input) % 16 == 0;
  }
  CHECK(some_held_out_chain);
}

TEST_CASE("recall curriculum: dense and chain targets of a training batch", "[tasks]") {
  SequenceTask task = SequenceTask::make("recall");
  // keys a=0, b=1, c=2; values 16.. ; a repeats at slots 2 and 5, b at slot 4; query c
  Example rep;
  rep.input = {0, 16, 1, 17, 0, 16, 2, 18, 1, 17, 0, 16, 3, 19, 4, 20, 2};
  rep.answer = {18};
  // a chained input: keys 3, 8, 13, 2, 7, 12, 1, 6 (each + 5 mod 16); query 13
  Example chain;
  chain.input = {3, 20, 8, 21, 13, 22, 2, 23, 7, 24, 12, 25, 1, 16, 6, 17, 13};
  chain.answer = {22};
  const std::vector<Example> examples = {rep, chain};

  // the plain (evaluation) batch: only the answer position carries a target
  Batch plain = task.make_train_batch(examples);
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t t = 0; t < 18; ++t) {
      INFO("b " << b << " t " << t);
      CHECK(plain.targets(b, t) == (t == 17 ? examples[b].answer[0] : kIgnore));
    }
  }

  task.set_recall_dense(true);
  task.set_recall_chain_fraction(0.5);
  Batch batch = task.make_train_batch(examples);
  // repeated keys: slot 2 (position 4) -> a's value 16, slot 4 (position 8) -> b's 17,
  // slot 5 (position 10) -> 16; the query (position 16) -> c's value 18; answer 18
  std::map<std::size_t, std::int64_t> want_rep = {{4, 16}, {8, 17}, {10, 16}, {16, 18}, {17, 18}};
  // chain: value positions 1, 3, ..., 13 -> the next key; the query -> 22; answer 22
  std::map<std::size_t, std::int64_t> want_chain = {{1, 8},  {3, 13}, {5, 2},   {7, 7}, {9, 12},
                                                    {11, 1}, {13, 6}, {16, 22}, {17, 22}};
  for (std::size_t t = 0; t < 18; ++t) {
    INFO("t " << t);
    CHECK(batch.targets(0, t) == (want_rep.count(t) ? want_rep[t] : kIgnore));
    CHECK(batch.targets(1, t) == (want_chain.count(t) ? want_chain[t] : kIgnore));
  }
  // the inputs themselves are unchanged: input, SEP
  for (std::size_t t = 0; t < 17; ++t) CHECK(batch.tokens(0, t) == rep.input[t]);
  CHECK(batch.tokens(1, 17) == 26);
}

#endif  // TAPEGRAD_WITH_EXAMPLES
