// ops/rope: gradcheck in double, PyTorch float64 fixtures (tests/make_rope_fixtures.py),
// properties that a wrong rotation breaks, the half/interleaved porting trap, every
// argument error, and float32 against double at long positions. Expected values come from
// the fixtures, identities or hand computation, never from this code's own output.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "ops/rope.hpp"
#include "reference.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

RopeSpec make_spec(RopeStyle style, RopeScaling scaling) {
  RopeSpec s;
  s.style = style;
  s.scaling = scaling;
  switch (scaling) {
    case RopeScaling::none: break;
    case RopeScaling::linear: s.factor = 2.0; break;
    case RopeScaling::ntk: s.factor = 3.0; break;
    case RopeScaling::llama3: s.factor = 4.0; s.original_context = 64; break;
    case RopeScaling::yarn: s.factor = 4.0; s.original_context = 64; break;
  }
  return s;
}

const std::vector<RopeStyle> kStyles = {RopeStyle::half, RopeStyle::interleaved};
const std::vector<RopeScaling> kScalings = {RopeScaling::none, RopeScaling::linear,
                                            RopeScaling::ntk, RopeScaling::llama3,
                                            RopeScaling::yarn};

Array<double> as_double(const Array<float>& a) {
  Array<double> d = Array<double>::from_shape(a.shape());
  for (std::size_t i = 0; i < a.size(); ++i) d.data()[i] = a.data()[i];
  return d;
}

Array<double> to_array(const std::vector<double>& v) {
  Array<double> a = Array<double>::from_shape({v.size()});
  std::copy(v.begin(), v.end(), a.begin());
  return a;
}

double dot(const Array<double>& a, const Array<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a.data()[i] * b.data()[i];
  return s;
}

}  // namespace

// ---------------------------------------------------------------- gradcheck (double)

TEST_CASE("gradcheck of rope and rope_heads for both styles and every scaling",
          "[rope][gradcheck]") {
  std::uint64_t seed = 1;
  for (RopeStyle style : kStyles)
    for (RopeScaling scaling : kScalings) {
      const RopeSpec spec = make_spec(style, scaling);
      INFO(to_string(style) << " " << to_string(scaling));
      require_gradcheck<double>([&](const auto& v) { return rope(v[0], 37, spec); },
                                {random<double>({2, 3, 8}, seed++)});
      require_gradcheck<double>([&](const auto& v) { return rope_heads(v[0], 2, 37, spec); },
                                {random<double>({2, 3, 2 * 8}, seed++)});
    }
}

// ---------------------------------------------------------------- PyTorch fixtures

namespace {
struct FixtureCase {
  std::string name;
  std::size_t offset;
  std::size_t heads;  // 0: rope, else rope_heads
  RopeSpec spec;
};

RopeSpec spec_of(RopeScaling scaling, double theta, double factor, std::size_t original) {
  RopeSpec s;
  s.scaling = scaling;
  s.theta = theta;
  s.factor = factor;
  s.original_context = original;
  return s;
}

// The same table as make_rope_fixtures.py's main(), for each style.
std::vector<FixtureCase> fixture_cases() {
  std::vector<FixtureCase> cases;
  for (RopeStyle style : kStyles) {
    const std::string tail = "_" + to_string(style);
    std::vector<FixtureCase> c = {
        {"none", 3, 0, spec_of(RopeScaling::none, 10000.0, 1.0, 0)},
        {"linear", 7, 0, spec_of(RopeScaling::linear, 10000.0, 2.5, 0)},
        {"ntk", 11, 0, spec_of(RopeScaling::ntk, 10000.0, 3.0, 0)},
        {"llama3", 40, 0, spec_of(RopeScaling::llama3, 10000.0, 4.0, 64)},
        {"llama31", 9000, 0, spec_of(RopeScaling::llama3, 500000.0, 8.0, 8192)},
        {"yarn", 5, 0, spec_of(RopeScaling::yarn, 10000.0, 4.0, 64)},
        {"heads_yarn", 70, 3, spec_of(RopeScaling::yarn, 10000.0, 4.0, 64)},
    };
    for (FixtureCase& f : c) {
      f.name += tail;
      f.spec.style = style;
      cases.push_back(f);
    }
  }
  return cases;
}

// out and d sum(out * g) / dx of the case, computed with `spec` (the fixture's or another)
std::pair<Array<double>, Array<double>> run_case(const FixtureCase& f, const RopeSpec& spec) {
  Tensor<double> x(load_fixture("rope", f.name, "x"), true);
  Tensor<double> g(load_fixture("rope", f.name, "g"));
  Tensor<double> out = f.heads ? rope_heads(x, f.heads, f.offset, spec) : rope(x, f.offset, spec);
  sum(out * g).backward();
  return {out.value(), x.grad()};
}
}  // namespace

