// The score modifiers of AttentionSpec: ALiBi's positional bias and the logit soft-cap. Each
// path (composed, fused, flash, decode) is compared with attention written out below in
// plain loops (its own slopes, its own mask), forward and backward against each other, and
// gradchecked in double, and compared with PyTorch float64 fixtures written in plain torch ops
// by tests/make_modifier_fixtures.py; the ALiBi slopes are Hugging Face's build_alibi_tensor's.
#include <cmath>
#include <limits>
#include <vector>

#include "helpers.hpp"
#include "ops/attention.hpp"
#include "ops/attention_decode.hpp"
#include "reference.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

using D = double;

// build_alibi_tensor's slopes, written as that function computes them: base^(1..n) with
// base = 2^(-2^-(log2(n) - 3)), then extra_base^(1, 3, 5, ...) for the remaining heads.
std::vector<double> hf_alibi_slopes(std::size_t heads) {
  const std::size_t n = std::size_t(1) << std::size_t(std::floor(std::log2(double(heads))));
  const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(double(n)) - 3)));
  std::vector<double> slopes;
  for (std::size_t p = 1; p <= n; ++p) slopes.push_back(std::pow(base, double(p)));
  const double extra_base = std::pow(2.0, -std::pow(2.0, -(std::log2(2.0 * double(n)) - 3)));
  for (std::size_t r = 0; r < std::min(n, heads - n); ++r)
    slopes.push_back(std::pow(extra_base, double(2 * r + 1)));
  return slopes;
}

struct Sizes {
  std::size_t B, Tq, Tk, H, KV, dh, dv;
};

AttentionSpec spec_of(const Sizes& s, bool causal, std::size_t window, bool alibi,
                      double softcap) {
  AttentionSpec spec = make_spec(s.H, s.KV, causal, window);
  spec.bias = alibi ? PositionBias::alibi : PositionBias::none;
  spec.softcap = softcap;
  return spec;
}

// out (B, Tq, H*dv) by the definition: s = q.k / sqrt(dh); s = c tanh(s / c); s -= m_h (i - j);
// softmax over the keys j with j <= i and i - j < window (causal), i = Tk - Tq + r.
Array<D> reference(const Sizes& s, const Array<D>& q, const Array<D>& k, const Array<D>& v,
                   bool causal, std::size_t window, bool alibi, double softcap) {
  const std::vector<double> slopes = hf_alibi_slopes(s.H);
  Array<D> out = Array<D>::from_shape({s.B, s.Tq, s.H * s.dv});
  out.fill(0);
  for (std::size_t b = 0; b < s.B; ++b)
    for (std::size_t h = 0; h < s.H; ++h)
      for (std::size_t r = 0; r < s.Tq; ++r) {
        const std::size_t i = s.Tk - s.Tq + r, kv = h / (s.H / s.KV);
        std::vector<double> w(s.Tk, 0.0);
        double mx = -std::numeric_limits<double>::infinity();
        std::vector<bool> seen(s.Tk, false);
        for (std::size_t j = 0; j < s.Tk; ++j) {
          seen[j] = !causal || (j <= i && (window == 0 || i - j < window));
          if (!seen[j]) continue;
          double x = 0;
          for (std::size_t c = 0; c < s.dh; ++c)
            x += q(b, r, h * s.dh + c) * k(b, j, kv * s.dh + c);
          x /= std::sqrt(double(s.dh));
          if (softcap > 0) x = softcap * std::tanh(x / softcap);
          if (alibi) x -= slopes[h] * (double(i) - double(j));
          w[j] = x;
          mx = std::max(mx, x);
        }
        double total = 0;
        for (std::size_t j = 0; j < s.Tk; ++j)
          if (seen[j]) total += w[j] = std::exp(w[j] - mx);
        for (std::size_t j = 0; j < s.Tk; ++j)
          if (seen[j])
            for (std::size_t c = 0; c < s.dv; ++c)
              out(b, r, h * s.dv + c) += w[j] / total * v(b, j, kv * s.dv + c);
      }
  return out;
}

template <class T>
struct Results {
  Array<T> out, dq, dk, dv;
};

Results<D> run(AttentionPath path, const Array<D>& q0, const Array<D>& k0, const Array<D>& v0,
               const AttentionSpec& spec, const Array<D>& g) {
  Tensor<D> q(q0, true), k(k0, true), v(v0, true);
  const Tensor<D> out = attention(q, k, v, spec, path).out;
  sum(out * Tensor<D>(g)).backward();
  return {out.value(), q.grad(), k.grad(), v.grad()};
}

double max_abs(const Array<D>& a, const Array<D>& b) {
  REQUIRE(array_shape(a) == array_shape(b));
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(a.data()[i] - b.data()[i]);
    m = std::max(m, std::isnan(d) ? std::numeric_limits<double>::infinity() : d);
  }
  return m;
}

