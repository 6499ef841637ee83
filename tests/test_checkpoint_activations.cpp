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

namespace {

TransformerConfig model_config(const std::string& arch) {
  TransformerConfig c = preset(arch);
  c.vocab = 29;
  c.context = 8;
  c.d_model = 16;
  c.heads = 4;
  c.layers = 3;
  finish_preset(arch, c);
  c.seed = 5;
  return c;
}

template <class T>
struct ModelGrads {
  Array<T> loss;
  std::vector<Array<T>> grads;
};

template <class T>
ModelGrads<T> model_grads(TransformerConfig c, bool checkpointed, std::optional<std::size_t> chunk_rows = 0) {
  c.checkpoint_activations = checkpointed;
  Transformer<T> model(c);
  const Indices tokens = test::random_tokens(3, 8, c.vocab, 1);
  Indices targets = test::random_tokens(3, 8, c.vocab, 2);
  targets(1, 2) = -100;
  Tensor<T> loss = model.loss(tokens, targets, -100, chunk_rows);
  std::size_t nodes = 0;
  for (const auto& node : Tape<T>::active().nodes()) nodes += std::string(node.op) == "checkpoint";
  CHECK(nodes == (checkpointed ? c.layers : 0));
  ModelGrads<T> r{loss.value(), {}};
  loss.backward();
  for (const Tensor<T>& p : model.parameters()) r.grads.push_back(p.grad());
  return r;
}

template <class T>
void check_same(const ModelGrads<T>& a, const ModelGrads<T>& b) {
  CHECK(same_bits(a.loss, b.loss));
  REQUIRE(a.grads.size() == b.grads.size());
  for (std::size_t i = 0; i < a.grads.size(); ++i) {
    INFO("parameter " << i);
    CHECK(same_bits(a.grads[i], b.grads[i]));
  }
}

}  // namespace

TEST_CASE("checkpoint_activations: the model's loss and gradients equal the plain backward bit for bit",
          "[checkpoint_activations][transformer]") {
  std::vector<TransformerConfig> configs = {model_config("gpt2"), model_config("llama")};
  configs[1].qk_norm = true;
  configs.push_back(model_config("gpt2"));
  configs.back().mlp = MlpKind::none;  // attention-only blocks
  configs.back().tie_embeddings = true;
  configs.back().final_softcap = 3.0;
  configs.push_back(model_config("gpt2"));
  configs.back().window = 3;
  configs.back().positions = PositionKind::alibi;
  for (const TransformerConfig& c : configs) {
    INFO(config_summary(c));
    check_same(model_grads<double>(c, true), model_grads<double>(c, false));
    check_same(model_grads<float>(c, true), model_grads<float>(c, false));
    // with the chunked head too (24 rows in chunks of 16)
    check_same(model_grads<float>(c, true, 16), model_grads<float>(c, false, 16));
  }
  set_num_threads(2);
  check_same(model_grads<float>(configs[0], true), model_grads<float>(configs[0], false));
  set_num_threads(1);
}

TEST_CASE("checkpoint_activations: refused with experts, accepted on a loaded model",
          "[checkpoint_activations][transformer]") {
  TransformerConfig moe = model_config("mixtral");
  moe.checkpoint_activations = true;
  CHECK_THROWS_WITH(moe.validate(), Catch::Contains("checkpoint_activations") &&
                                        Catch::Contains("experts=8"));
  TransformerConfig plain = model_config("gpt2");
  Transformer<float> model(plain);
  plain.checkpoint_activations = true;
  model.set_execution(plain);
  CHECK(model.config().checkpoint_activations);
  Transformer<float> mixture(model_config("mixtral"));
  TransformerConfig on = mixture.config();
  on.checkpoint_activations = true;
  CHECK_THROWS_WITH(mixture.set_execution(on), Catch::Contains("checkpoint_activations"));
  CHECK_FALSE(mixture.config().checkpoint_activations);
}

TEST_CASE("checkpoint_activations: hooks still see and cache every activation and its gradient",
          "[checkpoint_activations][hooks]") {
  TransformerConfig c = model_config("gpt2");
  const Indices tokens = test::random_tokens(2, 8, c.vocab, 3);
  auto cached = [&](bool checkpointed) {
    c.checkpoint_activations = checkpointed;
    Transformer<double> model(c);
    CachedRun<double> run = run_with_cache(model, tokens, {}, true);
    sum(run.logits * run.logits).backward();
    return run;
  };
  CachedRun<double> a = cached(true), b = cached(false);
  CHECK(same_bits(a.logits.value(), b.logits.value()));
  REQUIRE(a.cache.names() == b.cache.names());
  for (const std::string& name : a.cache.names()) {
    INFO(name);
    CHECK(same_bits(a.cache[name].value(), b.cache[name].value()));
    CHECK(same_bits(a.cache.grad(name), b.cache.grad(name)));
  }
}

TEST_CASE("checkpoint_activations: a layer adds its block input only to what the forward keeps",
          "[checkpoint_activations][memory]") {
  const std::size_t B = 4, T = 8, D = 32;
  auto held_after_forward = [&](std::size_t layers, bool checkpointed) {
    TransformerConfig c = model_config("gpt2");
    c.d_model = D;
    c.layers = layers;
    c.checkpoint_activations = checkpointed;
    Transformer<float> model(c);
    const Indices tokens = test::random_tokens(B, T, c.vocab, 4);
    const std::size_t before = tensor_bytes_in_use();
    Tensor<float> loss = model.loss(tokens, tokens);
    const double held = double(tensor_bytes_in_use() - before);
    loss.backward();
    return held;
  };
  const double block_input = double(B * T * D * sizeof(float));
  const double per_layer = (held_after_forward(4, true) - held_after_forward(1, true)) / 3;
  const double plain_per_layer = (held_after_forward(4, false) - held_after_forward(1, false)) / 3;
  INFO("per layer: checkpointed " << per_layer << " bytes, plain " << plain_per_layer
       << ", a block input " << block_input);
  CHECK(per_layer >= block_input);
  CHECK(per_layer <= block_input + 256);  // malloc's rounding of one block
  CHECK(plain_per_layer > 10 * block_input);
}