TEST_CASE("rope agrees with PyTorch float64 fixtures forward, backward and inv_freq",
          "[rope][fixtures]") {
  for (const FixtureCase& f : fixture_cases()) {
    INFO("fixture " << f.name);
    const auto [out, dx] = run_case(f, f.spec);
    check_close(f.name + " out", out, load_fixture("rope", f.name, "out"), 1e-10);
    check_close(f.name + " dx", dx, load_fixture("rope", f.name, "dx"), 1e-10);

    const Shape xs = array_shape(load_fixture("rope", f.name, "x"));
    const std::size_t head_dim = f.heads ? xs.back() / f.heads : xs.back();
    const RopeFrequencies freq = rope_frequencies(head_dim, f.spec);
    check_close(f.name + " inv_freq", to_array(freq.inv_freq), load_fixture("rope", f.name, "inv_freq"), 1e-13);
    CHECK(freq.attention_factor ==
          Approx(load_fixture("rope", f.name, "attention_factor")(0)).epsilon(1e-14));
  }
}

TEST_CASE("the scalings change the frequencies where the formulas say", "[rope]") {
  // by hand: head_dim 8, theta 10000 -> inv_freq = 1, 0.1, 0.01, 0.001
  const RopeFrequencies none = rope_frequencies(8, RopeSpec{});
  check_values(to_array(none.inv_freq), {4}, {1, 0.1, 0.01, 0.001}, 1e-14);
  // llama3, original 64, low 1, high 4: wavelengths 2 pi / f = 6.3 (< 16: kept), 62.8
  // (between 16 and 64: smoothed with s = 64 / 62.8 - 1) / 3, 628 and 6283 (> 64: / factor)
  RopeSpec l3 = make_spec(RopeStyle::half, RopeScaling::llama3);
  const double s1 = (64 / (2 * M_PI / 0.1) - 1) / 3;
  check_values(to_array(rope_frequencies(8, l3).inv_freq), {4},
               {1, (1 - s1) * 0.1 / 4 + s1 * 0.1, 0.01 / 4, 0.001 / 4}, 1e-14);
  // yarn, factor 4, original 64, head_dim 8: correction dims 8 ln(64 / (r 2 pi)) / (2 ln 1e4)
  // are -0.50 (beta_fast 32: low 0) and 1.01 (beta_slow 1: high 2): ramp 0, 1/2, 1, 1
  const RopeFrequencies yarn = rope_frequencies(8, make_spec(RopeStyle::half, RopeScaling::yarn));
  check_values(to_array(yarn.inv_freq), {4},
               {1, 0.1 / 4 * 0.5 + 0.1 * 0.5, 0.01 / 4, 0.001 / 4}, 1e-14);
  CHECK(yarn.attention_factor == Approx(1 + 0.1 * std::log(4.0)).epsilon(1e-15));
}

// ---------------------------------------------------------------- properties

TEST_CASE("rope's q.k depends only on the distance m - n", "[rope]") {
  for (RopeStyle style : kStyles) {
    INFO(to_string(style));
    const RopeSpec spec = make_spec(style, RopeScaling::none);
    auto q = random<double>({1, 16}, 101, false);
    auto k = random<double>({1, 16}, 102, false);
    auto score = [&](std::size_t m, std::size_t n) {
      return dot(rope(q, m, spec).value(), rope(k, n, spec).value());
    };
    for (std::size_t shift : {1, 17, 1000, 123456}) {
      CHECK(score(5 + shift, 2 + shift) == Approx(score(5, 2)).epsilon(1e-9));
      CHECK(score(2 + shift, 9 + shift) == Approx(score(2, 9)).epsilon(1e-9));
    }
    // and it does depend on the distance (a rope that did nothing would pass the above)
    CHECK(std::abs(score(5, 2) - score(6, 2)) > 1e-3);
  }
}