Array<D> randn_array(const Shape& s, std::uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  return Array<D>(Tensor<D>::randn(s, gen).value() * scale);
}

struct Case {
  const char* name;
  Sizes s;
  bool causal;
  std::size_t window;
  bool alibi;
  double softcap;
};
// scores of size ~3 (q, k scaled up) so that the soft-cap at 2 bends them, and ALiBi's
// steepest slope (1/2 at 6 heads) moves them by several units over the positions
const Case kCases[] = {
    {"alibi mha", {2, 9, 9, 2, 2, 4, 3}, true, 0, true, 0},
    {"alibi gqa 6 heads, Tq < Tk", {1, 5, 11, 6, 3, 4, 5}, true, 0, true, 0},
    {"alibi gqa window 4", {2, 9, 9, 4, 2, 4, 3}, true, 4, true, 0},
    {"alibi flash blocks", {1, 140, 150, 2, 1, 8, 4}, true, 0, true, 0},
    {"softcap full", {2, 7, 9, 4, 2, 4, 3}, false, 0, false, 2.0},
    {"softcap causal mha", {2, 9, 9, 2, 2, 4, 3}, true, 0, false, 2.0},
    {"softcap gqa window 3, Tq < Tk", {1, 6, 10, 6, 2, 4, 3}, true, 3, false, 2.0},
    {"softcap and alibi", {2, 8, 8, 6, 3, 4, 3}, true, 0, true, 2.0},
    // one kv head per query head, Tq == Tk, no window: the fused path's square kernels,
    // with rows longer than the softmax's group of 16
    {"softcap full mha", {2, 9, 9, 3, 3, 4, 3}, false, 0, false, 2.0},
    {"softcap and alibi mha", {1, 70, 70, 6, 6, 4, 5}, true, 0, true, 2.0},
    {"softcap and alibi flash blocks", {1, 130, 140, 2, 2, 8, 4}, true, 5, true, 3.0},
};

}  // namespace

TEST_CASE("alibi slopes are build_alibi_tensor's", "[attention][alibi]") {
  kernels::AttentionRule rule;
  rule.alibi = true;
  rule.H = 6;
  const double want6[] = {1.0 / 4, 1.0 / 16, 1.0 / 64, 1.0 / 256, 1.0 / 2, 1.0 / 8};
  for (std::size_t h = 0; h < 6; ++h) CHECK(rule.slope(h) == want6[h]);
  for (const std::size_t H : {1, 2, 3, 4, 5, 8, 12, 16, 20}) {
    rule.H = H;
    const std::vector<double> hf = hf_alibi_slopes(H);
    REQUIRE(hf.size() == H);
    for (std::size_t h = 0; h < H; ++h) {
      INFO("H " << H << ", head " << h);
      CHECK(rule.slope(h) == Approx(hf[h]).epsilon(1e-15));
    }
  }
  // absolute positions: query row r of Tq sits at Tk - Tq + r
  rule.H = 2;
  rule.Tk = 7;
  rule.q_offset = 4;
  CHECK(rule.bias(1, 2, 1) == -rule.slope(1) * 5.0);
}

TEST_CASE("alibi and soft-cap: every path equals attention written out in loops",
          "[attention][alibi][softcap]") {
  for (const Case& c : kCases) {
    const Sizes& s = c.s;
    const Array<D> q = randn_array({s.B, s.Tq, s.H * s.dh}, 1, 1.7);
    const Array<D> k = randn_array({s.B, s.Tk, s.KV * s.dh}, 2, 1.7);
    const Array<D> v = randn_array({s.B, s.Tk, s.KV * s.dv}, 3);
    const Array<D> want = reference(s, q, k, v, c.causal, c.window, c.alibi, c.softcap);
    const AttentionSpec spec = spec_of(s, c.causal, c.window, c.alibi, c.softcap);
    const Array<D> plain = attention(Tensor<D>(q), Tensor<D>(k), Tensor<D>(v),
                                     spec_of(s, c.causal, c.window, false, 0)).out.value();
    CHECK(max_abs(plain, want) > 1e-2);  // the modifiers do change the result
    for (const AttentionPath path :
         {AttentionPath::composed, AttentionPath::fused, AttentionPath::flash}) {
      INFO(c.name << ", path " << int(path));
      CHECK(max_abs(attention(Tensor<D>(q), Tensor<D>(k), Tensor<D>(v), spec, path).out.value(),
                    want) <= 1e-12);
    }
  }
}

