// The flash path (ops/attention_flash.hpp) against the composed reference: output and every
// gradient, for every mask, grouping, scale and v width, at lengths on both sides of the
// kernels' 64-query and 128-key block boundaries and at a prime; at 1 and 2 threads, which
// must agree bit for bit; gradcheck; rows that see no key; and its errors, which come from
// the one check (check_attention_spec) like every other path's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "helpers.hpp"
#include "nn/block.hpp"
#include "nn/config.hpp"
#include "nn/optim.hpp"
#include "nn/transformer.hpp"
#include "ops/attention.hpp"
#include "ops/attention_flash.hpp"
#include "ops/kernels/flash_attention.hpp"
#include "ops/kernels/parallel.hpp"
#include "ops/reduce.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

// max |a - b| / max(max |b|, floor): the error relative to the reference's scale, or to
// the size of the terms it sums when those cancel; NaN is infinitely far.
template <class T>
double rel_diff(const Array<T>& a, const Array<T>& b, double floor = 0) {
  REQUIRE(array_shape(a) == array_shape(b));
  double err = 0, scale = floor;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(double(a.data()[i]) - double(b.data()[i]));
    err = std::max(err, std::isnan(d) ? std::numeric_limits<double>::infinity() : d);
    scale = std::max(scale, std::abs(double(b.data()[i])));
  }
  return scale > 0 ? err / scale : err;
}

template <class T>
double max_abs(const Array<T>& a) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a.data()[i])));
  return m;
}

