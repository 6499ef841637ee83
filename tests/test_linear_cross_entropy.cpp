// linear_cross_entropy: the head and the loss a chunk of rows at a time, held to the
// unchunked ops (matmul or matmul_nt, softcap, cross_entropy): bit for bit in float64 and
// float32 under reference products (whose numbers do not depend on a product's shape),
// within 1e-6 in float32 and to rounding in float64 with BLAS; gradcheck in double; tied
// heads, the soft-cap, ignored rows, any upstream gradient; its errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "helpers.hpp"
#include "platform/execution.hpp"
#include "ops/linear_cross_entropy.hpp"
#include "tapegrad.hpp"
#include "tapegrad_nn.hpp"

using namespace tapegrad;

namespace {

struct Case {
  std::size_t B, T, d, V;
  bool tied;
  double softcap;
  std::size_t chunk_rows;
  double upstream;  // the loss is multiplied by this before backward
};

template <class T>
struct Result {
  Array<T> loss, dh, dw;
};

Indices targets_for(const Case& c) {
  Indices t = test::random_tokens(c.B, c.T, c.V, 41);
  // some rows ignored, among them a whole chunk's worth at the start of the second batch row
  for (std::size_t i = 1; i < t.size(); i += 3) t.data()[i] = -100;
  for (std::size_t i = c.T; i < std::min(t.size(), c.T + 17); ++i) t.data()[i] = -100;
  return t;
}

template <class T>
Result<T> run(const Case& c, bool chunked) {
  Generator g(7);
  Tensor<T> h = Tensor<T>::randn({c.B, c.T, c.d}, g, T(0), T(1), true);
  // tied: the embedding's (V, d); a head: (d, V). Large enough logits that the cap bites.
  Tensor<T> w = c.tied ? Tensor<T>::randn({c.V, c.d}, g, T(0), T(0.8), true)
                       : Tensor<T>::randn({c.d, c.V}, g, T(0), T(0.8), true);
  const Indices targets = targets_for(c);
  Tensor<T> loss;
  if (chunked) {
    LinearCrossEntropyOptions o;
    o.transposed = c.tied;
    o.softcap = c.softcap;
    o.chunk_rows = c.chunk_rows;
    loss = linear_cross_entropy(h, w, targets, o);
  } else {
    Tensor<T> logits = c.tied ? matmul_nt(h, w) : matmul(h, w);
    if (c.softcap > 0) logits = softcap(logits, c.softcap);
    loss = cross_entropy(logits, targets);
  }
  const Array<T> value = loss.value();
  (c.upstream == 1 ? loss : loss * T(c.upstream)).backward();
  return {value, h.grad(), w.grad()};
}

bool power_of_two(double x) {
  int exponent = 0;
  return std::abs(std::frexp(x, &exponent)) == 0.5;
}

template <class T>
bool same_bits(const Array<T>& a, const Array<T>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
double max_abs_difference(const Array<T>& a, const Array<T>& b) {
  REQUIRE(a.shape() == b.shape());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(double(a.data()[i]) - double(b.data()[i])));
  return m;
}

template <class T>
double max_abs(const Array<T>& a) {
  double m = 0;
  for (const T& x : a) m = std::max(m, std::abs(double(x)));
  return m;
}

const Case kCases[] = {
    // 2 x 25 = 50 rows in chunks of 16 (the last of 2), V off every vector width
    {2, 25, 12, 37, false, 0, 16, 1},
    {2, 25, 12, 37, true, 0, 16, 1},
    {2, 25, 12, 37, false, 1.5, 16, 1},
    {2, 25, 12, 37, true, 1.5, 16, 0.37},
    // 20 rows would leave each chunk a tail that the whole array does not have: 32 are taken
    {4, 40, 12, 37, false, 1.5, 20, 1},
    // chunk_rows 20 is rounded up to 32; V a multiple of 16; one chunk of all rows
    {3, 20, 8, 64, false, 0.9, 20, -2},
    {3, 20, 8, 64, true, 0, 1000, 1},
    // one row per sequence, one sequence
    {1, 1, 5, 19, false, 0, 16, 1},
};

std::string describe(const Case& c) {
  return fmt::format("B {} T {} d {} V {} tied {} softcap {} chunk {} upstream {}", c.B, c.T, c.d,
                     c.V, c.tied, c.softcap, c.chunk_rows, c.upstream);
}

}  // namespace

