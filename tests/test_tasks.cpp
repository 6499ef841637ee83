// tasks/: the built-in tasks of train_tiny_transformer. Expected answers come
// from the definitions (a sorted permutation, the reverse, the value after the query key),
// checked here with independent code, never with the generator's own solve().
#ifdef TAPEGRAD_WITH_EXAMPLES  // built only together with the example programs
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <catch2/catch.hpp>

#include "tasks/evaluate.hpp"
#include "tasks/tasks.hpp"

using namespace tapegrad;
using namespace tapegrad::tasks;

namespace {

std::vector<std::int64_t> row_of(const Indices& a, std::size_t b) {
  std::vector<std::int64_t> out;
  for (std::size_t t = 0; t < a.shape()[1]; ++t) out.push_back(a(b, t));
  return out;
}

}  // namespace

TEST_CASE("tasks: sizes and vocabulary of the three sequence tasks", "[tasks]") {
  SequenceTask sort = SequenceTask::make("sort");
  CHECK(sort.input_len() == 8);
  CHECK(sort.answer_len() == 8);
  CHECK(sort.vocab_size() == 11);  // 10 symbols + SEP
  CHECK(sort.context() == 16);     // 8 + SEP + 8, minus the last token
  SequenceTask rev = SequenceTask::make("reverse");
  CHECK(rev.input_len() == 12);
  CHECK(rev.answer_len() == 12);
  CHECK(rev.context() == 24);
  SequenceTask recall = SequenceTask::make("recall");
  CHECK(recall.input_len() == 17);  // 8 pairs + query
  CHECK(recall.answer_len() == 1);
  CHECK(recall.vocab_size() == 27);  // 16 keys + 10 values + SEP
  CHECK_THROWS_AS(SequenceTask::make("copy"), std::invalid_argument);
  CHECK(SequenceTask::known("sort"));
  CHECK_FALSE(SequenceTask::known("Sort"));
}

TEST_CASE("tasks: sort answers are the sorted input", "[tasks]") {
  SequenceTask task = SequenceTask::make("sort");
  Generator gen(1);
  for (int i = 0; i < 200; ++i) {
    Example ex = task.generate(gen);
    REQUIRE(ex.input.size() == 8);
    REQUIRE(ex.answer.size() == 8);
    for (auto t : ex.input) REQUIRE((t >= 0 && t < 10));
    CHECK(std::is_sorted(ex.answer.begin(), ex.answer.end()));
    CHECK(std::is_permutation(ex.answer.begin(), ex.answer.end(), ex.input.begin()));
  }
  // A hand-made case.
  CHECK(task.solve({3, 1, 4, 1, 5, 9, 2, 6}) == std::vector<std::int64_t>{1, 1, 2, 3, 4, 5, 6, 9});
}

TEST_CASE("tasks: reverse answers are the reversed input", "[tasks]") {
  SequenceTask task = SequenceTask::make("reverse");
  Generator gen(2);
  for (int i = 0; i < 100; ++i) {
    Example ex = task.generate(gen);
    REQUIRE(ex.input.size() == 12);
    for (std::size_t k = 0; k < 12; ++k) CHECK(ex.answer[k] == ex.input[11 - k]);
  }
}

