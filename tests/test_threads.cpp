// One thread or two: the kernels split work over heads and batch items (OpenMP) and
// OpenBLAS may split a product, so the order of floating-point additions can change with
// the thread count, but never more than round-off. Multi-head attention forward and
// backward (fused kernels and the plain composition), elementwise ops, the norms and RoPE,
// and a whole Transformer AdamW step are run with kernels::set_num_threads(1) and (2) and
// compared element by element.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "nn/optim.hpp"
#include "nn/transformer.hpp"
#include "ops/attention.hpp"
#include "ops/norm.hpp"
#include "ops/rope.hpp"
#include "ops/kernels/gemm.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

// Runs `f` with `threads` kernel threads and restores the previous setting.
template <class F>
auto with_threads(int threads, F f) {
  const int previous = kernels::num_threads();
  kernels::set_num_threads(threads);
  struct Restore {
    int n;
    ~Restore() { kernels::set_num_threads(n); }
  } restore{previous};
  return f();
}

// max |a - b| / max(1, max |a|) over every element of every array.
template <class T>
double max_difference(const std::vector<Array<T>>& a, const std::vector<Array<T>>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(shape_str(array_shape(a[i])) == shape_str(array_shape(b[i])));
    for (std::size_t k = 0; k < a[i].size(); ++k) {
      diff = std::max(diff, std::abs(double(a[i].data()[k]) - double(b[i].data()[k])));
      scale = std::max(scale, std::abs(double(a[i].data()[k])));
    }
  }
  return diff / scale;
}

template <class T>
double round_off() {
  return std::is_same<T, float>::value ? 1e-5 : 1e-13;
}

// The MHA output and the gradients of x and of every weight, for sum(out * R).
template <class T>
std::vector<Array<T>> mha_results(bool fused, bool causal, std::size_t heads) {
  const std::size_t B = 3, Tn = 17, D = 24;
  Tensor<T> x = random<T>({B, Tn, D}, 1), Wq = random<T>({D, D}, 2), Wk = random<T>({D, D}, 3),
            Wv = random<T>({D, D}, 4), Wo = random<T>({D, D}, 5), R = random<T>({B, Tn, D}, 6, false);
  MultiHeadOptions o;
  o.causal = causal;
  o.fused = fused;
  AttentionResult<T> r = multi_head_attention_with_weights(x, Wq, Wk, Wv, Wo, heads, o);
  sum(mul(r.out, R)).backward();
  return {r.out.value(), r.weights.value(), x.grad(), Wq.grad(), Wk.grad(), Wv.grad(), Wo.grad()};
}

TransformerConfig thread_config() {
  TransformerConfig c;
  c.vocab = 13;
  c.context = 16;
  c.d_model = 32;
  c.heads = 4;
  c.layers = 2;
  c.mlp_ratio = 4;
  c.seed = 3;
  return c;
}

// Loss, every gradient and every parameter after two AdamW steps.
std::vector<Array<float>> transformer_results() {
  Transformer<float> model(thread_config());
  AdamW<float> opt(model.parameters());
  std::vector<Array<float>> out;
  Generator gen(21);
  for (int step = 0; step < 2; ++step) {
    Indices x = Indices::from_shape({8, 16}), y = Indices::from_shape({8, 16});
    for (auto& v : x) v = static_cast<std::int64_t>(gen.integer(13));
    for (auto& v : y) v = static_cast<std::int64_t>(gen.integer(13));
    opt.zero_grad();
    Tensor<float> loss = model.loss(x, y);
    loss.backward();
    out.push_back(loss.value());
    for (const Tensor<float>& p : model.parameters()) out.push_back(p.grad());
    opt.step();
  }
  for (const Tensor<float>& p : model.parameters()) out.push_back(p.value());
  return out;
}

// The outputs and input gradients of elementwise and row-wise ops, for sum(out * R), on
// (B, T, D) with B * T * D above the size from which the kernels split their loops (and,
// for the gains' gradients, the columns) between the threads.
template <class T>
std::vector<Array<T>> rowwise_results() {
  const std::size_t B = 3, Tn = 128, heads = 6, dh = 32, D = heads * dh;
  std::vector<Array<T>> out;
  const auto run = [&](const char* name, auto op, std::vector<Tensor<T>> inputs) {
    INFO(name);
    Tensor<T> z = op(inputs);
    sum(mul(z, random<T>(z.shape(), 9, false))).backward();
    out.push_back(z.value());
    for (const Tensor<T>& t : inputs) out.push_back(t.grad());
  };
  run("mul", [](auto& in) { return mul(in[0], in[1]); },
      {random<T>({B, Tn, D}, 10), random<T>({B, Tn, D}, 11)});
  run("div", [](auto& in) { return div(in[0], add(in[1], T(3))); },
      {random<T>({B, Tn, D}, 12), random<T>({B, Tn, D}, 13)});
  run("silu, exp", [](auto& in) { return exp(silu(in[0])); }, {random<T>({B, Tn, D}, 14)});
  run("layer_norm", [](auto& in) { return layer_norm(in[0], in[1], in[2]); },
      {random<T>({B, Tn, D}, 1), random<T>({D}, 2), random<T>({D}, 3)});
  run("rms_norm", [](auto& in) { return rms_norm(in[0], in[1]); },
      {random<T>({B, Tn, D}, 4), random<T>({D}, 5)});
  RopeSpec interleaved;
  interleaved.style = RopeStyle::interleaved;
  run("rope_heads", [](auto& in) { return rope_heads(in[0], 6, 3, RopeSpec{}); },
      {random<T>({B, Tn, D}, 6)});
  run("rope", [&](auto& in) { return rope(in[0], 5, interleaved); },
      {random<T>({B, heads, Tn, dh}, 7)});
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("threads: elementwise ops, norms and RoPE give the same bits with 1 and 2 threads", "[threads]", float, double) {
  // Elements and rows are independent and a gain's gradient is summed over rows in row
  // order whatever the split, so not even round-off may differ.
  const auto one = with_threads(1, rowwise_results<TestType>);
  const auto two = with_threads(2, rowwise_results<TestType>);
  CHECK(max_difference(one, two) == 0.0);
}

TEMPLATE_TEST_CASE("threads: multi-head attention forward and backward agree with 1 and 2 threads", "[threads]", float, double) {
  using T = TestType;
  for (bool fused : {true, false})
    for (bool causal : {true, false})
      for (std::size_t heads : {1, 4}) {
        INFO("fused " << fused << " causal " << causal << " heads " << heads);
        const auto one = with_threads(1, [&] { return mha_results<T>(fused, causal, heads); });
        const auto two = with_threads(2, [&] { return mha_results<T>(fused, causal, heads); });
        const double d = max_difference(one, two);
        INFO("max relative difference " << d);
        CHECK(d <= round_off<T>());
      }
}

TEST_CASE("threads: a Transformer AdamW step agrees with 1 and 2 threads", "[threads]") {
  const int before = kernels::num_threads();
  const auto one = with_threads(1, transformer_results);
  const auto two = with_threads(2, transformer_results);
  const double d = max_difference(one, two);
  INFO("max relative difference over loss, gradients and parameters: " << d);
  CHECK(d <= 1e-5);
  CHECK(kernels::num_threads() == before);
}
