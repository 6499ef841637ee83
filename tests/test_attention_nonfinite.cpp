// A NaN or an infinity that reaches the attention scores propagates, in every path
// (composed, fused, flash, decode; forward and backward), exactly where a plain softmax
// puts it: the poisoned row's weights, output and query gradient become NaN, the keys and
// values it sees get NaN gradients, and every other row is what it was. Only a row that
// the mask hides entirely gives zeros: that is decided from the mask, never from the
// values (a row of NaN scores has no finite maximum either).
#include <cmath>
#include <limits>
#include <vector>

#include "helpers.hpp"
#include "ops/attention.hpp"
#include "ops/attention_decode.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

constexpr std::size_t B = 2, dh = 4, dv = 3;

struct Case {
  const char* name;
  std::size_t H, KV, Tq, Tk;
  bool causal;
  std::size_t window;
};
// square MHA takes the fused kernels' square code, the others the banded code; 20 rows
// fill a softmax row group
const Case kCases[] = {
    {"square causal", 2, 2, 7, 7, true, 0},   {"square full", 2, 2, 7, 7, false, 0},
    {"square causal 20", 2, 2, 20, 20, true, 0}, {"gqa causal", 4, 2, 7, 7, true, 0},
    {"gqa window 3", 4, 2, 7, 7, true, 3},    {"gqa Tq < Tk", 4, 2, 5, 9, true, 0},
};
const AttentionPath kPaths[] = {AttentionPath::composed, AttentionPath::fused,
                                AttentionPath::flash};
const char* path_name(AttentionPath p) {
  return p == AttentionPath::composed ? "composed" : p == AttentionPath::fused ? "fused" : "flash";
}

AttentionSpec spec_of(const Case& c) { return make_spec(c.H, c.KV, c.causal, c.window); }

// Whether query row r (absolute position Tk - Tq + r) sees key j: the mask's definition.
bool sees(const Case& c, std::size_t r, std::size_t j) {
  const std::size_t i = c.Tk - c.Tq + r;
  if (!c.causal) return true;
  return j <= i && (c.window == 0 || i - j < c.window);
}

template <class T>
struct Results {
  Array<T> out, w, dq, dk, dv;  // w empty on the flash path, which never forms it
};

template <class T>
Results<T> run(AttentionPath path, const Array<T>& q0, const Array<T>& k0, const Array<T>& v0,
               const AttentionSpec& spec, const Array<T>& g) {
  Tensor<T> q(q0, true), k(k0, true), v(v0, true);
  const AttentionResult<T> r = attention(q, k, v, spec, path);
  sum(r.out * Tensor<T>(g)).backward();
  return {r.out.value(), path == AttentionPath::flash ? Array<T>() : r.weights.value(), q.grad(),
          k.grad(), v.grad()};
}

// Row-major (B, rows, heads * width) element [b, r, h, c].
template <class T>
T& at(Array<T>& a, std::size_t b, std::size_t r, std::size_t h, std::size_t c, std::size_t width) {
  const std::size_t rows = a.shape()[1], heads = a.shape()[2] / width;
  return a.data()[((b * rows + r) * heads + h) * width + c];
}
template <class T>
T at(const Array<T>& a, std::size_t b, std::size_t r, std::size_t h, std::size_t c,
     std::size_t width) {
  return at(const_cast<Array<T>&>(a), b, r, h, c, width);
}

// Every element of head h's columns of row r is NaN (true) / equals the clean run's (false).
template <class T>
void check_row(const Array<T>& got, const Array<T>& clean, std::size_t b, std::size_t r,
               std::size_t h, std::size_t width, bool poisoned) {
  for (std::size_t c = 0; c < width; ++c) {
    const T x = at(got, b, r, h, c, width), want = at(clean, b, r, h, c, width);
    INFO("[" << b << ", " << r << ", head " << h << ", " << c << "] = " << x << ", clean " << want);
    if (poisoned)
      CHECK(std::isnan(x));
    else
      CHECK(double(x) == Approx(double(want)).epsilon(1e-5).margin(1e-6));
  }
}

template <class T>
Array<T> randn_array(const Shape& s, std::uint64_t seed) {
  Generator gen(seed);
  return Tensor<T>::randn(s, gen).value();
}

// k's column 0 made positive in every kv head, so a query with +-inf in its column 0 scores
// +-inf against every key (and never inf * 0).
template <class T>
Array<T> keys_with_positive_column0(const Case& c, std::uint64_t seed) {
  Array<T> k = randn_array<T>({B, c.Tk, c.KV * dh}, seed);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < c.Tk; ++j)
      for (std::size_t kv = 0; kv < c.KV; ++kv) {
        T& x = at(k, b, j, kv, 0, dh);
        x = std::abs(x) + T(0.5);
      }
  return k;
}

}  // namespace