TEST_CASE("tasks: recall has 8 distinct keys and answers the queried value", "[tasks]") {
  SequenceTask task = SequenceTask::make("recall");
  Generator gen(3);
  std::set<std::int64_t> queried_positions;
  for (int i = 0; i < 300; ++i) {
    Example ex = task.generate(gen);
    REQUIRE(ex.input.size() == 17);
    std::set<std::int64_t> keys;
    for (std::size_t p = 0; p < 8; ++p) {
      std::int64_t k = ex.input[2 * p], v = ex.input[2 * p + 1];
      CHECK((k >= 0 && k < 16));
      CHECK((v >= 16 && v < 26));
      keys.insert(k);
    }
    CHECK(keys.size() == 8);
    std::int64_t q = ex.input[16];
    REQUIRE(keys.count(q) == 1);
    std::size_t where = 0;
    while (ex.input[2 * where] != q) ++where;
    queried_positions.insert(std::int64_t(where));
    REQUIRE(ex.answer.size() == 1);
    CHECK(ex.answer[0] == ex.input[2 * where + 1]);
  }
  CHECK(queried_positions.size() == 8);  // every pair gets queried
  // hand-made: keys a(0)..h(7) with values 16..23, query f(5) -> 21
  std::vector<std::int64_t> in;
  for (std::int64_t p = 0; p < 8; ++p) { in.push_back(p); in.push_back(16 + p); }
  in.push_back(5);
  CHECK(task.solve(in) == std::vector<std::int64_t>{21});
}

TEST_CASE("tasks: recall curriculum repeats pairs consistently and evaluates on 8 distinct", "[tasks]") {
  SequenceTask task = SequenceTask::make("recall");
  CHECK_THROWS_AS(task.set_recall_min_pairs(0), std::invalid_argument);
  CHECK_THROWS_AS(task.set_recall_min_pairs(9), std::invalid_argument);
  CHECK_THROWS_AS(SequenceTask::make("sort").set_recall_min_pairs(2), std::invalid_argument);
  task.set_recall_min_pairs(2);
  Generator gen(11);
  std::set<std::size_t> distinct_counts;
  for (int i = 0; i < 400; ++i) {
    Example ex = task.sample_train(gen);
    REQUIRE(ex.input.size() == 17);
    std::map<std::int64_t, std::int64_t> value_of;
    for (std::size_t p = 0; p < 8; ++p) {
      std::int64_t k = ex.input[2 * p], v = ex.input[2 * p + 1];
      auto it = value_of.find(k);
      if (it != value_of.end()) CHECK(it->second == v);  // a repeated key keeps its value
      value_of[k] = v;
    }
    distinct_counts.insert(value_of.size());
    REQUIRE(value_of.count(ex.input[16]) == 1);
    CHECK(ex.answer == std::vector<std::int64_t>{value_of[ex.input[16]]});
  }
  CHECK(*distinct_counts.begin() == 2);
  CHECK(*distinct_counts.rbegin() == 8);
  // held-out examples keep 8 distinct keys whatever the training mix
  Generator eval_gen(12);
  for (int i = 0; i < 100; ++i) {
    Example ex = task.sample_eval(eval_gen);
    std::set<std::int64_t> keys;
    for (std::size_t p = 0; p < 8; ++p) keys.insert(ex.input[2 * p]);
    CHECK(keys.size() == 8);
  }
}

TEST_CASE("tasks: batches put SEP after the input and loss only on the answer", "[tasks]") {
  for (const std::string name : {"sort", "reverse", "recall"}) {
    SequenceTask task = SequenceTask::make(name);
    Generator gen(4);
    std::vector<Example> examples;
    for (int i = 0; i < 5; ++i) examples.push_back(task.generate(gen));
    Batch batch = task.make_batch(examples);
    const std::size_t L = task.input_len(), A = task.answer_len(), T = task.context();
    REQUIRE(batch.tokens.shape() == std::vector<std::size_t>{5, T});
    REQUIRE(batch.targets.shape() == std::vector<std::size_t>{5, T});
    for (std::size_t b = 0; b < 5; ++b) {
      std::vector<std::int64_t> tok = row_of(batch.tokens, b), tgt = row_of(batch.targets, b);
      for (std::size_t t = 0; t < L; ++t) {
        CHECK(tok[t] == examples[b].input[t]);
        CHECK(tgt[t] == kIgnore);
      }
      CHECK(tok[L] == task.separator());
      for (std::size_t i = 0; i < A; ++i) CHECK(tgt[L + i] == examples[b].answer[i]);
      // teacher forcing: the answer is fed back one position later
      for (std::size_t i = 0; i + 1 < A; ++i) CHECK(tok[L + 1 + i] == examples[b].answer[i]);
    }
  }
}