TEST_CASE("alibi and soft-cap: composed and fused equal PyTorch float64 fixtures",
          "[attention][alibi][softcap][fixtures]") {
  for (const char* c : {"alibi_gqa6_tq_lt_tk", "alibi_window", "softcap_noncausal",
                        "softcap_alibi_gqa"}) {
    const Array<D> cfg = load_fixture("modifiers", c, "config");  // H KV causal window alibi c
    AttentionSpec spec = make_spec(std::size_t(cfg(0)), std::size_t(cfg(1)), cfg(2) != 0,
                                   std::size_t(cfg(3)));
    spec.bias = cfg(4) != 0 ? PositionBias::alibi : PositionBias::none;
    spec.softcap = cfg(5);
    for (const AttentionPath path : {AttentionPath::composed, AttentionPath::fused}) {
      INFO(c << ", path " << int(path));
      Tensor<D> q(load_fixture("modifiers", c, "q"), true), k(load_fixture("modifiers", c, "k"), true),
          v(load_fixture("modifiers", c, "v"), true);
      const AttentionResult<D> r = attention(q, k, v, spec, path);
      (sum(r.out * Tensor<D>(load_fixture("modifiers", c, "gout"))) +
       sum(r.weights * Tensor<D>(load_fixture("modifiers", c, "gweights"))))
          .backward();
      CHECK(rel_error(r.out.value(), load_fixture("modifiers", c, "out")) <= 1e-10);
      CHECK(rel_error(r.weights.value(), load_fixture("modifiers", c, "weights")) <= 1e-10);
      CHECK(rel_error(q.grad(), load_fixture("modifiers", c, "dq")) <= 1e-10);
      CHECK(rel_error(k.grad(), load_fixture("modifiers", c, "dk")) <= 1e-10);
      CHECK(rel_error(v.grad(), load_fixture("modifiers", c, "dv")) <= 1e-10);
    }
  }
}

TEST_CASE("alibi and soft-cap: the paths agree forward and backward", "[attention][alibi][softcap]") {
  for (const Case& c : kCases) {
    const Sizes& s = c.s;
    INFO(c.name);
    const Array<D> q = randn_array({s.B, s.Tq, s.H * s.dh}, 11, 1.7);
    const Array<D> k = randn_array({s.B, s.Tk, s.KV * s.dh}, 12, 1.7);
    const Array<D> v = randn_array({s.B, s.Tk, s.KV * s.dv}, 13);
    const Array<D> g = randn_array({s.B, s.Tq, s.H * s.dv}, 14);
    const AttentionSpec spec = spec_of(s, c.causal, c.window, c.alibi, c.softcap);
    const Results<D> ref = run(AttentionPath::composed, q, k, v, spec, g);
    for (const AttentionPath path : {AttentionPath::fused, AttentionPath::flash}) {
      INFO("path " << int(path));
      const Results<D> got = run(path, q, k, v, spec, g);
      CHECK(max_abs(got.out, ref.out) <= 1e-12);
      CHECK(max_abs(got.dq, ref.dq) <= 1e-11);
      CHECK(max_abs(got.dk, ref.dk) <= 1e-11);
      CHECK(max_abs(got.dv, ref.dv) <= 1e-11);
    }
  }
}

TEST_CASE("alibi and soft-cap: gradcheck in double on every trainable path",
          "[attention][alibi][softcap][gradcheck]") {
  // grouped with Tq < Tk, and square multi-head (the fused path's two sets of kernels)
  for (const Sizes s : {Sizes{1, 4, 6, 4, 2, 3, 2}, Sizes{1, 5, 5, 3, 3, 3, 2}}) {
    const struct {
      bool causal;
      std::size_t window;
      bool alibi;
      double softcap;
    } mods[] = {{true, 0, true, 0}, {true, 3, true, 0}, {false, 0, false, 0.8}, {true, 0, true, 0.8}};
    for (const auto& m : mods)
      for (const AttentionPath path :
           {AttentionPath::composed, AttentionPath::fused, AttentionPath::flash}) {
        INFO("alibi " << m.alibi << ", softcap " << m.softcap << ", window " << m.window
                      << ", path " << int(path));
        const AttentionSpec spec = spec_of(s, m.causal, m.window, m.alibi, m.softcap);
        require_gradcheck<D>(
            [&](const std::vector<Tensor<D>>& x) { return attention(x[0], x[1], x[2], spec, path).out; },
            {random<D>({s.B, s.Tq, s.H * s.dh}, 21, true, -1.5, 1.5),
             random<D>({s.B, s.Tk, s.KV * s.dh}, 22, true, -1.5, 1.5),
             random<D>({s.B, s.Tk, s.KV * s.dv}, 23)});
      }
  }
}

