#pragma once
// Deterministic inputs: one seeded generator, so both programs feed bit-identical numbers
// to their framework; the attention inputs and the training steps' tokens.
// Part of bench/harness.hpp (which says what the harness is for).
#include "measure.hpp"

namespace bench {

// Deterministic normal numbers from our own Box-Muller on mt19937_64, so both programs
// feed bit-identical inputs to their framework.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : e_(seed) {}
  double uniform() { return (double(e_() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  double normal() {
    if (have_) {
      have_ = false;
      return spare_;
    }
    const double u = uniform(), v = uniform();
    const double r = std::sqrt(-2.0 * std::log(u));
    spare_ = r * std::sin(6.283185307179586 * v);
    have_ = true;
    return r * std::cos(6.283185307179586 * v);
  }
  std::uint64_t below(std::uint64_t n) { return e_() % n; }
  std::vector<double> normals(std::size_t n, double stddev) {
    std::vector<double> v(n);
    for (auto& x : v) x = stddev * normal();
    return v;
  }

 private:
  std::mt19937_64 e_;
  bool have_ = false;
  double spare_ = 0;
};

// Inputs of one MHA call: x (B,T,D) ~ N(0,1), the weights ~ N(0, 1/D) so every activation
// stays of unit scale (Wq, Wo (D,D); Wk, Wv (D, kv_width)), G (B,T,D) the upstream gradient.
struct MhaInputs {
  std::vector<double> x, Wq, Wk, Wv, Wo, G;
};
inline MhaInputs make_mha_inputs(const MhaShape& s, std::uint64_t seed = 42) {
  Rng r(seed);
  MhaInputs in;
  const double ws = 1.0 / std::sqrt(double(s.D));
  in.x = r.normals(s.B * s.T * s.D, 1.0);
  in.Wq = r.normals(s.D * s.D, ws);
  in.Wk = r.normals(s.D * s.kv_width(), ws);
  in.Wv = r.normals(s.D * s.kv_width(), ws);
  in.Wo = r.normals(s.D * s.D, ws);
  in.G = r.normals(s.B * s.T * s.D, 1.0);
  return in;
}

// One fixed batch of random tokens (B, T+1): inputs are [:, :T], next-token targets
// [:, 1:]. The same batch every step keeps the work identical and lets the loss fall
// (the model memorises it), which is the step's correctness check.
inline std::vector<std::int64_t> toygpt_tokens(const ToyGptShape& g) {
  Rng r(17);
  std::vector<std::int64_t> t(g.batch * (g.T() + 1));
  for (auto& v : t) v = std::int64_t(r.below(g.vocab));
  return t;
}

template <class R>
std::vector<R> cast(const std::vector<double>& v) {
  return std::vector<R>(v.begin(), v.end());
}

// The loss starts near ln(vocab) (uniform predictions) and falls while memorising.
inline void check_toygpt_losses(const ToyGptShape& g, const std::vector<double>& losses,
                                Result& r, const std::string& model = "TOY-GPT") {
  require(!losses.empty(), "no " + model + " step ran");
  const double first = losses.front(), last = losses.back(), uniform = std::log(double(g.vocab));
  r.add("first_loss", first);
  r.add("last_loss", last);
  require(std::abs(first - uniform) < 0.3,
          model + " first loss " + std::to_string(first) + " is not near ln(vocab)");
  if (losses.size() >= 5)
    require(last < first - 0.05, model + " loss did not fall on a fixed batch: " +
                                     std::to_string(first) + " -> " + std::to_string(last));
}

}  // namespace bench