TEST_CASE("linear_cross_entropy equals the unchunked ops bit for bit under reference products",
          "[linear_cross_entropy]") {
  kernels::ReferenceProductsGuard reference;
  for (const Case& c : kCases) {
    INFO(describe(c));
    const Result<double> a = run<double>(c, true), b = run<double>(c, false);
    const Result<float> af = run<float>(c, true), bf = run<float>(c, false);
    CHECK(same_bits(a.loss, b.loss));
    CHECK(same_bits(af.loss, bf.loss));
    // the forward's gradients are for an upstream gradient of 1, multiplied by it after the
    // products: exact for a power of two, one rounding more otherwise
    if (power_of_two(c.upstream)) {
      CHECK(same_bits(a.dh, b.dh));
      CHECK(same_bits(a.dw, b.dw));
      CHECK(same_bits(af.dh, bf.dh));
      CHECK(same_bits(af.dw, bf.dw));
    } else {
      CHECK(max_abs_difference(a.dh, b.dh) <= 1e-14 * max_abs(b.dh));
      CHECK(max_abs_difference(a.dw, b.dw) <= 1e-14 * max_abs(b.dw));
      CHECK(max_abs_difference(af.dh, bf.dh) <= 1e-6 * max_abs(bf.dh));
      CHECK(max_abs_difference(af.dw, bf.dw) <= 1e-6 * max_abs(bf.dw));
    }
  }
  // at 2 threads too (the products split over threads, the row kernels not)
  Case tied_capped = kCases[3];
  tied_capped.upstream = 1;
  set_num_threads(2);
  const Result<double> a = run<double>(tied_capped, true), b = run<double>(tied_capped, false);
  set_num_threads(1);
  CHECK(same_bits(a.dh, b.dh));
  CHECK(same_bits(a.dw, b.dw));
}

TEST_CASE("linear_cross_entropy with BLAS: float32 within 1e-6 and float64 to rounding",
          "[linear_cross_entropy]") {
  for (const Case& c : kCases) {
    INFO(describe(c));
    const Result<float> a = run<float>(c, true), b = run<float>(c, false);
    CHECK(max_abs_difference(a.loss, b.loss) <= 1e-6);
    CHECK(max_abs_difference(a.dh, b.dh) <= 1e-6);
    CHECK(max_abs_difference(a.dw, b.dw) <= 1e-6);
    const Result<double> ad = run<double>(c, true), bd = run<double>(c, false);
    CHECK(max_abs_difference(ad.loss, bd.loss) <= 1e-14);
    CHECK(max_abs_difference(ad.dh, bd.dh) <= 1e-14 * max_abs(bd.dh));
    CHECK(max_abs_difference(ad.dw, bd.dw) <= 1e-14 * max_abs(bd.dw));
    // and the gradients are not trivially small: the bound above means something
    CHECK(max_abs(bd.dw) > 1e-3);
  }
}

TEST_CASE("linear_cross_entropy gradcheck in double", "[linear_cross_entropy]") {
  Generator g(3);
  const Indices targets{{0, 4, -100, 8, 2, 2, 1}, {-100, 8, 5, 3, 0, 7, 6}, {1, 1, 1, 1, 1, 1, 1}};
  for (bool tied : {false, true})
    for (double cap : {0.0, 0.8}) {
      INFO("tied " << tied << " softcap " << cap);
      LinearCrossEntropyOptions o;
      o.transposed = tied;
      o.softcap = cap;
      o.chunk_rows = 16;  // 21 rows: two chunks
      Tensor<double> h = Tensor<double>::randn({3, 7, 4}, g, 0, 1, true);
      Tensor<double> w = Tensor<double>::randn(tied ? Shape{9, 4} : Shape{4, 9}, g, 0, 1, true);
      test::require_gradcheck<double>(
          [&](const std::vector<Tensor<double>>& x) { return linear_cross_entropy(x[0], x[1], targets, o); },
          {h, w});
    }
}

