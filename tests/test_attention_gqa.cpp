// The one attention surface (ops/attention_spec.hpp, attention() in ops/attention.hpp):
// grouped-query and multi-query attention, sliding windows, the bottom-right causal mask
// for Tq < Tk. The fused path is tested equal to the composed reference, forward and
// backward, at 1 and 2 threads; both pass gradcheck; both agree with PyTorch float64
// fixtures written by tests/make_gqa_fixtures.py; the porting traps (tiled kv heads, a
// top-left mask, a window off by one) are shown far from those fixtures; the masks are
// compared with their definition; every argument error names the op and the shapes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "ops/attention.hpp"
#include "ops/attention_fused.hpp"
#include "ops/kernels/parallel.hpp"
#include "reference.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

// max |a - b| / max |b|: the error relative to the reference's scale; NaN is infinitely far
template <class T>
double rel_diff(const Array<T>& a, const Array<T>& b) {
  REQUIRE(array_shape(a) == array_shape(b));
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(double(a.data()[i]) - double(b.data()[i]));
    err = std::max(err, std::isnan(d) ? std::numeric_limits<double>::infinity() : d);
    scale = std::max(scale, std::abs(double(b.data()[i])));
  }
  return scale > 0 ? err / scale : err;
}

template <class T>
struct Outputs {
  Array<T> out, w, dq, dk, dv;
};

// L = sum(out * g) + sum(weights * gw), so both results carry gradient
template <class T>
Outputs<T> run(AttentionPath path, const Array<T>& q0, const Array<T>& k0, const Array<T>& v0,
               const AttentionSpec& spec, const Array<T>& g, const Array<T>& gw) {
  Tensor<T> q(q0, true), k(k0, true), v(v0, true);
  const AttentionResult<T> r = attention(q, k, v, spec, path);
  (sum(r.out * Tensor<T>(g)) + sum(r.weights * Tensor<T>(gw))).backward();
  return {r.out.value(), r.weights.value(), q.grad(), k.grad(), v.grad()};
}

struct Sizes {
  std::size_t B, Tq, Tk, H, KV, dh, dv;
};

// Fused against composed for one spec and size, at 1 and 2 threads.
template <class T>
void check_paths_agree(const Sizes& s, const AttentionSpec& spec, double tol) {
  Generator gen(s.Tq * 1000 + s.Tk * 10 + s.KV);
  auto rnd = [&](const Shape& sh) { return Tensor<T>::randn(sh, gen).value(); };
  const Array<T> q = rnd({s.B, s.Tq, s.H * s.dh}), k = rnd({s.B, s.Tk, s.KV * s.dh}),
                 v = rnd({s.B, s.Tk, s.KV * s.dv});
  const Array<T> g = rnd({s.B, s.Tq, s.H * s.dv}), gw = rnd({s.B, s.H, s.Tq, s.Tk});
  const Outputs<T> ref = run(AttentionPath::composed, q, k, v, spec, g, gw);
  for (int threads : {1, 2}) {
    kernels::set_num_threads(threads);
    const Outputs<T> f = run(AttentionPath::fused, q, k, v, spec, g, gw);
    kernels::set_num_threads(1);
    INFO("threads " << threads);
    CHECK(rel_diff(f.out, ref.out) < tol);
    CHECK(rel_diff(f.w, ref.w) < tol);
    CHECK(rel_diff(f.dq, ref.dq) < tol);
    CHECK(rel_diff(f.dk, ref.dk) < tol);
    CHECK(rel_diff(f.dv, ref.dv) < tol);
  }
}

// Every mask x size x dv x scale for one (H, KV). Sizes cross the kernels' 32-row blocks
// (37, 70) and the softmax's 16-row groups; B * H * T^2 * dh at 70 is above the kernels'
// threshold for going parallel, so the 2-thread runs really use two threads.
template <class T>
void sweep(std::size_t H, std::size_t KV, double tol) {
  const std::pair<std::size_t, std::size_t> T_sizes[] = {{37, 37}, {70, 70}, {3, 7}, {1, 7}, {37, 70}};
  for (const auto& [Tq, Tk] : T_sizes)
    for (int mask = 0; mask < 5; ++mask)
      for (std::size_t dv : {16, 24})
        for (bool unit_scale : {false, true}) {
          AttentionSpec spec;
          spec.heads = H;
          spec.kv_heads = KV;
          spec.causal = mask > 0;
          const std::size_t windows[] = {0, 0, 1, 3, Tk + 2};  // last: window >= Tk
          spec.window = windows[mask];
          if (unit_scale) spec.scale = 1.0;
          INFO("H " << H << " KV " << KV << " Tq " << Tq << " Tk " << Tk << " causal "
                    << spec.causal << " window " << spec.window << " dv " << dv
                    << " scale " << (unit_scale ? "1" : "default"));
          check_paths_agree<T>({3, Tq, Tk, H, KV, 16, dv}, spec, tol);
        }
}

}  // namespace

