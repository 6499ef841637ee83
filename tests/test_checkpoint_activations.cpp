// Activation checkpointing: autograd/checkpoint.hpp's node (its forward keeps x only, its
// backward runs f again on a scope of its own) against f recorded in place, bit for bit;
// the tape scopes it runs on; gradcheck; an edited parameter; and the model option
// checkpoint_activations (every block checkpointed) against the plain model.
#include <catch2/catch.hpp>

#include <cstring>

#include "helpers.hpp"
#include "tapegrad.hpp"
#include "tapegrad_nn.hpp"

using namespace tapegrad;

namespace {

template <class T>
bool same_bits(const Array<T>& a, const Array<T>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// A residual block of its own: x + tanh(x @ W1) @ W2, x (B, T, D)
template <class T>
struct TwoLayers {
  Tensor<T> w1, w2;
  explicit TwoLayers(std::uint64_t seed, std::size_t D = 6, std::size_t H = 10) {
    Generator g(seed);
    w1 = Tensor<T>::randn({D, H}, g, T(0), T(0.5), true);
    w2 = Tensor<T>::randn({H, D}, g, T(0), T(0.5), true);
  }
  Tensor<T> operator()(const Tensor<T>& x) const { return x + matmul(tanh(matmul(x, w1)), w2); }
  std::vector<Tensor<T>> parameters() const { return {w1, w2}; }
};

template <class T>
struct Grads {
  Array<T> loss, input;
  std::vector<Array<T>> params;
};

// loss = sum(y^2) with y = three blocks over x = 2 * a, checkpointed or not
template <class T>
Grads<T> three_blocks(bool checkpointed) {
  Generator g(1);
  Tensor<T> a = Tensor<T>::randn({2, 5, 6}, g, T(0), T(1), true);
  const TwoLayers<T> blocks[3] = {TwoLayers<T>(2), TwoLayers<T>(3), TwoLayers<T>(4)};
  Tensor<T> x = a * T(2);
  for (const TwoLayers<T>& b : blocks)
    x = checkpointed ? checkpoint<T>(x, b.parameters(), [&b](const Tensor<T>& in) { return b(in); })
                     : b(x);
  Tensor<T> loss = sum(x * x);
  Grads<T> r{loss.value(), {}, {}};
  loss.backward();
  r.input = a.grad();
  for (const TwoLayers<T>& b : blocks)
    for (const Tensor<T>& p : b.parameters()) r.params.push_back(p.grad());
  return r;
}

}  // namespace

TEST_CASE("checkpoint: gradients equal the block recorded in place bit for bit", "[checkpoint_activations]") {
  const Grads<double> a = three_blocks<double>(true), b = three_blocks<double>(false);
  CHECK(same_bits(a.loss, b.loss));
  CHECK(same_bits(a.input, b.input));
  for (std::size_t i = 0; i < a.params.size(); ++i) CHECK(same_bits(a.params[i], b.params[i]));
  const Grads<float> af = three_blocks<float>(true), bf = three_blocks<float>(false);
  CHECK(same_bits(af.loss, bf.loss));
  CHECK(same_bits(af.input, bf.input));
  for (std::size_t i = 0; i < af.params.size(); ++i) CHECK(same_bits(af.params[i], bf.params[i]));
}

TEST_CASE("checkpoint: one node on the tape, the block's intermediates freed after the forward",
          "[checkpoint_activations]") {
  Tape<double>::active().clear();
  Generator g(5);
  Tensor<double> x = Tensor<double>::randn({64, 6}, g, 0, 1, true);
  const TwoLayers<double> block(7, 6, 400);
  const std::size_t before = tensor_bytes_in_use();
  Tensor<double> y = checkpoint<double>(x, block.parameters(), [&](const Tensor<double>& in) { return block(in); });
  CHECK(Tape<double>::active().size() == 1);
  CHECK(Tape<double>::active().to_string() ==
        "#0 checkpoint leaf (64,6), leaf (6,400), leaf (400,6) -> (64,6)\n");
  // y (64 x 6 doubles) is all that stays; recorded in place, the (64, 400) hidden values
  // (twice: before and after tanh) stay for the backward
  const std::size_t kept = tensor_bytes_in_use() - before;
  CHECK(kept < 64 * 6 * 8 + 1024);
  Tensor<double> plain = block(x);
  CHECK(tensor_bytes_in_use() - before - kept > 2 * 64 * 400 * 8);
  Tape<double>::active().clear();
}

TEST_CASE("checkpoint: without grad it is f itself and records nothing", "[checkpoint_activations]") {
  Tape<double>::active().clear();
  Generator g(6);
  Tensor<double> x = Tensor<double>::randn({3, 6}, g, 0, 1, true);
  const TwoLayers<double> block(8);
  NoGradGuard no_grad;
  Tensor<double> y = checkpoint<double>(x, block.parameters(), [&](const Tensor<double>& in) { return block(in); });
  CHECK(Tape<double>::active().size() == 0);
  CHECK(same_bits(y.value(), block(x).value()));
}

TEST_CASE("checkpoint: gradcheck in double, the checkpoint nested and backward twice",
          "[checkpoint_activations]") {
  const TwoLayers<double> inner(9), outer(10);
  auto f = [&](const std::vector<Tensor<double>>& in) {
    // the parameters are the gradchecked inputs here, so the blocks read them from `in`
    auto block = [](const Tensor<double>& x, const Tensor<double>& w1, const Tensor<double>& w2) {
      return x + matmul(tanh(matmul(x, w1)), w2);
    };
    const Tensor<double> w1 = in[1], w2 = in[2], v1 = in[3], v2 = in[4];
    return checkpoint<double>(in[0], {w1, w2, v1, v2}, [=](const Tensor<double>& x) {
      const Tensor<double> h = checkpoint<double>(x, {w1, w2}, [=](const Tensor<double>& z) {
        return block(z, w1, w2);
      });
      return block(h, v1, v2);
    });
  };
  Generator g(11);
  test::require_gradcheck<double>(
      f, {Tensor<double>::randn({2, 3, 6}, g, 0, 1, true), inner.w1, inner.w2, outer.w1, outer.w2});
  // retain_graph: the node runs f again on the second backward too
  Tensor<double> x = Tensor<double>::randn({2, 3, 6}, g, 0, 1, true);
  Tensor<double> loss = sum(f({x, inner.w1, inner.w2, outer.w1, outer.w2}));
  loss.backward(true);
  const Array<double> once = x.grad();
  loss.backward();
  CHECK(same_bits<double>(x.grad(), once * 2.0));
}

TEST_CASE("checkpoint: a parameter edited before the backward is a GraphError", "[checkpoint_activations]") {
  Tape<double>::active().clear();
  Generator g(12);
  Tensor<double> x = Tensor<double>::randn({3, 6}, g, 0, 1, true);
  TwoLayers<double> block(13);
  Tensor<double> y = checkpoint<double>(x, block.parameters(), [&](const Tensor<double>& in) { return block(in); });
  block.w1.value()(0, 0) += 1.0;
  CHECK_THROWS_AS(sum(y).backward(), GraphError);
  Tape<double>::active().clear();
}

TEST_CASE("TapeScope: its ops record on its own tape, the thread's tape untouched", "[checkpoint_activations]") {
  Tape<double>::active().clear();
  Tensor<double> a = Tensor<double>::full({2}, 3.0, true);
  Tensor<double> outer = a * 2.0;
  CHECK(Tape<double>::active().size() == 1);
  {
    TapeScope<double> scope;
    CHECK(Tape<double>::active().size() == 0);
    Tensor<double> inner = a * a;
    CHECK(Tape<double>::active().size() == 1);
    sum(inner).backward();
    CHECK(Tape<double>::active().size() == 0);
  }
  CHECK(Tape<double>::active().size() == 1);
  CHECK((a.grad() == Array<double>{6.0, 6.0}));
  sum(outer).backward();
  CHECK((a.grad() == Array<double>{8.0, 8.0}));
  CHECK(Tape<double>::active().size() == 0);
}
