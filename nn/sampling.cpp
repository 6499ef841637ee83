#include "nn/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/errors.hpp"

namespace tapegrad {

void check_sampling_options(const SamplingOptions& o) {
  if (!std::isfinite(o.temperature) || o.temperature < 0)
    fail("sample", "temperature must be a finite number >= 0 (0: greedy), got {}",
         o.temperature);
  if (!(o.top_p > 0 && o.top_p <= 1))
    fail("sample", "top-p must be in (0, 1] (1: off), got {}", o.top_p);
}

namespace {

// Token ids by descending z; ties keep the lower id first.
std::vector<std::size_t> descending(const std::vector<double>& z) {
  std::vector<std::size_t> order(z.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return z[a] > z[b]; });
  return order;
}

// How many of `order` survive top-k: the first k, and every later one tied with the k-th.
std::size_t top_k_count(const std::vector<double>& z, const std::vector<std::size_t>& order,
                        std::size_t k) {
  if (k == 0 || k >= order.size()) return order.size();
  std::size_t n = k;
  while (n < order.size() && z[order[n]] == z[order[k - 1]]) ++n;
  return n;
}

// How many of the first n of `order` survive top-p: the smallest prefix whose mass (of p
// renormalised over those n) reaches top_p, the crossing token included. Rounding can
// leave the mass a hair under 1 at the end, so top_p = 1 keeps all n.
std::size_t top_p_count(const std::vector<double>& p, const std::vector<std::size_t>& order,
                        std::size_t n, double top_p) {
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) total += p[order[i]];
  double mass = 0;
  for (std::size_t i = 0; i < n; ++i) {
    mass += p[order[i]] / total;
    if (mass >= top_p) return i + 1;
  }
  return n;
}

}  // namespace

template <class T>
std::vector<double> sampling_probabilities(const T* logits, std::size_t V,
                                           const SamplingOptions& o) {
  check_sampling_options(o);
  if (V == 0) fail("sample", "needs at least one logit, got V=0");
  for (std::size_t v = 0; v < V; ++v)
    if (std::isnan(double(logits[v]))) fail("sample", "logit {} of {} is NaN", v, V);
  std::vector<double> p(V, 0.0);
  if (o.temperature == 0) {  // greedy: the first largest logit
    p[std::size_t(std::max_element(logits, logits + V) - logits)] = 1.0;
    return p;
  }
  // 1. z = logits / temperature; p = softmax(z), its largest z subtracted against overflow
  std::vector<double> z(V);
  for (std::size_t v = 0; v < V; ++v) z[v] = double(logits[v]) / o.temperature;
  const double zmax = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (std::size_t v = 0; v < V; ++v) sum += p[v] = std::exp(z[v] - zmax);
  for (double& x : p) x /= sum;
  // 2. top-k, 3. top-p over what top-k kept
  const std::vector<std::size_t> order = descending(z);
  const std::size_t k = top_k_count(z, order, o.top_k);
  const std::size_t keep = top_p_count(p, order, k, o.top_p);
  // 4. renormalise the kept, zero the rest
  double kept = 0;
  for (std::size_t i = 0; i < keep; ++i) kept += p[order[i]];
  for (std::size_t i = 0; i < V; ++i) p[order[i]] = i < keep ? p[order[i]] / kept : 0.0;
  return p;
}

std::int64_t draw(const std::vector<double>& p, Generator& gen) {
  const double u = gen.uniform(0.0, 1.0);
  double mass = 0;
  std::size_t last = 0;
  for (std::size_t v = 0; v < p.size(); ++v) {
    if (p[v] <= 0) continue;
    last = v;
    mass += p[v];
    if (u < mass) return std::int64_t(v);
  }
  return std::int64_t(last);  // u within rounding of 1: the last kept token
}

template <class T>
std::int64_t sample_token(const T* logits, std::size_t V, const SamplingOptions& o,
                          Generator& gen) {
  const std::vector<double> p = sampling_probabilities(logits, V, o);
  if (o.temperature == 0) return std::int64_t(std::max_element(p.begin(), p.end()) - p.begin());
  return draw(p, gen);
}

template std::vector<double> sampling_probabilities(const float*, std::size_t,
                                                    const SamplingOptions&);
template std::vector<double> sampling_probabilities(const double*, std::size_t,
                                                    const SamplingOptions&);
template std::int64_t sample_token(const float*, std::size_t, const SamplingOptions&, Generator&);
template std::int64_t sample_token(const double*, std::size_t, const SamplingOptions&,
                                   Generator&);

}  // namespace tapegrad