// ---------------------------------------------------------------- fused == composed

TEST_CASE("gqa: fused equals composed for MHA in double", "[gqa]") { sweep<double>(4, 4, 1e-12); }
TEST_CASE("gqa: fused equals composed for GQA in double", "[gqa]") { sweep<double>(4, 2, 1e-12); }
TEST_CASE("gqa: fused equals composed for MQA in double", "[gqa]") { sweep<double>(4, 1, 1e-12); }
TEST_CASE("gqa: fused equals composed for MHA in float", "[gqa]") { sweep<float>(4, 4, 1e-5); }
TEST_CASE("gqa: fused equals composed for GQA in float", "[gqa]") { sweep<float>(4, 2, 1e-5); }
TEST_CASE("gqa: fused equals composed for MQA in float", "[gqa]") { sweep<float>(4, 1, 1e-5); }

// ---------------------------------------------------------------- gradcheck

namespace {

// Both paths, through out and through weights, for one spec.
void gradcheck_both_paths(const Sizes& s, const AttentionSpec& spec) {
  const std::vector<Tensor<double>> in = {random<double>({s.B, s.Tq, s.H * s.dh}, 31),
                                          random<double>({s.B, s.Tk, s.KV * s.dh}, 32),
                                          random<double>({s.B, s.Tk, s.KV * s.dv}, 33)};
  for (AttentionPath path : {AttentionPath::composed, AttentionPath::fused})
    for (bool on_weights : {false, true}) {
      INFO((path == AttentionPath::fused ? "fused" : "composed")
           << ", loss on " << (on_weights ? "weights" : "out"));
      require_gradcheck<double>(
          [&](const std::vector<Tensor<double>>& x) {
            const AttentionResult<double> r = attention(x[0], x[1], x[2], spec, path);
            return on_weights ? r.weights : r.out;
          },
          in);
    }
}

}  // namespace

TEST_CASE("gqa: gradcheck of both paths, GQA causal", "[gqa][gradcheck]") {
  gradcheck_both_paths({2, 4, 4, 4, 2, 3, 2}, make_spec(4, 2, true));
}
TEST_CASE("gqa: gradcheck of both paths, MQA non-causal with Tq < Tk", "[gqa][gradcheck]") {
  gradcheck_both_paths({2, 3, 5, 4, 1, 3, 4}, make_spec(4, 1, false, 0, 0.9));
}
TEST_CASE("gqa: gradcheck of both paths, window 2", "[gqa][gradcheck]") {
  gradcheck_both_paths({2, 5, 5, 2, 1, 3, 3}, make_spec(2, 1, true, 2));
}
TEST_CASE("gqa: gradcheck of both paths, causal Tq < Tk with a window", "[gqa][gradcheck]") {
  gradcheck_both_paths({1, 2, 6, 4, 2, 2, 3}, make_spec(4, 2, true, 3));
  gradcheck_both_paths({2, 3, 6, 2, 2, 2, 3}, make_spec(2, 2, true));
}

// ---------------------------------------------------------------- PyTorch fixtures

namespace {

const char* const kCases[] = {"gqa_causal", "mqa_noncausal_dv", "gqa_window",
                              "gqa_causal_tq_lt_tk", "mqa_window_tq_lt_tk"};

AttentionSpec fixture_spec(const std::string& c) {
  const Array<double> cfg = load_fixture("gqa", c, "config");  // H KV causal window scale
  return make_spec(std::size_t(cfg(0)), std::size_t(cfg(1)), cfg(2) != 0, std::size_t(cfg(3)),
                   cfg(4) != 0 ? std::optional<double>(cfg(4)) : std::nullopt);
}

Tensor<double> leaf(const std::string& c, const char* name) {
  return Tensor<double>(load_fixture("gqa", c, name), true);
}

}  // namespace