TEST_CASE("tasks: the same seed gives the same batches", "[tasks]") {
  SequenceTask task = SequenceTask::make("sort");
  Generator a(42), b(42), c(43);
  Batch x = task.train_batch(16, a), y = task.train_batch(16, b), z = task.train_batch(16, c);
  CHECK((x.tokens == y.tokens));
  CHECK((x.targets == y.targets));
  CHECK_FALSE((x.tokens == z.tokens));
}

TEST_CASE("tasks: held-out inputs never appear in training batches", "[tasks]") {
  for (const std::string name : {"sort", "reverse", "recall"}) {
    SequenceTask task = SequenceTask::make(name);
    Generator eval_gen(7), train_gen(8), any_gen(9);
    std::set<std::vector<std::int64_t>> eval_inputs;
    for (int i = 0; i < 500; ++i) {
      Example ex = task.sample_eval(eval_gen);
      CHECK(task.is_held_out(ex.input));
      eval_inputs.insert(ex.input);
    }
    std::size_t collisions = 0;
    for (int i = 0; i < 200; ++i) {
      Batch batch = task.train_batch(32, train_gen);
      for (std::size_t b = 0; b < 32; ++b) {
        std::vector<std::int64_t> tok = row_of(batch.tokens, b);
        std::vector<std::int64_t> input(tok.begin(), tok.begin() + std::ptrdiff_t(task.input_len()));
        CHECK_FALSE(task.is_held_out(input));
        collisions += eval_inputs.count(input);
      }
    }
    CHECK(collisions == 0);
    // The held-out bucket is about 1/16 of all inputs (6400 draws: 400 expected, sd ~19).
    std::size_t held = 0;
    for (int i = 0; i < 6400; ++i) held += task.is_held_out(task.generate(any_gen).input);
    CHECK(held > 300);
    CHECK(held < 500);
  }
}

