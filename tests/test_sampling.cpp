// Sampling as nn/sampling.hpp defines it: a worked example's probability table (eight
// logits at three temperatures, to four decimals) reproduced, top-k ties, the crossing
// token of top-p, the off-by-one `cumsum <= p` shown failing, and a chi-square test of
// 100,000 seeded draws.
#include <cmath>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "nn/sampling.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

// A worked example: vocab and logits, then softmax(logits / T) for T = 0.5, 1.0, 1.5,
// rounded to four decimals (one row per token, one column per temperature).
const std::vector<std::string> kVocab = {"the", "a", "this", "my", "an", "our", "some", "no"};
const std::vector<double> kLogits = {8.2, 6.9, 5.4, 4.8, 4.1, 3.7, 2.2, 1.0};
const double kTable[8][3] = {
    {0.9264, 0.7155, 0.5495}, {0.0688, 0.1950, 0.2310}, {0.0034, 0.0435, 0.0850},
    {0.0010, 0.0239, 0.0570}, {0.0003, 0.0119, 0.0357}, {0.0001, 0.0079, 0.0274},
    {0.0000, 0.0018, 0.0101}, {0.0000, 0.0005, 0.0045}};

std::vector<double> probs(double temperature, std::size_t top_k = 0, double top_p = 1.0) {
  return sampling_probabilities(kLogits.data(), kLogits.size(), {temperature, top_k, top_p});
}

std::size_t kept(const std::vector<double>& p) {
  std::size_t n = 0;
  for (double x : p) n += x > 0;
  return n;
}

// The classic bug: keep the descending tokens while cumsum <= p (the crossing one dropped).
std::size_t buggy_top_p_keep(const std::vector<double>& sorted_p, double top_p) {
  double cum = 0;
  std::size_t n = 0;
  for (double x : sorted_p) {
    cum += x;
    if (cum <= top_p) ++n;
  }
  return n;
}

// Pearson's chi-square of `counts` against probabilities p (cells with p = 0 must be empty).
double chi_square(const std::vector<std::size_t>& counts, const std::vector<double>& p,
                  std::size_t n) {
  double chi2 = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      CHECK(counts[i] == 0);
      continue;
    }
    const double e = p[i] * double(n);
    chi2 += (double(counts[i]) - e) * (double(counts[i]) - e) / e;
  }
  return chi2;
}

}  // namespace

TEST_CASE("sampling: the specification's temperature table, to four decimals", "[sampling]") {
  const double temps[3] = {0.5, 1.0, 1.5};
  for (int c = 0; c < 3; ++c) {
    const std::vector<double> p = probs(temps[c]);
    for (std::size_t i = 0; i < 8; ++i) {
      INFO(kVocab[i] << " at T=" << temps[c] << ": " << p[i]);
      // printed with %.4f: the true value is within half a unit of the last digit
      CHECK(std::abs(p[i] - kTable[i][c]) <= 0.00005);
    }
  }
}

TEST_CASE("sampling: top-p 0.9 at T=1 keeps 'the' and 'a' and greedy picks 'the' at 0.7155", "[sampling]") {
  const std::vector<double> full = probs(1.0);
  const std::vector<double> p = probs(1.0, 0, 0.9);
  CHECK(kept(p) == 2);
  CHECK(p[0] > 0);
  CHECK(p[1] > 0);
  // the other six share 0.0895 of the mass, dropped before sampling
  double dropped = 0;
  for (std::size_t i = 2; i < 8; ++i) dropped += full[i];
  CHECK(std::abs(dropped - 0.0895) <= 0.00005);
  // renormalised over the two kept
  CHECK(p[0] == Approx(full[0] / (full[0] + full[1])).epsilon(1e-14));
  CHECK(p[0] + p[1] == Approx(1.0).epsilon(1e-15));
  // greedy: 'the', whose probability at T=1 is 0.7155; deterministic, no draw made
  const std::vector<double> g = probs(0.0);
  CHECK(g[0] == 1.0);
  CHECK(kept(g) == 1);
  CHECK(std::abs(full[0] - 0.7155) <= 0.00005);
  Generator a(1), b(2);
  for (int i = 0; i < 10; ++i) CHECK(sample_token(kLogits.data(), 8, {0.0, 0, 1.0}, a) == 0);
  CHECK(a.uniform() == Generator(1).uniform());  // greedy consumed nothing
  (void)b;
}