// The forward keeps the gradients it took for the first backward; a second backward through
// the retained graph has them no more and computes the chunks' logits again.
TEST_CASE("linear_cross_entropy backward twice through a retained graph doubles the gradients",
          "[linear_cross_entropy]") {
  kernels::ReferenceProductsGuard reference;
  for (const bool tied : {false, true}) {
    INFO("tied " << tied);
    Generator g(8);
    Tensor<double> h = Tensor<double>::randn({3, 11, 6}, g, 0, 1, true);
    Tensor<double> w = Tensor<double>::randn(tied ? Shape{13, 6} : Shape{6, 13}, g, 0, 1, true);
    const Indices targets = test::random_tokens(3, 11, 13, 4);
    LinearCrossEntropyOptions o;
    o.transposed = tied;
    o.softcap = 2.0;
    o.chunk_rows = 16;
    Tensor<double> loss = linear_cross_entropy(h, w, targets, o);
    loss.backward(true);
    const Array<double> dh1 = h.grad(), dw1 = w.grad();
    loss.backward();
    const Array<double> dh2 = dh1 * 2.0, dw2 = dw1 * 2.0;
    CHECK(same_bits(h.grad(), dh2));
    CHECK(same_bits(w.grad(), dw2));
    CHECK(max_abs(dw1) > 1e-3);
  }
}

TEST_CASE("linear_cross_entropy is one node and every row ignored gives 0 and zero gradients",
          "[linear_cross_entropy]") {
  Generator g(5);
  Tensor<double> h = Tensor<double>::randn({2, 3}, g, 0, 1, true);
  Tensor<double> w = Tensor<double>::randn({3, 6}, g, 0, 1, true);
  Tensor<double> loss = linear_cross_entropy(h, w, Indices{-100, -100});
  CHECK(Tape<double>::active().size() == 1);
  CHECK(loss.item() == 0.0);
  loss.backward();
  CHECK((h.grad() == xt::zeros<double>({2, 3})));
  CHECK((w.grad() == xt::zeros<double>({3, 6})));
}

TEST_CASE("linear_cross_entropy names what is wrong", "[linear_cross_entropy]") {
  Generator g(6);
  Tensor<float> h = Tensor<float>::randn({2, 4, 3}, g, 0, 1, true);
  Tensor<float> w = Tensor<float>::randn({3, 5}, g, 0, 1, true);
  const Indices ok = Indices::from_shape({2, 4});
  test::require_shape_error([&] { linear_cross_entropy(h, w, Indices{{0, 1, 5, 2}, {0, 0, 0, 0}}); },
                            {"linear_cross_entropy", "target 5", "V=5"});
  test::require_shape_error([&] { linear_cross_entropy(h, w, Indices{0, 1}); },
                            {"linear_cross_entropy", "targets of shape (2)"});
  LinearCrossEntropyOptions tied;
  tied.transposed = true;
  test::require_shape_error([&] { linear_cross_entropy(h, w, ok, tied); },
                            {"linear_cross_entropy", "(V, 3)"});
  LinearCrossEntropyOptions cap;
  cap.softcap = -1;
  test::require_shape_error([&] { linear_cross_entropy(h, w, ok, cap); },
                            {"linear_cross_entropy", "softcap"});
}

namespace {

TransformerConfig small_model(const std::string& arch, bool tied, double final_softcap) {
  TransformerConfig c = preset(arch);
  c.vocab = 37;
  c.context = 9;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 2;
  finish_preset(arch, c);
  c.tie_embeddings = tied;
  c.final_softcap = final_softcap;
  c.seed = 4;
  return c;
}

template <class T>
struct ModelRun {
  Array<T> loss;
  std::vector<Array<T>> grads;
};

template <class T>
ModelRun<T> model_run(const TransformerConfig& c, std::optional<std::size_t> chunk_rows) {
  Transformer<T> model(c);
  const Indices tokens = test::random_tokens(2, 9, c.vocab, 8);
  Indices targets = test::random_tokens(2, 9, c.vocab, 9);
  targets(0, 3) = -100;
  Tensor<T> loss = model.loss(tokens, targets, -100, chunk_rows);
  ModelRun<T> r{loss.value(), {}};
  loss.backward();
  for (const Tensor<T>& p : model.parameters()) r.grads.push_back(p.grad());
  return r;
}

}  // namespace

