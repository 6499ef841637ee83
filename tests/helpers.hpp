#pragma once
// Shared by the op tests: random tensors, value comparison, gradcheck that explains a
// failure, and a check that a bad call throws ShapeError naming the op and its shapes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tapegrad.hpp"

namespace tapegrad::test {

template <class T>
Shape array_shape(const Array<T>& a) {
  return Shape(a.shape().begin(), a.shape().end());
}

// Tolerance for comparing a forward result with a hand-computed value.
template <class T>
constexpr double tolerance() {
  return std::is_same<T, float>::value ? 1e-6 : 1e-13;
}

// Uniform in [low, high), reproducible from `seed`.
template <class T>
Tensor<T> random(const Shape& shape, std::uint64_t seed, bool requires_grad = true,
                 double low = -1.0, double high = 1.0) {
  Generator gen(seed);
  return Tensor<T>::uniform(shape, gen, T(low), T(high), requires_grad);
}

// Uniform values pushed at least `gap` away from zero (for relu, div, and other kinks).
template <class T>
Tensor<T> random_away_from_zero(const Shape& shape, std::uint64_t seed, double gap = 0.1,
                                bool requires_grad = true) {
  Tensor<T> t = random<T>(shape, seed, requires_grad);
  for (T& v : t.value()) v = v < T(0) ? v - T(gap) : v + T(gap);
  return t;
}

// A model's attention biases (the parameters named *.attn.b*) set to uniform values in
// [-0.5, 0.5): they start at zero, where a path that left one out would still agree.
template <class T, template <class> class Model>
void spread_attention_biases(const Model<T>& model, std::uint64_t seed) {
  for (const auto& p : model.named_parameters()) {
    if (p.name.find(".attn.b") == std::string::npos) continue;
    Tensor<T> t = p.tensor;
    t.value() = random<T>(array_shape(t.value()), seed++, false, -0.5, 0.5).value();
  }
}

// The same parameter names, shapes and values, bit for bit.
// (Models: any two with named_parameters(), a Module or a Transformer.)
template <class A, class B>
bool same_parameters(const A& a, const B& b) {
  const auto& pa = a.named_parameters();
  const auto& pb = b.named_parameters();
  if (pa.size() != pb.size()) return false;
  for (std::size_t i = 0; i < pa.size(); ++i)
    if (pa[i].name != pb[i].name || pa[i].tensor.shape() != pb[i].tensor.shape() ||
        std::memcmp(pa[i].tensor.data(), pb[i].tensor.data(),
                    pa[i].tensor.size() * sizeof(pa[i].tensor.data()[0])) != 0)
      return false;
  return true;
}

// Row-major values from a flat list, with a shape.
template <class T>
Tensor<T> make(const Shape& shape, const std::vector<double>& values, bool requires_grad = false) {
  Array<T> a = Array<T>::from_shape(shape);
  REQUIRE(a.size() == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) a.data()[i] = static_cast<T>(values[i]);
  return Tensor<T>(std::move(a), requires_grad);
}

// 0, 1, 2, ... in row-major order.
template <class T>
Tensor<T> arange(const Shape& shape, bool requires_grad = false) {
  Array<T> a = Array<T>::from_shape(shape);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<T>(i);
  return Tensor<T>(std::move(a), requires_grad);
}

// `got` has exactly `shape` and the row-major `expected` values, to a relative tolerance.
template <class T>
void check_values(const Array<T>& got, const Shape& shape, const std::vector<double>& expected,
                  double tol = tolerance<T>()) {
  REQUIRE(shape_str(array_shape(got)) == shape_str(shape));
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i);
    CHECK(static_cast<double>(got.data()[i]) == Approx(expected[i]).epsilon(tol).margin(tol));
  }
}
template <class T>
void check_values(const Tensor<T>& got, const Shape& shape, const std::vector<double>& expected,
                  double tol = tolerance<T>()) {
  check_values<T>(got.value(), shape, expected, tol);
}

// Same shape and elementwise equal to a tolerance.
template <class T>
void check_close(const Array<T>& got, const Array<T>& expected, double tol = tolerance<T>()) {
  REQUIRE(shape_str(array_shape(got)) == shape_str(array_shape(expected)));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i);
    CHECK(static_cast<double>(got.data()[i]) ==
          Approx(static_cast<double>(expected.data()[i])).epsilon(tol).margin(tol));
  }
}

// gradcheck in T (double: PyTorch's default tolerances); prints the per-input table on
// failure. Leaves the tape empty.
template <class T>
void require_gradcheck(const TensorFunction<T>& f, const std::vector<Tensor<T>>& inputs,
                       GradcheckOptions options = {}) {
  const GradcheckResult result = gradcheck<T>(f, inputs, options);
  INFO(result.to_string());
  REQUIRE(result.passed);
  REQUIRE(Tape<T>::active().size() == 0);
}

// `call` throws ShapeError (a std::invalid_argument) whose message contains every one
// of `parts` (the op's name and the shapes involved).
// Token ids (B, T), each uniform in [0, vocab), drawn from Generator(seed).
// The float whose IEEE-754 bits are u (hand-built ties and edge cases of a rounding).
inline float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

inline Indices random_tokens(std::size_t B, std::size_t T, std::size_t vocab, std::uint64_t seed) {
  Generator gen(seed);
  Indices t = Indices::from_shape({B, T});
  for (auto& v : t) v = static_cast<std::int64_t>(gen.integer(vocab));
  return t;
}

// An attention specification of H query heads over KV key/value heads.
inline AttentionSpec make_spec(std::size_t H, std::size_t KV, bool causal, std::size_t window = 0,
                               std::optional<double> scale = std::nullopt) {
  AttentionSpec spec;
  spec.heads = H;
  spec.kv_heads = KV;
  spec.causal = causal;
  spec.window = window;
  spec.scale = scale;
  return spec;
}

inline void require_shape_error(const std::function<void()>& call,
                                const std::vector<std::string>& parts) {
  bool thrown = false;
  try {
    call();
  } catch (const std::invalid_argument& e) {
    thrown = true;
    const std::string message = e.what();
    INFO("message: " << message);
    CHECK(dynamic_cast<const ShapeError*>(&e) != nullptr);
    for (const std::string& part : parts) CHECK_THAT(message, Catch::Contains(part));
  }
  INFO("expected a ShapeError mentioning " << (parts.empty() ? std::string("anything") : parts.front()));
  CHECK(thrown);
  Tape<float>::active().clear();
  Tape<double>::active().clear();
}

}  // namespace tapegrad::test