TEST_CASE("tasks: an input always lands on the same side of the split", "[tasks]") {
  // The side is a function of the input alone (its hash), so no seed can leak a held-out
  // input into training.
  SequenceTask task = SequenceTask::make("sort");
  std::vector<std::int64_t> in{0, 1, 2, 3, 4, 5, 6, 7};
  bool first = task.is_held_out(in);
  for (int i = 0; i < 10; ++i) CHECK(task.is_held_out(in) == first);
  CHECK(hash_tokens(in) == hash_tokens(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  CHECK(hash_tokens(in) != hash_tokens(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 7, 6}));
}

TEST_CASE("tasks: text vocabulary is the distinct code points and windows shift by one", "[tasks]") {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "h\xc3\xa9llo w\xc3\xb6rld ";  // 12 characters each
  TextTask task = TextTask::from_string(text, 8);
  // distinct: ' ' d h l o r w é ö
  CHECK(task.vocab_size() == 9);
  CHECK(task.decode(task.encode("h\xc3\xa9llo")) == "h\xc3\xa9llo");
  CHECK(task.train_tokens() + task.eval_tokens() == 480);
  CHECK(task.eval_tokens() == 48);
  Generator gen(5);
  Batch batch = task.train_batch(4, gen);
  REQUIRE(batch.tokens.shape() == std::vector<std::size_t>{4, 8});
  for (std::size_t b = 0; b < 4; ++b)
    for (std::size_t t = 0; t + 1 < 8; ++t) CHECK(batch.targets(b, t) == batch.tokens(b, t + 1));
  std::vector<Batch> eval = task.eval_batches(2, 100);
  std::size_t windows = 0;
  for (const Batch& b : eval) windows += b.tokens.shape()[0];
  CHECK(windows == (48 - 1) / 8);
  CHECK_THROWS_AS(TextTask::from_string("too short", 8), std::runtime_error);
  CHECK_THROWS_AS(TextTask::from_file("/nonexistent/file.txt", 8), std::runtime_error);
}
#endif

#ifdef TAPEGRAD_WITH_EXAMPLES
#include "tasks/evaluate.hpp"

TEST_CASE("tasks: text sampling honours temperature 0 and the top-p nucleus", "[tasks]") {
  using tapegrad::tasks::sample_logits;
  const float logits[4] = {0.0f, 2.0f, 1.0f, -1.0f};
  tapegrad::Generator gen(5);
  // temperature 0 is greedy
  for (int i = 0; i < 20; ++i) CHECK(sample_logits(logits, 4, 0.0, 1.0, gen) == 1);
  // softmax(logits) = (0.0871, 0.6439, 0.2369, 0.0321): top-p 0.5 keeps only token 1,
  // top-p 0.8 keeps tokens 1 and 2
  for (int i = 0; i < 50; ++i) CHECK(sample_logits(logits, 4, 1.0, 0.5, gen) == 1);
  int counts[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4000; ++i) ++counts[sample_logits(logits, 4, 1.0, 0.8, gen)];
  CHECK(counts[0] == 0);
  CHECK(counts[3] == 0);
  // renormalised over {1, 2}: 0.6439 / 0.8808 = 0.731 (sd of the count ~28)
  CHECK(counts[1] > 4000 * 0.731 - 150);
  CHECK(counts[1] < 4000 * 0.731 + 150);
  // top-p 1: every token appears, token 3 about 3.2% of the time
  int all[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4000; ++i) ++all[sample_logits(logits, 4, 1.0, 1.0, gen)];
  CHECK(all[3] > 60);
  CHECK(all[3] < 200);
}
#endif

#ifdef TAPEGRAD_WITH_EXAMPLES
// The documented token layout (tasks/sequence_task.hpp, docs/TRAINING.md) against what the
// generators put at each position of a sequence, checked position by position.
TEST_CASE("tasks: token_ranges states the layout the generators follow", "[tasks]") {
  using tapegrad::tasks::TokenRange;
  const std::map<std::string, std::vector<std::pair<std::string, std::pair<int, int>>>> want = {
      {"sort", {{"symbol", {0, 9}}, {"separator", {10, 10}}}},
      {"reverse", {{"symbol", {0, 9}}, {"separator", {10, 10}}}},
      {"recall", {{"key", {0, 15}}, {"value", {16, 25}}, {"separator", {26, 26}}}}};
  for (const auto& [name, ranges] : want) {
    INFO(name);
    const SequenceTask task = SequenceTask::make(name);
    const std::vector<TokenRange> got = task.token_ranges();
    REQUIRE(got.size() == ranges.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].role == ranges[i].first);
      CHECK(got[i].first == ranges[i].second.first);
      CHECK(got[i].last == ranges[i].second.second);
    }
    CHECK(got.back().first == task.separator());
    CHECK(std::size_t(got.back().last) + 1 == task.vocab_size());
    // the role of every position of generated sequences
    auto role_of = [&](std::int64_t id) {
      for (const TokenRange& r : got)
        if (id >= r.first && id <= r.last) return r.role;
      return std::string("none");
    };
    tapegrad::Generator gen(9);
    for (int n = 0; n < 50; ++n) {
      const std::vector<std::int64_t> seq = task.sequence(task.generate(gen));
      REQUIRE(seq.size() == task.context() + 1);
      for (std::size_t t = 0; t < seq.size(); ++t) {
        INFO("position " << t);
        const std::size_t L = task.input_len();
        const std::string expected = t == L ? "separator"
                                     : name != "recall" ? "symbol"
                                     : t > L ? "value"
                                     : t == L - 1 || t % 2 == 0 ? "key" : "value";
        CHECK(role_of(seq[t]) == expected);
      }
    }
  }
  CHECK(SequenceTask::make("sort").layout() ==
        "sort: symbols 0..9, separator 10; a sequence is 8 symbols, SEP, the symbols sorted "
        "ascending (17 tokens; the model reads the first 16)");
  CHECK(SequenceTask::make("recall").layout() ==
        "recall: keys 0..15, values 16..25, separator 26; a sequence is 8 (key, value) pairs "
        "then a query key, SEP, the query key's value (19 tokens; the model reads the first 18)");
}