TEST_CASE("Transformer loss in chunks equals the unchunked loss bit for bit under reference products",
          "[linear_cross_entropy][transformer]") {
  const TransformerConfig configs[] = {small_model("gpt2", false, 0), small_model("gpt2", true, 2.0),
                                       small_model("llama", true, 0)};
  for (const TransformerConfig& c : configs) {
    INFO(config_summary(c));
    {
      kernels::ReferenceProductsGuard reference;
      // 18 rows in chunks of 16
      const ModelRun<double> a = model_run<double>(c, 16), b = model_run<double>(c, 0);
      CHECK(same_bits(a.loss, b.loss));
      REQUIRE(a.grads.size() == b.grads.size());
      for (std::size_t i = 0; i < a.grads.size(); ++i) {
        INFO("parameter " << i);
        CHECK(same_bits(a.grads[i], b.grads[i]));
      }
    }
    const ModelRun<float> a = model_run<float>(c, 16), b = model_run<float>(c, 0);
    CHECK(max_abs_difference(a.loss, b.loss) <= 1e-6);
    for (std::size_t i = 0; i < a.grads.size(); ++i) {
      INFO("parameter " << i);
      CHECK(max_abs_difference(a.grads[i], b.grads[i]) <= 1e-6);
    }
  }
}

TEST_CASE("loss chunks the head by default only for a large vocabulary and a batch of several chunks",
          "[linear_cross_entropy][transformer]") {
  // the rule as stated: vocabulary >= 8192, and a chunk of 32 MiB of logits (>= 256 rows,
  // a multiple of 16) shorter than the batch
  CHECK(automatic_head_chunk_rows(4096, 11, 4) == 0);
  CHECK(automatic_head_chunk_rows(1 << 20, kChunkedHeadMinVocab - 1, 4) == 0);
  CHECK(automatic_head_chunk_rows(4096, 50257, 4) == 256);  // 32 MiB / 201 KB = 166 rows
  CHECK(automatic_head_chunk_rows(256, 50257, 4) == 0);     // one chunk: no saving
  CHECK(automatic_head_chunk_rows(4096, 8192, 4) == 1024);  // 32 MiB / 32 KiB
  CHECK(automatic_head_chunk_rows(4096, 8192, 8) == 512);
  CHECK(default_chunk_rows(1, 4) % 16 == 0);
}

TEST_CASE("linear_cross_entropy never holds the whole logits and the unchunked ops do",
          "[linear_cross_entropy][memory]") {
  const std::size_t N = 512, d = 16, V = 8192;  // logits: 16 MiB of float
  const double logits_bytes = double(N) * V * sizeof(float);
  Generator g(12);
  Tensor<float> h = Tensor<float>::randn({N, d}, g, 0, 1, true);
  Tensor<float> w = Tensor<float>::randn({d, V}, g, 0, 0.1f, true);
  Indices targets = test::random_tokens(1, N, V, 3);
  targets.reshape({N});
  auto peak_of = [&](bool chunked) {
    h.zero_grad();
    w.zero_grad();
    const std::size_t base = tensor_bytes_in_use();
    reset_peak_tensor_bytes();
    {
      LinearCrossEntropyOptions o;
      o.chunk_rows = 64;  // 2 MiB of logits at once
      Tensor<float> loss = chunked ? linear_cross_entropy(h, w, targets, o)
                                   : cross_entropy(matmul(h, w), targets);
      loss.backward();
    }
    // the gradients (h's and w's, 0.5 MiB) stay; the rest is what the step held at most
    return double(peak_tensor_bytes() - base);
  };
  const double chunked = peak_of(true), whole = peak_of(false);
  INFO("peak above the inputs: chunked " << chunked << " bytes, unchunked " << whole);
  CHECK(whole > 2 * logits_bytes);  // the logits and their gradient
  CHECK(chunked < logits_bytes / 2);
}