template <class T>
bool bitwise_equal(const Array<T>& a, const Array<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
struct Outputs {
  Array<T> out, dq, dk, dv;
};

// L = sum(out * g): the flash path returns no weights to put a loss on
template <class T>
Outputs<T> run(AttentionPath path, const Array<T>& q0, const Array<T>& k0, const Array<T>& v0,
               const AttentionSpec& spec, const Array<T>& g) {
  Tensor<T> q(q0, true), k(k0, true), v(v0, true);
  const AttentionResult<T> r = attention(q, k, v, spec, path);
  if (path == AttentionPath::flash) CHECK_FALSE(r.weights.defined());
  sum(r.out * Tensor<T>(g)).backward();
  return {r.out.value(), q.grad(), k.grad(), v.grad()};
}

struct Sizes {
  std::size_t B, Tq, Tk, H, KV, dh, dv;
};

// Flash against composed for one spec and size at 1 and 2 threads, and 1 == 2 bitwise.
template <class T>
void check_flash(const Sizes& s, const AttentionSpec& spec, double tol) {
  Generator gen(s.Tq * 1000 + s.Tk * 10 + s.KV + s.dv);
  auto rnd = [&](const Shape& sh) { return Tensor<T>::randn(sh, gen).value(); };
  const Array<T> q = rnd({s.B, s.Tq, s.H * s.dh}), k = rnd({s.B, s.Tk, s.KV * s.dh}),
                 v = rnd({s.B, s.Tk, s.KV * s.dv}), g = rnd({s.B, s.Tq, s.H * s.dv});
  const Outputs<T> ref = run(AttentionPath::composed, q, k, v, spec, g);
  // Float only: dq and dk sum terms scale * p * (dy . v - D) * k whose size is about
  // |dy| |v| |k|; with a window of 1 or a single key every softmax row is [1] and those terms
  // cancel exactly, so the reference is 0 (or round-off) and its own scale measures nothing.
  // Against the terms' size the tolerance still catches any real error (they are O(1)).
  // Double is held to the plain relative error.
  const bool f32 = sizeof(T) == sizeof(float);
  const double terms = f32 ? max_abs(g) * max_abs(v) * std::max(max_abs(q), max_abs(k)) : 0;
  Outputs<T> by_threads[2];
  for (int threads : {1, 2}) {
    kernels::set_num_threads(threads);
    by_threads[threads - 1] = run(AttentionPath::flash, q, k, v, spec, g);
    kernels::set_num_threads(1);
    const Outputs<T>& f = by_threads[threads - 1];
    INFO("threads " << threads);
    CHECK(rel_diff(f.out, ref.out) < tol);
    CHECK(rel_diff(f.dq, ref.dq, terms) < tol);
    CHECK(rel_diff(f.dk, ref.dk, terms) < tol);
    CHECK(rel_diff(f.dv, ref.dv) < tol);
  }
  CHECK(bitwise_equal(by_threads[0].out, by_threads[1].out));
  CHECK(bitwise_equal(by_threads[0].dq, by_threads[1].dq));
  CHECK(bitwise_equal(by_threads[0].dk, by_threads[1].dk));
  CHECK(bitwise_equal(by_threads[0].dv, by_threads[1].dv));
}

// Every mask x length for one (H, KV), alternating (dv, scale) between (dh, default) and
// (wider than dh, 1 = unscaled). Lengths: 1, a query block -1 / = / +1, a key block
// -1 / = / +1, a prime, and Tq < Tk (bottom-right). Window 70 spans key-block edges;
// window Tk + 2 is wider than every row's past. 600 keys are five key blocks, more than
// one group of the backward's key-block loop. At 129 and 131 the work is above the
// kernels' threshold for going parallel, so the 2-thread runs use two threads.
//
// The backward runs in one pass when the (batch, kv head) tasks fill the threads and in two
// otherwise; MQA with one batch item is a single task, so its 2-thread runs take two passes
// and its 1-thread runs one: their bitwise comparison shows both ways give the same bits.
template <class T>
void sweep(std::size_t H, std::size_t KV, double tol) {
  const std::size_t batch = KV == 1 ? 1 : 2;
  static_assert(kernels::kFlashQueryBlock == 64 && kernels::kFlashKeyBlock == 128,
                "the lengths below straddle these blocks");
  const std::pair<std::size_t, std::size_t> lengths[] = {
      {1, 1},     {63, 63},  {64, 64}, {65, 65},  {127, 127},
      {128, 128}, {129, 129}, {131, 131}, {1, 131}, {37, 131}, {65, 200}, {77, 600}, {600, 600}};
  int variant = 0;
  for (const auto& [Tq, Tk] : lengths)
    for (int mask = 0; mask < 5; ++mask) {
      const bool wide = variant++ % 2;
      AttentionSpec spec;
      spec.heads = H;
      spec.kv_heads = KV;
      spec.causal = mask > 0;
      const std::size_t windows[] = {0, 0, 1, 70, Tk + 2};
      spec.window = windows[mask];
      if (wide) spec.scale = 1.0;
      const std::size_t dv = wide ? 24 : 16;
      INFO("H " << H << " KV " << KV << " Tq " << Tq << " Tk " << Tk << " causal "
                << spec.causal << " window " << spec.window << " dv " << dv << " scale "
                << (wide ? "1" : "default"));
      check_flash<T>({batch, Tq, Tk, H, KV, 16, dv}, spec, tol);
    }
}

}  // namespace

TEST_CASE("flash: equals composed for MHA in double", "[flash]") { sweep<double>(4, 4, 1e-12); }
TEST_CASE("flash: equals composed for GQA in double", "[flash]") { sweep<double>(4, 2, 1e-12); }
TEST_CASE("flash: equals composed for MQA in double", "[flash]") { sweep<double>(4, 1, 1e-12); }
TEST_CASE("flash: equals composed for MHA in float", "[flash]") { sweep<float>(4, 4, 2e-6); }
TEST_CASE("flash: equals composed for GQA in float", "[flash]") { sweep<float>(4, 2, 2e-6); }
TEST_CASE("flash: equals composed for MQA in float", "[flash]") { sweep<float>(4, 1, 2e-6); }

TEST_CASE("flash: gradcheck in double on small shapes", "[flash][gradcheck]") {
  const struct {
    Sizes s;
    AttentionSpec spec;
  } cases[] = {{{2, 4, 4, 4, 2, 3, 2}, make_spec(4, 2, true)},
               {{2, 3, 5, 4, 1, 3, 4}, make_spec(4, 1, false, 0, 0.9)},
               {{2, 5, 5, 2, 1, 3, 3}, make_spec(2, 1, true, 2)},
               {{1, 2, 6, 4, 2, 2, 3}, make_spec(4, 2, true, 3, 1.0)}};
  for (const auto& c : cases) {
    const Sizes& s = c.s;
    INFO("Tq " << s.Tq << " Tk " << s.Tk << " H " << s.H << " KV " << s.KV);
    require_gradcheck<double>(
        [&](const std::vector<Tensor<double>>& x) {
          return attention(x[0], x[1], x[2], c.spec, AttentionPath::flash).out;
        },
        {random<double>({s.B, s.Tq, s.H * s.dh}, 41), random<double>({s.B, s.Tk, s.KV * s.dh}, 42),
         random<double>({s.B, s.Tk, s.KV * s.dv}, 43)});
  }
}