TEST_CASE("sampling: the off-by-one `cumsum <= p` drops the crossing token", "[sampling]") {
  const std::vector<double> full = probs(1.0);  // already descending
  // top-p as nn/sampling.hpp defines it keeps 2 tokens at p = 0.9; the bug keeps only 'the'
  CHECK(kept(probs(1.0, 0, 0.9)) == 2);
  CHECK(buggy_top_p_keep(full, 0.9) == 1);
  // and below the top probability it keeps nothing at all, where the right rule keeps 'the'
  CHECK(buggy_top_p_keep(full, 0.5) == 0);
  CHECK(kept(probs(1.0, 0, 0.5)) == 1);
  // top_p exactly at a cumulative sum: that prefix reaches p, nothing more is needed
  const std::vector<double> halves = {std::log(0.5), std::log(0.25), std::log(0.25)};
  CHECK(kept(sampling_probabilities(halves.data(), 3, {1.0, 0, 0.5})) == 1);
  CHECK(kept(sampling_probabilities(halves.data(), 3, {1.0, 0, 0.75})) == 2);
}

TEST_CASE("sampling: top-k keeps ties at the k-th value, applied before top-p", "[sampling]") {
  const std::vector<double> logits = {1.0, 3.0, 2.0, 2.0, 0.5, 2.0};
  auto p = [&](std::size_t k, double top_p) {
    return sampling_probabilities(logits.data(), logits.size(), {1.0, k, top_p});
  };
  CHECK(kept(p(1, 1.0)) == 1);
  CHECK(kept(p(2, 1.0)) == 4);  // 3.0, and all three 2.0 tied with the 2nd
  CHECK(p(2, 1.0)[0] == 0);
  CHECK(p(2, 1.0)[4] == 0);
  CHECK(kept(p(5, 1.0)) == 5);
  CHECK(kept(p(0, 1.0)) == 6);
  CHECK(kept(p(100, 1.0)) == 6);
  // top-p over top-k's survivors renormalised: e^3 / (e^3 + 3 e^2) = 0.475 < 0.5, so the
  // crossing token (the first 2.0, lowest id) joins it
  const std::vector<double> q = p(2, 0.5);
  CHECK(kept(q) == 2);
  CHECK(q[1] > 0);
  CHECK(q[2] > 0);
}

TEST_CASE("sampling: 100,000 seeded draws match the renormalised probabilities", "[sampling]") {
  // chi-square critical values at 0.001: 18.467 (4 degrees of freedom), 24.322 (7)
  struct Case { SamplingOptions options; double critical; };
  const Case cases[] = {{{1.5, 5, 1.0}, 18.467}, {{1.0, 0, 1.0}, 24.322}, {{1.0, 0, 0.9}, 10.828}};
  for (const Case& c : cases) {
    INFO("T=" << c.options.temperature << " top_k=" << c.options.top_k << " top_p=" << c.options.top_p);
    const std::vector<double> p = sampling_probabilities(kLogits.data(), 8, c.options);
    Generator gen(20261201);
    const std::size_t n = 100000;
    std::vector<std::size_t> counts(8, 0);
    for (std::size_t i = 0; i < n; ++i) ++counts[std::size_t(sample_token(kLogits.data(), 8, c.options, gen))];
    const double chi2 = chi_square(counts, p, n);
    INFO("chi2 = " << chi2);
    CHECK(chi2 < c.critical);
  }
  // the same seed gives the same tokens
  Generator a(7), b(7);
  for (int i = 0; i < 100; ++i)
    CHECK(sample_token(kLogits.data(), 8, {1.0, 0, 1.0}, a) == sample_token(kLogits.data(), 8, {1.0, 0, 1.0}, b));
}

TEST_CASE("sampling: a wrong distribution fails the chi-square test", "[sampling]") {
  // The test can fail: draws at T=1 judged against the T=1.5 probabilities.
  const std::vector<double> wrong = probs(1.5);
  Generator gen(3);
  std::vector<std::size_t> counts(8, 0);
  for (int i = 0; i < 100000; ++i) ++counts[std::size_t(sample_token(kLogits.data(), 8, {1.0, 0, 1.0}, gen))];
  CHECK(chi_square(counts, wrong, 100000) > 24.322);
}

TEST_CASE("sampling: bad options name the option", "[sampling]") {
  const float logits[2] = {0.f, 1.f};
  require_shape_error([&] { sampling_probabilities(logits, 2, {-0.5, 0, 1.0}); }, {"sample", "temperature", "-0.5"});
  require_shape_error([&] { sampling_probabilities(logits, 2, {1.0, 0, 0.0}); }, {"sample", "top-p", "(0, 1]"});
  require_shape_error([&] { sampling_probabilities(logits, 2, {1.0, 0, 1.5}); }, {"sample", "top-p", "1.5"});
  require_shape_error([&] { sampling_probabilities(logits, 2, {1.0, 0, std::nan("")}); }, {"sample", "top-p"});
  require_shape_error([&] { sampling_probabilities(logits, 0, {}); }, {"sample", "V=0"});
  const float nan_logit[2] = {0.f, std::nanf("")};
  require_shape_error([&] { sampling_probabilities(nan_logit, 2, {}); }, {"sample", "logit 1 of 2 is NaN"});
}