TEST_CASE("alibi and soft-cap: decode from a wrapped ring equals the full forward's last row",
          "[attention][alibi][softcap][kv_cache]") {
  // 13 positions, a window of 5 kept in a ring of 5 slots: position p sits in slot p % 5
  const std::size_t B = 2, N = 13, H = 6, KV = 3, dh = 4, dv = 3, w = 5;
  const Array<D> q = randn_array({B, N, H * dh}, 31, 1.7), k = randn_array({B, N, KV * dh}, 32, 1.7),
                 v = randn_array({B, N, KV * dv}, 33);
  Array<D> ks = Array<D>::from_shape({B, w, KV * dh}), vs = Array<D>::from_shape({B, w, KV * dv});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t p = N - w; p < N; ++p) {
      for (std::size_t c = 0; c < KV * dh; ++c) ks(b, p % w, c) = k(b, p, c);
      for (std::size_t c = 0; c < KV * dv; ++c) vs(b, p % w, c) = v(b, p, c);
    }
  const KVRing ring{w, w, (N - w) % w};
  for (const bool alibi : {true, false})
    for (const double softcap : {0.0, 2.0}) {
      INFO("alibi " << alibi << ", softcap " << softcap);
      AttentionSpec spec = make_spec(H, KV, true, w);
      spec.bias = alibi ? PositionBias::alibi : PositionBias::none;
      spec.softcap = softcap;
      const Array<D> full = attention(Tensor<D>(q), Tensor<D>(k), Tensor<D>(v), spec).out.value();
      Array<D> last = Array<D>::from_shape({B, 1, H * dv});
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t c = 0; c < H * dv; ++c) last(b, 0, c) = full(b, N - 1, c);
      Array<D> q_last = Array<D>::from_shape({B, 1, H * dh});
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t c = 0; c < H * dh; ++c) q_last(b, 0, c) = q(b, N - 1, c);
      NoGradGuard no_grad;
      const Array<D> got =
          attention_decode(Tensor<D>(q_last), Tensor<D>(ks), Tensor<D>(vs), ring, spec).value();
      CHECK(max_abs(got, last) <= 1e-13);
    }
}

TEST_CASE("alibi needs causal attention and the soft-cap 0 or a c float32 can compute with",
          "[attention][errors]") {
  const Tensor<D> q = Tensor<D>::zeros({1, 3, 8}), k = Tensor<D>::zeros({1, 3, 4});
  AttentionSpec spec = make_spec(2, 1, false);
  spec.bias = PositionBias::alibi;
  require_shape_error([&] { attention(q, k, k, spec); },
                      {"attention", "ALiBi needs causal", "(1,3,8)", "(1,3,4)"});
  // 1e-44 is 0 or subnormal in float32 and 1e39 is infinite there: a NaN either way
  for (const double c : {-1.0, std::nan(""), std::numeric_limits<double>::infinity(), 1e-44, 1e39}) {
    AttentionSpec capped = make_spec(2, 1, true);
    capped.softcap = c;
    require_shape_error([&] { attention(q, k, k, capped, AttentionPath::flash); },
                        {"attention", "softcap must be 0 (off) or in [1e-30, 1e+30]", "(1,3,8)"});
  }
}

TEST_CASE("a bias's name reads back as the same bias, and an unknown one is named", "[attention][errors]") {
  for (PositionBias b : {PositionBias::none, PositionBias::alibi})
    CHECK(position_bias_from_name("AttentionSpec", to_string(b)) == b);
  CHECK(to_string(PositionBias::alibi) == "alibi");
  CHECK(position_bias_names() == "'none', 'alibi'");
  require_shape_error([] { position_bias_from_name("AttentionSpec", "Alibi"); },
                      {"AttentionSpec", "bias must be one of 'none', 'alibi'", "'Alibi'"});
}

TEST_CASE("alibi: far keys get weight 0 or a normal number and never a subnormal one", "[attention][alibi]") {
  // Head 0 of 8 has slope 1/2: with equal scores, key j's weight for query i is about
  // exp(-(i - j) / 2), subnormal in float for distances 175-208 and 0 beyond. Products with
  // subnormal numbers take a microcode assist each: the kernels store such weights as 0.
  const std::size_t T = 256, H = 8, dh = 2;
  AttentionSpec spec = make_spec(H, H, true);
  spec.bias = PositionBias::alibi;
  const Tensor<float> q = Tensor<float>::zeros({1, T, H * dh});
  const Tensor<float> v = Tensor<float>::ones({1, T, H * dh});
  NoGradGuard no_grad;
  const AttentionResult<float> r = attention(q, q, v, spec, AttentionPath::fused);
  std::size_t zeros = 0, subnormal = 0;
  for (float w : r.weights.value()) {
    zeros += w == 0.0f;
    subnormal += std::fpclassify(w) == FP_SUBNORMAL;
  }
  CHECK(subnormal == 0);
  CHECK(zeros > T * (T - 1) / 2);  // the masked half, and the far keys of the steep heads
  // the output still averages the values: every row's weights sum to 1
  for (float y : r.out.value()) CHECK(y == Approx(1.0f).epsilon(1e-6));
}