TEMPLATE_TEST_CASE("a NaN or infinite query poisons its own row and nothing else on every path",
                   "[attention][nonfinite]", float, double) {
  using T = TestType;
  const T inf = std::numeric_limits<T>::infinity();
  // NaN; +inf scores (exp(inf - inf)); every score -inf (plain softmax's 0/0): all NaN
  const T poisons[] = {std::numeric_limits<T>::quiet_NaN(), inf, -inf};
  for (const Case& c : kCases)
    for (const AttentionPath path : kPaths)
      for (const T poison : poisons) {
        INFO(c.name << ", " << path_name(path) << ", poison " << poison);
        const Array<T> q0 = randn_array<T>({B, c.Tq, c.H * dh}, 1);
        const Array<T> k0 = keys_with_positive_column0<T>(c, 2);
        const Array<T> v0 = randn_array<T>({B, c.Tk, c.KV * dv}, 3);
        const Array<T> g = randn_array<T>({B, c.Tq, c.H * dv}, 4);
        const std::size_t pb = 1, pr = c.Tq - 3, ph = 1, pkv = ph / (c.H / c.KV);
        Array<T> q = q0;
        at(q, pb, pr, ph, 0, dh) = poison;
        const Results<T> clean = run(path, q0, k0, v0, spec_of(c), g);
        const Results<T> got = run(path, q, k0, v0, spec_of(c), g);
        for (std::size_t b = 0; b < B; ++b)
          for (std::size_t r = 0; r < c.Tq; ++r)
            for (std::size_t h = 0; h < c.H; ++h) {
              const bool poisoned = b == pb && r == pr && h == ph;
              check_row(got.out, clean.out, b, r, h, dv, poisoned);
              check_row(got.dq, clean.dq, b, r, h, dh, poisoned);
            }
        if (path != AttentionPath::flash)  // weights (B, H, Tq, Tk): the row's visible keys
          for (std::size_t j = 0; j < c.Tk; ++j) {
            const T w = got.w.data()[((pb * c.H + ph) * c.Tq + pr) * c.Tk + j];
            INFO("weight of key " << j << " = " << w);
            if (sees(c, pr, j)) CHECK(std::isnan(w));
          }
        // the keys and values the row sees carry its NaN into their gradients
        for (std::size_t j = 0; j < c.Tk; ++j)
          if (sees(c, pr, j)) {
            INFO("key " << j);
            CHECK(std::isnan(at(got.dk, pb, j, pkv, 0, dh)));
            CHECK(std::isnan(at(got.dv, pb, j, pkv, 0, dv)));
          }
        // the other batch item never meets it
        for (std::size_t j = 0; j < c.Tk; ++j)
          for (std::size_t kv = 0; kv < c.KV; ++kv) {
            check_row(got.dk, clean.dk, 0, j, kv, dh, false);
            check_row(got.dv, clean.dv, 0, j, kv, dv, false);
          }
      }
}

TEST_CASE("a NaN key poisons exactly the rows that see it on every path", "[attention][nonfinite]") {
  using T = double;
  for (const Case& c : kCases)
    for (const AttentionPath path : kPaths) {
      INFO(c.name << ", " << path_name(path));
      const Array<T> q0 = randn_array<T>({B, c.Tq, c.H * dh}, 11);
      const Array<T> k0 = randn_array<T>({B, c.Tk, c.KV * dh}, 12);
      const Array<T> v0 = randn_array<T>({B, c.Tk, c.KV * dv}, 13);
      const Array<T> g = randn_array<T>({B, c.Tq, c.H * dv}, 14);
      const std::size_t pb = 0, pj = c.Tk - 4, pkv = c.KV - 1, group = c.H / c.KV;
      Array<T> k = k0;
      at(k, pb, pj, pkv, 2, dh) = std::nan("");
      const Results<T> clean = run(path, q0, k0, v0, spec_of(c), g);
      const Results<T> got = run(path, q0, k, v0, spec_of(c), g);
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t r = 0; r < c.Tq; ++r)
          for (std::size_t h = 0; h < c.H; ++h) {
            const bool poisoned = b == pb && h / group == pkv && sees(c, r, pj);
            check_row(got.out, clean.out, b, r, h, dv, poisoned);
            if (poisoned) check_row(got.dq, clean.dq, b, r, h, dh, true);
          }
    }
}