TEST_CASE("gqa: both paths agree with PyTorch float64 fixtures forward and backward", "[gqa][fixtures]") {
  for (const std::string c : kCases)
    for (AttentionPath path : {AttentionPath::composed, AttentionPath::fused}) {
      INFO("case " << c << (path == AttentionPath::fused ? ", fused" : ", composed"));
      const Tensor<double> q = leaf(c, "q"), k = leaf(c, "k"), v = leaf(c, "v");
      const AttentionResult<double> r = attention(q, k, v, fixture_spec(c), path);
      (sum(r.out * Tensor<double>(load_fixture("gqa", c, "gout"))) +
       sum(r.weights * Tensor<double>(load_fixture("gqa", c, "gweights"))))
          .backward();
      check_close("out", r.out.value(), load_fixture("gqa", c, "out"), 1e-10);
      check_close("weights", r.weights.value(), load_fixture("gqa", c, "weights"), 1e-10);
      check_close("dq", q.grad(), load_fixture("gqa", c, "dq"), 1e-10);
      check_close("dk", k.grad(), load_fixture("gqa", c, "dk"), 1e-10);
      check_close("dv", v.grad(), load_fixture("gqa", c, "dv"), 1e-10);
    }
}

// ---------------------------------------------------------------- porting traps

namespace {

// Attention written out with a chosen kv head per query head and a chosen (Tq, Tk) mask,
// from the primitive ops: the right variant and the traps are the same code with
// different arguments.
AttentionResult<double> variant(const std::string& c, const std::vector<std::size_t>& kv_of,
                                const std::optional<Mask>& mask) {
  const AttentionSpec spec = fixture_spec(c);
  const Tensor<double> q = leaf(c, "q"), k = leaf(c, "k"), v = leaf(c, "v");
  const std::size_t B = q.shape()[0], Tq = q.shape()[1], Tk = k.shape()[1];
  const std::size_t H = spec.heads, KV = spec.kv_heads, dh = q.shape()[2] / H,
                    dv = v.shape()[2] / KV;
  auto heads = [&](const Tensor<double>& t, std::size_t T_, std::size_t n, std::size_t w) {
    return transpose(reshape(t, Shape{B, T_, n, w}), {0, 2, 1, 3});
  };
  auto expand = [&](const Tensor<double>& t) {  // (B, KV, Tk, d) -> (B, H, Tk, d) by kv_of
    std::vector<Tensor<double>> parts;
    for (std::size_t h = 0; h < H; ++h) parts.push_back(slice(t, 1, kv_of[h], kv_of[h] + 1));
    return concatenate(parts, 1);
  };
  const AttentionResult<double> r = scaled_dot_product_attention(
      heads(q, Tq, H, dh), expand(heads(k, Tk, KV, dh)), expand(heads(v, Tk, KV, dv)), mask,
      spec.scale);
  return {reshape(transpose(r.out, {0, 2, 1, 3}), Shape{B, Tq, H * dv}), r.weights};
}

std::vector<std::size_t> interleaved(std::size_t H, std::size_t KV) {
  std::vector<std::size_t> m;
  for (std::size_t h = 0; h < H; ++h) m.push_back(h / (H / KV));
  return m;
}

// A mask from a predicate of (absolute query position i, key j), queries bottom-right.
template <class F>
Mask mask_of(std::size_t Tq, std::size_t Tk, F&& allowed) {
  Mask m = Mask::from_shape({Tq, Tk});
  for (std::size_t r = 0; r < Tq; ++r)
    for (std::size_t j = 0; j < Tk; ++j) m(r, j) = allowed(long(Tk - Tq + r), long(r), long(j));
  return m;
}

// The right variant matches the fixture (so the helper is sound) and the trap does not.
void require_trap_caught(const std::string& c, const AttentionResult<double>& right,
                         const AttentionResult<double>& trap) {
  const Array<double> out = load_fixture("gqa", c, "out"), w = load_fixture("gqa", c, "weights");
  CHECK(rel_error(right.out.value(), out) < 1e-10);
  CHECK(rel_error(right.weights.value(), w) < 1e-10);
  INFO("trap: out rel error " << rel_error(trap.out.value(), out));
  CHECK(rel_error(trap.out.value(), out) > 0.05);
}

}  // namespace