// With no keys at all every row is fully masked: softmax over nothing is defined as zero
// weights, so the output and every gradient are exactly 0 (and not NaN from lse = -inf).
TEST_CASE("flash: rows that see no key give zero output and zero gradient", "[flash]") {
  for (int threads : {1, 2}) {
    kernels::set_num_threads(threads);
    Tensor<double> q = random<double>({2, 70, 8}, 5), k(Array<double>::from_shape({2, 0, 4}), true),
                   v(Array<double>::from_shape({2, 0, 6}), true);
    const Tensor<double> out = attention(q, k, v, make_spec(2, 1, false), AttentionPath::flash).out;
    kernels::set_num_threads(1);
    REQUIRE(out.shape() == Shape{2, 70, 12});
    sum(out * random<double>({2, 70, 12}, 6, false)).backward();
    const Array<double> dq = q.grad();
    CHECK(std::all_of(out.data(), out.data() + out.size(), [](double x) { return x == 0; }));
    CHECK(std::all_of(dq.data(), dq.data() + dq.size(), [](double x) { return x == 0; }));
  }
}

TEST_CASE("flash errors: the one check's messages, and dims that do not fit", "[flash][errors]") {
  const Tensor<double> z = Tensor<double>::zeros({1, 3, 4}), k2 = Tensor<double>::zeros({1, 3, 2});
  for (double s : {std::nan(""), 0.0, -1.0})
    require_shape_error([&] { attention(z, k2, k2, make_spec(2, 1, true, 0, s), AttentionPath::flash); },
                        {"attention", "scale", "(1,3,4)", "(1,3,2)"});
  require_shape_error([&] { attention(z, k2, k2, make_spec(2, 1, false, 2), AttentionPath::flash); },
                      {"attention", "window=2", "causal"});
  require_shape_error([&] { attention(z, k2, k2, make_spec(3, 1, false), AttentionPath::flash); },
                      {"attention", "divisible", "(1,3,4)"});
  const AttentionDims d = check_attention_spec("test", {1, 3, 4}, {1, 3, 2}, {1, 3, 2},
                                               make_spec(2, 1, true));
  require_shape_error([&] { flash_attention(z, z, k2, d); }, {"flash_attention", "k is (1,3,4)"});
}

// ---------------------------------------------------------------- in the model

namespace {

TransformerConfig small_llama() {
  TransformerConfig c = llama_preset();
  c.vocab = 11;
  c.context = 16;
  c.d_model = 16;
  c.heads = 4;
  c.kv_heads = 2;
  c.layers = 2;
  c.seed = 3;
  return c;
}

// The loss before each of `steps` AdamW steps on one fixed batch, the model on `path`.
std::vector<double> losses(const TransformerConfig& c, AttentionPath path, int steps) {
  Transformer<double> model(c);
  model.set_attention_path(path);
  AdamW<double> opt(model.parameters(), AdamWOptions{});
  const Indices tokens = random_tokens(2, c.context, c.vocab, 8), targets = random_tokens(2, c.context, c.vocab, 9);
  std::vector<double> out;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor<double> loss = model.loss(tokens, targets);
    out.push_back(loss.value()());
    loss.backward();
    opt.step();
  }
  return out;
}

}  // namespace