TEST_CASE("rope at offset 0 leaves row 0 alone (yarn scales it) and rotates the others",
          "[rope]") {
  for (RopeStyle style : kStyles)
    for (RopeScaling scaling : kScalings) {
      INFO(to_string(style) << " " << to_string(scaling));
      const RopeSpec spec = make_spec(style, scaling);
      auto x = random<double>({2, 3, 8}, 7, false);
      const Array<double> y = rope(x, 0, spec).value();
      const double af = scaling == RopeScaling::yarn ? 1 + 0.1 * std::log(4.0) : 1.0;
      for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t j = 0; j < 8; ++j) {
          CHECK(y(b, 0, j) == Approx(af * x.value()(b, 0, j)).epsilon(1e-15));
          // position 1 turns pair 0 by one radian: element 0 is not left as it was
          if (j == 0) CHECK(std::abs(y(b, 1, 0) / af - x.value()(b, 1, 0)) > 1e-3);
        }
    }
}

TEST_CASE("rope_heads equals rope of each head after an explicit split, both directions",
          "[rope]") {
  const std::size_t B = 2, T = 5, H = 3, dh = 8;
  for (RopeStyle style : kStyles)
    for (RopeScaling scaling : {RopeScaling::none, RopeScaling::yarn}) {
      INFO(to_string(style) << " " << to_string(scaling));
      const RopeSpec spec = make_spec(style, scaling);
      auto x = random<double>({B, T, H * dh}, 55);
      auto g = random<double>({B, T, H * dh}, 56, false);
      Tensor<double> fast = rope_heads(x, H, 9, spec);
      sum(fast * g).backward();
      const Array<double> fast_dx = x.grad();
      x.zero_grad();

      auto split = transpose(reshape(x, {B, T, H, dh}), {0, 2, 1, 3});  // (B, H, T, dh)
      auto merged = reshape(transpose(rope(split, 9, spec), {0, 2, 1, 3}), {B, T, H * dh});
      sum(merged * g).backward();
      check_close(fast.value(), merged.value(), 1e-14);
      check_close(fast_dx, x.grad(), 1e-14);
    }
}

// ---------------------------------------------------------------- the porting trap

TEST_CASE("the wrong pairing (half vs interleaved) misses the fixture by far more than 1e-10",
          "[rope][fixtures]") {
  for (const FixtureCase& f : fixture_cases()) {
    INFO("fixture " << f.name);
    RopeSpec swapped = f.spec;
    swapped.style = f.spec.style == RopeStyle::half ? RopeStyle::interleaved : RopeStyle::half;
    const auto [out, dx] = run_case(f, swapped);
    const double err_out = rel_error(out, load_fixture("rope", f.name, "out"));
    const double err_dx = rel_error(dx, load_fixture("rope", f.name, "dx"));
    INFO("rel error with the other pairing: out " << err_out << ", dx " << err_dx);
    CHECK(err_out > 1e-2);
    CHECK(err_dx > 1e-2);
  }
}

// ---------------------------------------------------------------- errors