TEST_CASE("gqa trap: kv heads tiled (h % KV) instead of interleaved (h / group) is caught", "[gqa][fixtures]") {
  const std::string c = "gqa_causal";  // H 4, KV 2: interleaved 0 0 1 1, tiled 0 1 0 1
  const Mask causal = causal_mask(6);
  CHECK(interleaved(4, 2) == std::vector<std::size_t>{0, 0, 1, 1});
  require_trap_caught(c, variant(c, interleaved(4, 2), causal), variant(c, {0, 1, 0, 1}, causal));
}

TEST_CASE("gqa trap: a top-left causal mask (j <= r) for Tq < Tk is caught", "[gqa][fixtures]") {
  const std::string c = "gqa_causal_tq_lt_tk";  // Tq 3, Tk 7
  const Mask bottom_right = mask_of(3, 7, [](long i, long, long j) { return j <= i; });
  const Mask top_left = mask_of(3, 7, [](long, long r, long j) { return j <= r; });
  require_trap_caught(c, variant(c, interleaved(4, 2), bottom_right),
                      variant(c, interleaved(4, 2), top_left));
}

TEST_CASE("gqa trap: a window off by one (i - j <= w) is caught", "[gqa][fixtures]") {
  const std::string c = "gqa_window";  // T 7, window 3
  const Mask right = mask_of(7, 7, [](long i, long, long j) { return j <= i && i - j < 3; });
  const Mask off_by_one = mask_of(7, 7, [](long i, long, long j) { return j <= i && i - j <= 3; });
  require_trap_caught(c, variant(c, interleaved(4, 2), right),
                      variant(c, interleaved(4, 2), off_by_one));
}

// ---------------------------------------------------------------- masks

TEST_CASE("gqa: causal_mask(Tq, Tk) and sliding_window_mask element by element", "[gqa]") {
  // by hand: the 2 queries are positions 2 and 3 of 4
  const Mask c = causal_mask(2, 4), w = sliding_window_mask(2, 4, 2);
  const int c_expected[2][4] = {{1, 1, 1, 0}, {1, 1, 1, 1}};
  const int w_expected[2][4] = {{0, 1, 1, 0}, {0, 0, 1, 1}};
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t j = 0; j < 4; ++j) {
      CHECK(c(r, j) == bool(c_expected[r][j]));
      CHECK(w(r, j) == bool(w_expected[r][j]));
    }
  // against the definition (signed positions, so no wrap-around can hide an error)
  for (std::size_t Tk = 1; Tk <= 9; ++Tk)
    for (std::size_t Tq = 1; Tq <= Tk; ++Tq) {
      const Mask cm = causal_mask(Tq, Tk);
      REQUIRE(cm.shape()[0] == Tq);
      REQUIRE(cm.shape()[1] == Tk);
      for (std::size_t win = 1; win <= Tk + 1; ++win) {
        const Mask wm = sliding_window_mask(Tq, Tk, win);
        for (std::size_t r = 0; r < Tq; ++r)
          for (std::size_t j = 0; j < Tk; ++j) {
            const long i = long(Tk) - long(Tq) + long(r), d = i - long(j);
            CHECK(cm(r, j) == (d >= 0));
            CHECK(wm(r, j) == (d >= 0 && d < long(win)));
          }
      }
    }
  for (std::size_t T = 0; T <= 6; ++T) {
    const bool same = causal_mask(T) == causal_mask(T, T);  // xtensor: whole-array equality
    CHECK(same);
  }
}

// ---------------------------------------------------------------- kept scores