TEST_CASE("tasks: text_warning flags bytes that are not UTF-8 text", "[tasks]") {
  using tapegrad::tasks::text_warning;
  // ordinary text, accents and tabs included: no warning
  CHECK(text_warning("h\xc3\xa9llo\tw\xc3\xb6rld\r\nline two\n").empty());
  CHECK(text_warning("").empty());
  // a Latin-1 byte: not valid UTF-8
  const std::string latin1 = text_warning("caf\xe9 au lait");
  CHECK_THAT(latin1, Catch::Contains("1 of 12 bytes are not valid UTF-8"));
  // valid UTF-8 but mostly control characters, as a binary file's NULs
  std::string nuls = "ELF";
  nuls += std::string(40, '\0');
  CHECK_THAT(text_warning(nuls), Catch::Contains("40 of 43 characters are control characters"));
  // an executable-like mix: both reasons
  std::string binary;
  for (int i = 0; i < 256; ++i) binary += char(i);
  const std::string both = text_warning(binary);
  CHECK_THAT(both, Catch::Contains("not valid UTF-8") && Catch::Contains("control characters"));
  // one control character in 20 is still text (a form feed, a stray escape)
  std::string some = std::string(19, 'a') + "\x1b";
  CHECK(text_warning(some).empty());
  CHECK_FALSE(text_warning(some + "\x1b").empty());
}
TEST_CASE("tasks: repeat sequences are random tokens and then the same tokens again",
          "[tasks][repeat]") {
  const RepeatTask task(8, 16);
  CHECK(task.vocab_size() == 16);
  CHECK(task.context() == 15);  // 16 tokens, the last never read
  Generator gen(5);
  const Batch batch = task.train_batch(64, gen);
  REQUIRE(batch.tokens.shape()[0] == 64);
  REQUIRE(batch.tokens.shape()[1] == 15);
  std::set<std::int64_t> seen;
  for (std::size_t b = 0; b < 64; ++b) {
    // the full sequence: the tokens and the last target
    std::vector<std::int64_t> seq = row_of(batch.tokens, b);
    seq.push_back(batch.targets(b, 14));
    const std::vector<std::int64_t> first(seq.begin(), seq.begin() + 8), second(seq.begin() + 8, seq.end());
    CHECK(second == first);
    CHECK(std::set<std::int64_t>(first.begin(), first.end()).size() > 1);  // not constant
    CHECK(!task.is_held_out(first));
    for (std::int64_t t : first) {
      CHECK(t >= 0);
      CHECK(t < 16);
      seen.insert(t);
    }
    // next-token targets at every position, none ignored
    for (std::size_t t = 0; t < 15; ++t) CHECK(batch.targets(b, t) == seq[t + 1]);
  }
  CHECK(seen.size() == 16);  // 512 uniform draws over 16 symbols reach every one
  Generator eval_gen(6);
  for (const Batch& held : task.eval_batches(10, 25, eval_gen)) {
    for (std::size_t b = 0; b < held.tokens.shape()[0]; ++b) {
      const std::vector<std::int64_t> row = row_of(held.tokens, b);
      CHECK(task.is_held_out({row.begin(), row.begin() + 8}));
    }
  }
  CHECK_THROWS_WITH(RepeatTask(1, 16), Catch::Contains("length=1"));
  CHECK_THROWS_WITH(RepeatTask(4, 3), Catch::Contains("81 distinct sequences"));
}