TEST_CASE("flash: MultiHeadAttention takes flash from kFlashFromKeys keys unless a hook reads the pattern or a path is forced", "[flash][transformer]") {
  Generator gen(1);
  MultiHeadAttention<double> attn(8, 2, gen);
  CHECK(attn.path() == AttentionPath::flash);
  CHECK(attn.path(kFlashFromKeys - 1) == AttentionPath::fused);
  CHECK(attn.path(kFlashFromKeys) == AttentionPath::flash);
  // flash forms no weights: a run that caches the pattern at kFlashFromKeys keys takes a
  // path that does, and its rows are weights
  Hooks<double> hooks;
  hooks.cache({"attn.pattern"});
  attn.set_hooks(&hooks, "");
  const std::size_t T = kFlashFromKeys;
  attn(random<double>({1, T, 8}, 2, false));
  attn.set_hooks(nullptr, "");
  const Tensor<double>& w = hooks.activations()["attn.pattern"];
  REQUIRE(w.shape() == Shape{1, 2, T, T});
  double last_row = 0;
  for (std::size_t j = 0; j < T; ++j) last_row += w.value()(0, 1, T - 1, j);
  CHECK(last_row == Approx(1.0).epsilon(1e-12));
  attn.set_path(AttentionPath::composed);
  CHECK(attn.path() == AttentionPath::composed);
  CHECK(attn.path(kFlashFromKeys) == AttentionPath::composed);
}

// multi_head_attention returns no weights, so from kFlashFromKeys positions on it takes the
// flash path; multi_head_attention_with_weights must form them and stays fused. The two
// agree to round-off, forward and every gradient; the tape shows which op ran.
TEST_CASE("flash: multi_head_attention takes flash from kFlashFromKeys positions, with_weights stays fused", "[flash][attention]") {
  for (const bool causal : {true, false}) {
    for (const std::size_t T : {kFlashFromKeys - 1, kFlashFromKeys}) {
      INFO("causal " << causal << ", T " << T);
      const Array<double> x0 = random<double>({1, T, 16}, 11, false).value();
      std::vector<Array<double>> w0;
      for (std::uint64_t seed : {12, 13, 14, 15}) w0.push_back(random<double>({16, 16}, seed, false, -0.3, 0.3).value());
      const Array<double> g = random<double>({1, T, 16}, 16, false).value();
      auto run_op = [&](bool with_weights) {
        Tensor<double> x(x0, true), Wq(w0[0], true), Wk(w0[1], true), Wv(w0[2], true), Wo(w0[3], true);
        MultiHeadOptions options;
        options.causal = causal;
        const Tensor<double> y = with_weights
                                     ? multi_head_attention_with_weights(x, Wq, Wk, Wv, Wo, 2, options).out
                                     : multi_head_attention(x, Wq, Wk, Wv, Wo, 2, causal);
        const std::string tape = tape_string<double>();
        sum(y * Tensor<double>(g)).backward();
        return std::make_pair(tape, std::vector<Array<double>>{y.value(), x.grad(), Wq.grad(), Wk.grad(),
                                                               Wv.grad(), Wo.grad()});
      };
      const auto [plain_tape, plain] = run_op(false);
      const auto [fused_tape, fused] = run_op(true);
      const bool flash = T >= kFlashFromKeys;
      CHECK((plain_tape.find("flash_attention") != std::string::npos) == flash);
      CHECK((plain_tape.find("attention_weights") != std::string::npos) == !flash);
      CHECK(fused_tape.find("attention_weights") != std::string::npos);
      CHECK(fused_tape.find("flash_attention") == std::string::npos);
      for (std::size_t i = 0; i < plain.size(); ++i) {
        INFO("result " << i << " (y, dx, dWq, dWk, dWv, dWo)");
        CHECK(rel_diff(plain[i], fused[i]) <= 1e-12);
      }
    }
  }
}

TEST_CASE("flash: a llama model trains to the same losses with flash and with fused", "[flash][transformer]") {
  for (std::size_t window : {0, 5}) {
    TransformerConfig c = small_llama();
    c.window = window;
    INFO("window " << window);
    const std::vector<double> flash = losses(c, AttentionPath::flash, 50),
                              fused = losses(c, AttentionPath::fused, 50);
    for (std::size_t s = 0; s < flash.size(); ++s) {
      INFO("step " << s);
      CHECK(std::abs(flash[s] - fused[s]) <= 1e-10);
    }
    CHECK(flash.back() < 0.7 * flash.front());  // it did learn: the curves are not flat
  }
}