TEST_CASE("gqa: attention_scores is the softmax's input, q.k by hand under the bottom-right window", "[gqa]") {
  // H 4 over KV 2, Tq 3 of Tk 7, window 3: query row r sits at position 4 + r and sees keys
  // 2+r..4+r; query head h reads kv head h / 2
  const std::size_t B = 2, Tq = 3, Tk = 7, H = 4, KV = 2, dh = 5;
  AttentionSpec spec;
  spec.heads = H;
  spec.kv_heads = KV;
  spec.causal = true;
  spec.window = 3;
  spec.scale = 0.7;
  Generator gen(41);
  const Tensor<double> q = Tensor<double>::randn({B, Tq, H * dh}, gen),
                       k = Tensor<double>::randn({B, Tk, KV * dh}, gen),
                       v = Tensor<double>::randn({B, Tk, KV * dh}, gen);
  const Tensor<double> s = attention_scores(q, k, spec);
  REQUIRE(s.shape() == Shape{B, H, Tq, Tk});
  const Tensor<double> w = attention(q, k, v, spec, AttentionPath::fused).weights;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t r = 0; r < Tq; ++r) {
        const std::size_t at = ((b * H + h) * Tq + r) * Tk;
        double z = 0;
        for (std::size_t j = 0; j < Tk; ++j)
          if (!std::isinf(s.data()[at + j])) z += std::exp(s.data()[at + j]);
        for (std::size_t j = 0; j < Tk; ++j) {
          const long pos = long(Tk - Tq + r), gap = pos - long(j);
          INFO("b " << b << " h " << h << " r " << r << " j " << j);
          if (gap < 0 || gap >= 3) {
            CHECK(s.data()[at + j] == -std::numeric_limits<double>::infinity());
            continue;
          }
          double dot = 0;
          for (std::size_t c = 0; c < dh; ++c)
            dot += q.data()[(b * Tq + r) * H * dh + h * dh + c] *
                   k.data()[(b * Tk + j) * KV * dh + (h / 2) * dh + c];
          CHECK(s.data()[at + j] == Approx(0.7 * dot).epsilon(1e-12));
          CHECK(w.data()[at + j] == Approx(std::exp(s.data()[at + j]) / z).epsilon(1e-12));
        }
      }
  CHECK_FALSE(s.requires_grad());
}

// ---------------------------------------------------------------- errors

namespace {

// attention() on zero tensors of these shapes
std::function<void()> call(const Shape& q, const Shape& k, const Shape& v, const AttentionSpec& spec,
                           AttentionPath path = AttentionPath::fused) {
  return [=]() {
    attention(Tensor<double>::zeros(q), Tensor<double>::zeros(k), Tensor<double>::zeros(v), spec,
              path);
  };
}

}  // namespace

TEST_CASE("gqa errors: heads, kv_heads and widths, naming the op and all three shapes", "[gqa][errors]") {
  try {
    call({2, 5, 48}, {2, 5, 32}, {2, 5, 32}, make_spec(6, 4, false))();
    FAIL("no ShapeError for kv_heads not dividing heads");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()) == "attention: heads=6 is not divisible by kv_heads=4 "
                                   "(q is (2,5,48), k is (2,5,32), v is (2,5,32))");
  }
  require_shape_error(call({2, 5, 16}, {2, 5, 32}, {2, 5, 32}, make_spec(2, 4, false)),
                      {"attention", "kv_heads=4", "heads=2", "(2,5,16)", "(2,5,32)"});
  require_shape_error(call({2, 5, 16}, {2, 5, 8}, {2, 5, 8}, make_spec(0, 0, false)),
                      {"attention", "heads", "(2,5,16)"});
  // q's width not heads*head_dim: not divisible, and not the given head_dim
  require_shape_error(call({2, 5, 10}, {2, 5, 8}, {2, 5, 8}, make_spec(4, 1, false)),
                      {"attention", "D=10", "heads=4", "(2,5,10)", "(2,5,8)"});
  AttentionSpec dim8 = make_spec(2, 1, false);
  dim8.head_dim = 8;
  require_shape_error(call({2, 5, 12}, {2, 5, 8}, {2, 5, 8}, dim8),
                      {"attention", "q's width 12", "2*8", "(2,5,12)"});
  // k's width not kv_heads*head_dim; v's not a multiple of kv_heads
  require_shape_error(call({2, 5, 16}, {2, 5, 12}, {2, 5, 8}, make_spec(2, 1, false)),
                      {"attention", "k's width 12", "1*8", "(2,5,16)", "(2,5,12)", "(2,5,8)"});
  require_shape_error(call({2, 5, 16}, {2, 5, 8}, {2, 5, 7}, make_spec(4, 2, false)),
                      {"attention", "v's width 7", "kv_heads=2", "(2,5,7)"});
  // rank
  require_shape_error(call({5, 16}, {5, 16}, {5, 16}, make_spec(2, 2, false)),
                      {"attention", "(5,16)"});
}