TEST_CASE("tasks: repeat half losses are taken over each half's positions", "[tasks][repeat]") {
  // length 4, so the model reads 7 tokens: positions 0..2 predict the random tokens 1..3
  // (first half), positions 3..6 predict the copy, tokens 4..7 (second half; position 3
  // predicts the copy's first token). Position t's logits are t on its target and 0 on the
  // other 3 symbols, so its loss is log(e^t + 3) - t: a different value at every position,
  // and a half taken one position off gives a different mean.
  const RepeatTask task(4, 4);
  const std::vector<std::int64_t> first_half = {2, 0, 3, 1};
  const Batch batch = task.make_batch({first_half});
  Array<float> logits = xt::zeros<float>({std::size_t(1), std::size_t(7), std::size_t(4)});
  auto loss_at = [](double t) { return std::log(std::exp(t) + 3) - t; };
  for (std::size_t t = 0; t < 7; ++t) logits(0, t, std::size_t(batch.targets(0, t))) = float(t);
  const HalfLosses h = half_losses(task, Tensor<float>(logits), batch.targets);
  CHECK(h.first_tokens == 3);
  CHECK(h.second_tokens == 4);
  CHECK(h.first == Approx((loss_at(0) + loss_at(1) + loss_at(2)) / 3).epsilon(1e-6));
  CHECK(h.second == Approx((loss_at(3) + loss_at(4) + loss_at(5) + loss_at(6)) / 4).epsilon(1e-6));
  // the masks themselves: each keeps its own half's targets and ignores the other's
  const Indices firsts = task.half_targets(batch.targets, RepeatTask::Half::first);
  const Indices seconds = task.half_targets(batch.targets, RepeatTask::Half::second);
  CHECK(row_of(firsts, 0) == std::vector<std::int64_t>{0, 3, 1, kIgnore, kIgnore, kIgnore, kIgnore});
  CHECK(row_of(seconds, 0) == std::vector<std::int64_t>{kIgnore, kIgnore, kIgnore, 2, 0, 3, 1});
}
TEST_CASE("tasks: evaluation splits a batch whose logits would not fit and the results stay the same", "[tasks]") {
  SequenceTask task = SequenceTask::make("sort");
  Generator gen(7);
  std::vector<Example> examples;
  for (int i = 0; i < 10; ++i) examples.push_back(task.sample_eval(gen));
  const std::vector<Batch> whole = {task.make_batch(examples)};
  const std::size_t T = whole[0].tokens.shape()[1], V = task.vocab_size();
  const std::size_t three = 3 * T * V * sizeof(float);
  const std::vector<Batch> groups = groups_whose_logits_fit(whole, V, three);
  REQUIRE(groups.size() == 4);  // 3 + 3 + 3 + 1 sequences
  std::size_t row = 0;
  for (const Batch& g : groups)
    for (std::size_t b = 0; b < g.tokens.shape()[0]; ++b, ++row) {
      CHECK(row_of(g.tokens, b) == row_of(whole[0].tokens, row));
      CHECK(row_of(g.targets, b) == row_of(whole[0].targets, row));
    }
  CHECK(row == 10);
  CHECK(groups_whose_logits_fit(whole, V, 10 * T * V * sizeof(float)).size() == 1);
  CHECK(groups_whose_logits_fit(whole, V, 1).size() == 10);  // one sequence at least

  TransformerConfig c;
  c.vocab = V;
  c.context = T;
  c.d_model = 16;
  c.seed = 3;
  Transformer<float> model(c);
  const EvalResult at_once = evaluate(model, whole), grouped = evaluate(model, whole, three);
  CHECK(grouped.loss == Approx(at_once.loss).epsilon(1e-6));
  CHECK(grouped.token_accuracy == at_once.token_accuracy);
  CHECK(grouped.exact_accuracy == at_once.exact_accuracy);
  CHECK(grouped.sequences == 10);
  CHECK(grouped.tokens == at_once.tokens);
}
#endif