TEST_CASE("rope rejects bad shapes and specs with a ShapeError naming the op and the field",
          "[rope][errors]") {
  auto x = random<double>({2, 3, 8}, 1, false);
  RopeSpec ok;
  REQUIRE_THROWS_WITH(rope(random<double>({2, 3, 7}, 1, false), 0, ok),
                      Catch::Contains("rope:") && Catch::Contains("head_dim=7") &&
                          Catch::Contains("(2,3,7)"));
  REQUIRE_THROWS_WITH(rope(random<double>({8}, 1, false), 0, ok),
                      Catch::Contains("rope:") && Catch::Contains("rank") &&
                          Catch::Contains("(8)"));
  REQUIRE_THROWS_AS(rope(random<double>({8}, 1, false), 0, ok), ShapeError);

  RopeSpec bad_theta;
  bad_theta.theta = 0;
  REQUIRE_THROWS_WITH(rope(x, 0, bad_theta), Catch::Contains("rope:") && Catch::Contains("theta=0"));
  bad_theta.theta = std::nan("");
  REQUIRE_THROWS_WITH(rope(x, 0, bad_theta), Catch::Contains("theta=nan"));
  for (RopeScaling scaling :
       {RopeScaling::linear, RopeScaling::ntk, RopeScaling::llama3, RopeScaling::yarn}) {
    RopeSpec s = make_spec(RopeStyle::half, scaling);
    s.factor = scaling == RopeScaling::ntk ? -1.0 : 0.0;
    REQUIRE_THROWS_WITH(rope(x, 0, s), Catch::Contains("rope:") && Catch::Contains("factor=") &&
                                           Catch::Contains(to_string(scaling)));
  }
  for (RopeScaling scaling : {RopeScaling::llama3, RopeScaling::yarn}) {
    RopeSpec s = make_spec(RopeStyle::half, scaling);
    s.original_context = 0;
    REQUIRE_THROWS_WITH(rope(x, 0, s), Catch::Contains("rope:") &&
                                           Catch::Contains("original_context=0") &&
                                           Catch::Contains(to_string(scaling)));
  }
  RopeSpec l3 = make_spec(RopeStyle::half, RopeScaling::llama3);
  l3.high_freq_factor = 1.0;
  REQUIRE_THROWS_WITH(rope(x, 0, l3), Catch::Contains("high_freq_factor=1"));
  RopeSpec ntk = make_spec(RopeStyle::half, RopeScaling::ntk);
  REQUIRE_THROWS_WITH(rope(random<double>({1, 3, 2}, 1, false), 0, ntk),
                      Catch::Contains("rope:") && Catch::Contains("head_dim=2"));

  REQUIRE_THROWS_WITH(rope_heads(random<double>({2, 3, 10}, 1, false), 4, 0, ok),
                      Catch::Contains("rope_heads:") && Catch::Contains("heads=4") &&
                          Catch::Contains("(2,3,10)"));
  REQUIRE_THROWS_WITH(rope_heads(random<double>({2, 3, 12}, 1, false), 4, 0, ok),
                      Catch::Contains("rope_heads:") && Catch::Contains("head_dim=3"));
  REQUIRE_THROWS_WITH(rope_heads(x, 0, 0, ok), Catch::Contains("rope_heads:") &&
                                                   Catch::Contains("heads=0"));
  REQUIRE_THROWS_WITH(rope_heads(random<double>({3, 8}, 1, false), 1, 0, ok),
                      Catch::Contains("rope_heads:") && Catch::Contains("(3,8)"));
  REQUIRE_THROWS_WITH(check_rope_spec("attention", 0, ok),
                      Catch::Contains("attention:") && Catch::Contains("head_dim=0"));
  REQUIRE_THROWS_WITH(rope_frequencies(6, bad_theta), Catch::Contains("rope_frequencies:"));
}

TEST_CASE("RoPE style and scaling names round-trip and unknown names are ShapeErrors",
          "[rope][errors]") {
  for (RopeStyle s : kStyles) CHECK(parse_rope_style(to_string(s)) == s);
  for (RopeScaling s : kScalings) CHECK(parse_rope_scaling(to_string(s)) == s);
  CHECK(to_string(RopeStyle::half) == "half");
  CHECK(to_string(RopeScaling::llama3) == "llama3");
  REQUIRE_THROWS_WITH(parse_rope_style("neox"),
                      Catch::Contains("parse_rope_style:") && Catch::Contains("\"neox\""));
  REQUIRE_THROWS_WITH(parse_rope_scaling("dynamic"),
                      Catch::Contains("parse_rope_scaling:") && Catch::Contains("\"dynamic\""));
  REQUIRE_THROWS_AS(parse_rope_scaling(""), ShapeError);
}

// ---------------------------------------------------------------- float32

TEST_CASE("float32 rope agrees with double to 1e-6 at positions up to 100000", "[rope][float]") {
  for (RopeStyle style : kStyles)
    for (RopeScaling scaling : kScalings) {
      INFO(to_string(style) << " " << to_string(scaling));
      RopeSpec spec = make_spec(style, scaling);
      auto xf = random<float>({2, 10, 64}, 77, true);
      Tensor<double> xd(as_double(xf.value()), true);  // the same numbers, so only rope differs
      auto gf = random<float>({2, 10, 64}, 78, false);
      Tensor<double> gd(as_double(gf.value()));
      Tensor<float> yf = rope(xf, 99990, spec);
      Tensor<double> yd = rope(xd, 99990, spec);
      sum(yf * gf).backward();
      sum(yd * gd).backward();
      CHECK(rel_error(as_double(yf.value()), yd.value()) < 1e-6);
      CHECK(rel_error(as_double(xf.grad()), xd.grad()) < 1e-6);
    }
  // why the angle is formed in double: near 1e5 a float's spacing is 0.008, so a float
  // angle is off by ~1e-3 rad, which moves cos a thousand times the tolerance above
  const float angle_f = 99999.0f * 0.9f;
  const double angle_d = 99999.0 * 0.9;
  CHECK(std::abs(std::cos(double(angle_f)) - std::cos(angle_d)) > 1e-4);
}