namespace {

// Where a NaN key's gradient may reach: rows of the poisoned kv head that see the key
// (their weights are NaN), and the keys and values those rows see.
struct KeyPoison {
  std::size_t b, j, kv, column;
};

bool row_sees_poison(const Case& c, const KeyPoison& p, std::size_t b, std::size_t r,
                     std::size_t h) {
  return b == p.b && h / (c.H / c.KV) == p.kv && sees(c, r, p.j);
}

bool key_seen_by_poisoned_row(const Case& c, const KeyPoison& p, std::size_t b, std::size_t j,
                              std::size_t kv) {
  if (b != p.b || kv != p.kv) return false;
  for (std::size_t r = 0; r < c.Tq; ++r)
    if (sees(c, r, p.j) && sees(c, r, j)) return true;
  return false;
}

// Every element of head h's columns of row r equals the clean run's; `nan_column` (if
// < width) must be NaN instead.
template <class T>
void check_row_except(const Array<T>& got, const Array<T>& clean, std::size_t b, std::size_t r,
                      std::size_t h, std::size_t width, std::size_t nan_column) {
  for (std::size_t c = 0; c < width; ++c) {
    const T x = at(got, b, r, h, c, width), want = at(clean, b, r, h, c, width);
    INFO("[" << b << ", " << r << ", head " << h << ", " << c << "] = " << x << ", clean " << want);
    if (c == nan_column)
      CHECK(std::isnan(x));
    else
      CHECK(double(x) == Approx(double(want)).epsilon(1e-5).margin(1e-6));
  }
}

}  // namespace

// A masked score's gradient is exactly 0 and never multiplies the key it hides: the query
// gradient of a row that does not see the NaN key is the clean one. Head widths 4 and 16
// take both products (BLAS and the small-K kernel with its causal triangle); 40 rows span
// two row blocks of the banded code, 150 keys two key blocks of flash.
TEMPLATE_TEST_CASE("a NaN key leaves the gradients of the rows that do not see it unchanged",
                   "[attention][nonfinite]", float, double) {
  using T = TestType;
  const Case cases[] = {
      {"square causal", 2, 2, 7, 7, true, 0},       {"square causal 40", 2, 2, 40, 40, true, 0},
      {"square full", 2, 2, 7, 7, false, 0},        {"gqa causal 40", 4, 2, 40, 40, true, 0},
      {"gqa window 3", 4, 2, 7, 7, true, 3},        {"gqa window 5 of 40", 4, 2, 40, 40, true, 5},
      {"gqa Tq < Tk", 4, 2, 5, 9, true, 0},         {"mha window 9 of 150", 2, 2, 150, 150, true, 9},
      {"gqa causal 150", 4, 2, 150, 150, true, 0},
  };
  for (const std::size_t width : {std::size_t(4), std::size_t(16)})
    for (const Case& c : cases)
      for (const AttentionPath path : kPaths) {
        INFO(c.name << ", head width " << width << ", " << path_name(path));
        const Array<T> q0 = randn_array<T>({B, c.Tq, c.H * width}, 41);
        const Array<T> k0 = randn_array<T>({B, c.Tk, c.KV * width}, 42);
        const Array<T> v0 = randn_array<T>({B, c.Tk, c.KV * dv}, 43);
        const Array<T> g = randn_array<T>({B, c.Tq, c.H * dv}, 44);
        // a key in the middle: rows before it (causal) or past its window never see it
        const KeyPoison p{0, c.Tk / 2, c.KV - 1, 2};
        Array<T> k = k0;
        at(k, p.b, p.j, p.kv, p.column, width) = std::numeric_limits<T>::quiet_NaN();
        AttentionSpec spec = spec_of(c);
        spec.head_dim = width;
        const Results<T> clean = run(path, q0, k0, v0, spec, g);
        const Results<T> got = run(path, q0, k, v0, spec, g);
        for (std::size_t b = 0; b < B; ++b)
          for (std::size_t r = 0; r < c.Tq; ++r)
            for (std::size_t h = 0; h < c.H; ++h) {
              if (row_sees_poison(c, p, b, r, h)) continue;
              check_row(got.out, clean.out, b, r, h, dv, false);
              // the composed path multiplies the masked scores' zero gradients by every key
              // (a generic matmul knows no mask): NaN in the poisoned column only
              const bool same_kv = b == p.b && h / (c.H / c.KV) == p.kv;
              const std::size_t nan_column =
                  path == AttentionPath::composed && same_kv ? p.column : width;
              check_row_except(got.dq, clean.dq, b, r, h, width, nan_column);
            }
        for (std::size_t b = 0; b < B; ++b)
          for (std::size_t j = 0; j < c.Tk; ++j)
            for (std::size_t kv = 0; kv < c.KV; ++kv)
              if (!key_seen_by_poisoned_row(c, p, b, j, kv)) {
                check_row(got.dk, clean.dk, b, j, kv, width, false);
                check_row(got.dv, clean.dv, b, j, kv, dv, false);
              }
      }
}