TEST_CASE("gqa errors: batch and key counts that differ between q, k and v", "[gqa][errors]") {
  require_shape_error(call({2, 5, 16}, {3, 5, 8}, {3, 5, 8}, make_spec(2, 1, false)),
                      {"attention", "batch", "(2,5,16)", "(3,5,8)"});
  require_shape_error(call({2, 5, 16}, {2, 5, 8}, {1, 5, 8}, make_spec(2, 1, false)),
                      {"attention", "batch", "(1,5,8)"});
  require_shape_error(call({2, 5, 16}, {2, 6, 8}, {2, 5, 8}, make_spec(2, 1, false)),
                      {"attention", "Tk=6", "(2,5,16)", "(2,6,8)", "(2,5,8)"});
}

TEST_CASE("gqa errors: NaN, inf, zero and negative scales on both paths", "[gqa][errors]") {
  const double bad[] = {std::nan(""), std::numeric_limits<double>::infinity(),
                        -std::numeric_limits<double>::infinity(), 0.0, -0.5};
  const Tensor<double> x = random<double>({1, 3, 4}, 7), W = random<double>({4, 4}, 8);
  for (double s : bad)
    for (AttentionPath path : {AttentionPath::composed, AttentionPath::fused}) {
      INFO("scale " << s << (path == AttentionPath::fused ? " fused" : " composed"));
      require_shape_error(call({1, 3, 4}, {1, 3, 2}, {1, 3, 2}, make_spec(2, 1, true, 0, s), path),
                          {"attention", "scale", "(1,3,4)", "(1,3,2)"});
      // and through the multi-head wrapper, which names itself
      MultiHeadOptions o;
      o.scale = s;
      o.fused = path == AttentionPath::fused;
      require_shape_error([&]() { multi_head_attention_with_weights(x, W, W, W, W, 2, o); },
                          {"multi_head_attention_with_weights", "scale", "(1,3,4)"});
    }
  // in float a double scale can overflow: still an error, not a NaN
  require_shape_error(
      [] {
        attention(Tensor<float>::zeros({1, 3, 4}), Tensor<float>::zeros({1, 3, 4}),
                  Tensor<float>::zeros({1, 3, 4}), make_spec(2, 2, false, 0, 1e300));
      },
      {"attention", "scale", "(1,3,4)"});
}

TEST_CASE("gqa errors: window without causal, causal with Tq > Tk, bad masks", "[gqa][errors]") {
  require_shape_error(call({1, 4, 8}, {1, 4, 4}, {1, 4, 4}, make_spec(2, 1, false, 2)),
                      {"attention", "window=2", "causal", "(1,4,8)", "(1,4,4)"});
  for (std::size_t window : {0, 3})
    require_shape_error(call({1, 5, 8}, {1, 3, 4}, {1, 3, 4}, make_spec(2, 1, true, window)),
                        {"attention", "Tq=5", "Tk=3", "(1,5,8)", "(1,3,4)"});
  // non-causal attention may have more queries than keys
  CHECK_NOTHROW(call({1, 5, 8}, {1, 3, 4}, {1, 3, 4}, make_spec(2, 1, false))());
  require_shape_error([] { sliding_window_mask(3, 5, 0); }, {"sliding_window_mask", "window", "0"});
  require_shape_error([] { sliding_window_mask(6, 5, 2); }, {"sliding_window_mask", "Tq=6", "Tk=5"});
  require_shape_error([] { causal_mask(6, 5); }, {"causal_mask", "Tq=6", "Tk=5"});
}

TEST_CASE("gqa errors: fused ops given dims that do not describe their tensors", "[gqa][errors]") {
  const Shape q = {1, 4, 8}, k = {1, 6, 4};
  const AttentionDims d = check_attention_spec("test", q, k, k, make_spec(2, 1, true));
  CHECK(d.rule.q_offset == 2);
  CHECK(d.group() == 2);
  CHECK(d.head_dim == 4);
  CHECK(d.scale == Approx(0.5));
  const Tensor<double> qt = Tensor<double>::zeros(q), kt = Tensor<double>::zeros(k);
  require_shape_error([&] { attention_weights(kt, kt, d); },
                      {"attention_weights", "q is (1,6,4)", "(1,4,8)"});
  require_shape_error([&] { attention_mix(Tensor<double>::zeros({1, 2, 4, 4}), kt, d); },
                      {"attention_mix", "weights is (1,2,4,4)", "(1,2,4,6)"});
}