TEST_CASE("decode: a NaN or infinite query or a NaN visible key gives NaN, an unseen one nothing",
          "[attention][nonfinite][kv_cache]") {
  using T = double;
  // 2 batch items, 4 query heads over 2 kv heads, 9 held positions, a window of 5
  const Case c{"decode", 4, 2, 1, 9, true, 5};
  const AttentionSpec spec = spec_of(c);
  const Array<T> q0 = randn_array<T>({B, 1, c.H * dh}, 21);
  const Array<T> k0 = keys_with_positive_column0<T>(c, 22);
  const Array<T> v0 = randn_array<T>({B, c.Tk, c.KV * dv}, 23);
  const KVRing ring{c.Tk, c.Tk, 0};
  NoGradGuard no_grad;
  auto decode = [&](const Array<T>& q, const Array<T>& k) {
    return attention_decode(Tensor<T>(q), Tensor<T>(k), Tensor<T>(v0), ring, spec).value();
  };
  const Array<T> clean = decode(q0, k0);
  // the path agrees with attention() on the clean inputs
  const Array<T> full = attention(Tensor<T>(q0), Tensor<T>(k0), Tensor<T>(v0),
                                  make_spec(c.H, c.KV, true, c.window)).out.value();
  check_close(clean, full, 1e-12);
  const T inf = std::numeric_limits<T>::infinity();
  for (const T poison : {std::nan(""), inf, -inf}) {
    INFO("query poison " << poison);
    Array<T> q = q0;
    at(q, 1, 0, 3, 0, dh) = poison;
    const Array<T> got = decode(q, k0);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t h = 0; h < c.H; ++h) check_row(got, clean, b, 0, h, dv, b == 1 && h == 3);
  }
  for (const std::size_t j : {std::size_t(2), std::size_t(6)}) {  // outside / inside the window
    INFO("NaN key " << j);
    Array<T> k = k0;
    at(k, 0, j, 0, 1, dh) = std::nan("");
    const Array<T> got = decode(q0, k);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t h = 0; h < c.H; ++h)
        check_row(got, clean, b, 0, h, dv, b == 0 && h / 2 == 0 && sees(c, 0, j));
  }
}

TEST_CASE("a row the mask hides entirely still gives zeros, even when its scores are NaN",
          "[attention][nonfinite]") {
  using T = double;
  // composed with an explicit mask: query 1 may attend to nothing, and its scores are NaN
  Array<T> q0 = randn_array<T>({3, 4}, 31);
  q0(1, 2) = std::nan("");
  Tensor<T> Q(q0, true), K(randn_array<T>({5, 4}, 32), true), V(randn_array<T>({5, 2}, 33), true);
  Mask mask = Mask::from_shape({3, 5});
  mask.fill(true);
  for (std::size_t j = 0; j < 5; ++j) mask(1, j) = false;
  const AttentionResult<T> r = scaled_dot_product_attention(Q, K, V, mask);
  for (std::size_t j = 0; j < 5; ++j) CHECK(r.weights.value()(1, j) == 0.0);
  for (std::size_t c = 0; c < 2; ++c) CHECK(r.out.value()(1, c) == 0.0);
  sum(r.out * Tensor<T>(randn_array<T>({3, 2}, 34))).backward();
  for (std::size_t c = 0; c < 4; ++c) CHECK(Q.grad()(1, c) == 0.0);
  for (std::size_t c = 0; c < 2; ++c) CHECK(std::isfinite(r.out.value()(0, c)));

  // fused, flash, composed with no keys at all: every row fully masked, zeros forward and back
  for (const AttentionPath path : kPaths) {
    INFO(path_name(path));
    Tensor<T> q(randn_array<T>({2, 3, 8}, 35), true), k(Array<T>::from_shape({2, 0, 4}), true),
        v(Array<T>::from_shape({2, 0, 6}), true);
    const Tensor<T> out = attention(q, k, v, make_spec(2, 1, false), path).out;
    sum(out * Tensor<T>(randn_array<T>({2, 3, 12}, 36))).backward();
    for (const T x : out.value()) CHECK(x == 0.0);
    for (const T x : q.grad()) CHECK(x == 0.0);
  }
}
