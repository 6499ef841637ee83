// Randomized property tests for the elementwise, reduce, shape, softmax and matmul ops.
//
// Every case draws a random rank (1-4) and random shapes that broadcast (size-1 axes and
// missing leading axes included), runs the op, and compares the forward result with a
// naive loop written here from the definition: flat index -> multi-index -> input offsets,
// no xtensor broadcasting. A sample of the cases also runs gradcheck in double, and
// incompatible shapes must throw ShapeError (never crash, never return garbage). The
// seeds are fixed: a failure prints the op, the shapes, the case number and the seed, and
// reproduces. Each TEST_CASE WARNs how many cases it ran (docs/RELIABILITY.md adds them up).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "helpers.hpp"
#include "autograd/shape.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

using Index = std::vector<std::size_t>;

constexpr int kCasesPerOp = 200;  // random cases per op
constexpr int kGradcheckEvery = 4;  // every 4th case also runs gradcheck (double)
constexpr int kFloatEvery = 3;      // every 3rd case also runs in float

// How many cases a TEST_CASE ran, printed at its end.
struct Counts {
  long forward = 0;    // forward results compared with the reference loop
  long gradcheck = 0;  // gradchecks
  long errors = 0;     // incompatible calls that threw ShapeError
  void report(const char* what) const {
    WARN(what << ": " << forward << " forward cases vs reference loops, " << gradcheck
              << " gradchecks, " << errors << " ShapeError cases");
  }
};

struct Rand {
  explicit Rand(std::uint64_t seed) : gen(seed) {}
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(gen.integer(n)); }
  std::size_t between(std::size_t lo, std::size_t hi) { return lo + below(hi - lo + 1); }
  bool coin(double p = 0.5) { return gen.uniform() < p; }
  Generator gen;
};

enum class Domain { any, positive, away_from_zero };

double draw(Rand& r, Domain d) {
  switch (d) {
    case Domain::positive: return r.gen.uniform(0.25, 2.0);
    case Domain::away_from_zero: return r.gen.uniform(0.2, 1.5) * (r.coin() ? -1.0 : 1.0);
    case Domain::any: break;
  }
  return r.gen.uniform(-2.0, 2.0);
}

// Values drawn once, as double, so the float and double runs see the same numbers.
struct Input {
  Shape shape;
  std::vector<double> v;
  template <class T>
  Tensor<T> tensor(bool requires_grad = false) const {
    Array<T> a = Array<T>::from_shape(shape);
    for (std::size_t i = 0; i < v.size(); ++i) a.data()[i] = static_cast<T>(v[i]);
    return Tensor<T>(std::move(a), requires_grad);
  }
};

Input input(Rand& r, const Shape& shape, Domain d = Domain::any) {
  Input in{shape, std::vector<double>(numel(shape))};
  for (double& x : in.v) x = draw(r, d);
  return in;
}

// --- index arithmetic, written out (the reference side) -------------------------------

std::size_t count(const Shape& s) {
  std::size_t n = 1;
  for (std::size_t d : s) n *= d;
  return n;
}

Index unravel(std::size_t flat, const Shape& s) {
  Index idx(s.size());
  for (std::size_t i = s.size(); i-- > 0;) {
    idx[i] = flat % s[i];
    flat /= s[i];
  }
  return idx;
}

std::size_t ravel(const Index& idx, const Shape& s) {
  std::size_t flat = 0;
  for (std::size_t i = 0; i < s.size(); ++i) flat = flat * s[i] + idx[i];
  return flat;
}

// The flat position in an operand of shape `in` that broadcasting reads for the output
// element at `out_idx`: axes aligned from the right, a size-1 axis always reads index 0.
std::size_t broadcast_offset(const Index& out_idx, const Shape& in) {
  const std::size_t lead = out_idx.size() - in.size();
  std::size_t flat = 0;
  for (std::size_t i = 0; i < in.size(); ++i)
    flat = flat * in[i] + (in[i] == 1 ? 0 : out_idx[lead + i]);
  return flat;
}

// NumPy's broadcast of two compatible shapes.
Shape broadcast_of(const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::size_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::size_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    REQUIRE((da == db || da == 1 || db == 1));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::size_t positive_axis(long axis, std::size_t rank) {
  return axis < 0 ? static_cast<std::size_t>(axis + static_cast<long>(rank))
                  : static_cast<std::size_t>(axis);
}

// --- random shapes ----------------------------------------------------------------------

Shape random_shape(Rand& r, std::size_t rank, std::size_t max_dim = 4) {
  Shape s(rank);
  for (std::size_t& d : s) d = r.between(1, max_dim);
  return s;
}

// A shape that broadcasts to `full` without enlarging it: some leading axes dropped
// (possibly all), every remaining axis either full's size or 1.
Shape broadcast_operand(Rand& r, const Shape& full) {
  const std::size_t drop = r.coin(0.6) ? 0 : r.between(0, full.size());
  Shape s(full.begin() + drop, full.end());
  for (std::size_t& d : s)
    if (r.coin(0.3)) d = 1;
  return s;
}

// A random axis of a rank-`rank` tensor, negative half of the time.
long random_axis(Rand& r, std::size_t rank) {
  const long a = static_cast<long>(r.below(rank));
  return r.coin() ? a - static_cast<long>(rank) : a;
}

std::vector<std::size_t> random_permutation(Rand& r, std::size_t n) {
  std::vector<std::size_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = i;
  for (std::size_t i = n; i > 1; --i) std::swap(p[i - 1], p[r.below(i)]);
  return p;
}

std::string shapes_of(const std::vector<Shape>& shapes) {
  std::string s;
  for (std::size_t i = 0; i < shapes.size(); ++i) s += (i ? " " : "") + shape_str(shapes[i]);
  return s;
}

// --- comparisons ------------------------------------------------------------------------

template <class T>
double forward_tolerance() {
  return std::is_same<T, float>::value ? 2e-5 : 1e-12;
}

// `got` has `shape` and every value within atol + rtol |want| of the reference.
template <class T>
void check_forward(const Tensor<T>& got, const Shape& shape, const std::vector<double>& want,
                   const std::string& what, double scale = 1.0) {
  INFO(what << (std::is_same<T, float>::value ? " [float]" : " [double]"));
  REQUIRE(shape_str(got.shape()) == shape_str(shape));
  REQUIRE(got.size() == want.size());
  const double tol = forward_tolerance<T>() * scale;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got.data()[i]);
    const bool ok = (std::isnan(want[i]) && std::isnan(g)) ||
                    std::abs(g - want[i]) <= tol * (1.0 + std::abs(want[i]));
    if (!ok && bad++ == 0) first = i;
  }
  INFO(bad << " elements differ; first at flat index " << first << ": got "
           << (want.empty() ? 0.0 : static_cast<double>(got.data()[first])) << ", reference "
           << (want.empty() ? 0.0 : want[first]));
  CHECK(bad == 0);
}

// gradcheck in double on every input, a seeded sample of at most 12 elements each.
void sample_gradcheck(const TensorFunction<double>& f, const std::vector<Input>& inputs,
                      std::uint64_t seed, const std::string& what) {
  std::vector<Tensor<double>> ts;
  for (const Input& in : inputs) ts.push_back(in.tensor<double>(true));
  GradcheckOptions o;
  o.max_elements = 12;
  o.seed = seed;
  INFO(what << " [gradcheck]");
  require_gradcheck<double>(f, ts, o);
}

// `call` throws ShapeError mentioning every part, and leaves no node on the tape.
void require_rejected(const std::function<void()>& call, const std::vector<std::string>& parts,
                      const std::string& what, Counts& counts) {
  INFO(what);
  require_shape_error(call, parts);
  ++counts.errors;
}

// --- elementwise ------------------------------------------------------------------------

// z = op(a, b) with a and b broadcasting to a random rank-1..4 shape.
template <class F, class R>
void binary_cases(const char* name, Domain da, Domain db, F op, R ref, std::uint64_t seed,
                  Counts& counts) {
  Rand r(seed);
  for (int n = 0; n < kCasesPerOp; ++n) {
    const Shape full = random_shape(r, r.between(1, 4));
    const Shape sa = broadcast_operand(r, full), sb = broadcast_operand(r, full);
    const Input a = input(r, sa, da), b = input(r, sb, db);
    const Shape out = broadcast_of(sa, sb);
    std::vector<double> want(count(out));
    for (std::size_t i = 0; i < want.size(); ++i) {
      const Index idx = unravel(i, out);
      want[i] = ref(a.v[broadcast_offset(idx, sa)], b.v[broadcast_offset(idx, sb)]);
    }
    const std::string what = fmt::format("{} {} (case {}, seed {})", name, shapes_of({sa, sb}), n, seed);
    check_forward(op(a.tensor<double>(), b.tensor<double>()), out, want, what);
    if (n % kFloatEvery == 0) check_forward(op(a.tensor<float>(), b.tensor<float>()), out, want, what);
    ++counts.forward;
    if (n % kGradcheckEvery == 0) {
      sample_gradcheck([op](const std::vector<Tensor<double>>& x) { return op(x[0], x[1]); },
                       {a, b}, seed + n, what);
      ++counts.gradcheck;
    }
  }
}

// y = op(a) elementwise (a unary function or an op with a constant scalar).
template <class F, class R>
void unary_cases(const char* name, Domain d, F op, R ref, std::uint64_t seed, Counts& counts,
                 double float_scale = 1.0) {
  Rand r(seed);
  for (int n = 0; n < kCasesPerOp; ++n) {
    const Shape s = random_shape(r, r.between(1, 4));
    const Input a = input(r, s, d);
    std::vector<double> want(a.v.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = ref(a.v[i]);
    const std::string what = fmt::format("{} {} (case {}, seed {})", name, shape_str(s), n, seed);
    check_forward(op(a.tensor<double>()), s, want, what);
    if (n % kFloatEvery == 0) check_forward(op(a.tensor<float>()), s, want, what, float_scale);
    ++counts.forward;
    if (n % kGradcheckEvery == 0) {
      sample_gradcheck([op](const std::vector<Tensor<double>>& x) { return op(x[0]); }, {a},
                       seed + n, what);
      ++counts.gradcheck;
    }
  }
}

double gelu_ref(double x) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

// Two shapes that do not broadcast: some axis (aligned from the right) has sizes d1 != d2,
// both >= 2.
std::pair<Shape, Shape> incompatible_pair(Rand& r) {
  Shape a = random_shape(r, r.between(1, 4));
  Shape b = broadcast_operand(r, a);
  if (b.empty()) b = {a.back()};
  const std::size_t p = r.below(b.size());  // position from the right
  a[a.size() - 1 - p] = r.between(2, 4);
  b[b.size() - 1 - p] = a[a.size() - 1 - p] + r.between(1, 2);
  if (r.coin()) std::swap(a, b);
  return {a, b};
}

// --- reductions -------------------------------------------------------------------------

struct ReducePlan {
  std::vector<long> axes;   // as passed to the op (maybe negative, any order)
  std::vector<bool> reduced;  // per input axis
  bool keepdims = false;
  Shape kept, result;
};

ReducePlan random_reduction(Rand& r, const Shape& s) {
  ReducePlan p;
  p.reduced.assign(s.size(), false);
  for (std::size_t i = 0; i < s.size(); ++i)
    if (r.coin()) {
      p.reduced[i] = true;
      p.axes.push_back(r.coin() ? static_cast<long>(i) - static_cast<long>(s.size())
                                : static_cast<long>(i));
    }
  for (std::size_t i = p.axes.size(); i > 1; --i) std::swap(p.axes[i - 1], p.axes[r.below(i)]);
  p.keepdims = r.coin();
  p.kept = s;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (p.reduced[i]) p.kept[i] = 1;
    if (!p.reduced[i] || p.keepdims) p.result.push_back(p.reduced[i] ? 1 : s[i]);
  }
  return p;
}

// Sums (mean: averages) `a` over the planned axes by visiting every input element once.
std::vector<double> reference_reduce(const Input& a, const ReducePlan& p, bool mean) {
  std::vector<double> acc(count(p.kept), 0.0);
  std::size_t folded = 1;
  for (std::size_t i = 0; i < a.shape.size(); ++i)
    if (p.reduced[i]) folded *= a.shape[i];
  for (std::size_t i = 0; i < a.v.size(); ++i) {
    Index idx = unravel(i, a.shape);
    for (std::size_t k = 0; k < idx.size(); ++k)
      if (p.reduced[k]) idx[k] = 0;
    acc[ravel(idx, p.kept)] += a.v[i];
  }
  if (mean)
    for (double& x : acc) x /= static_cast<double>(folded);
  return acc;
}

// --- softmax ----------------------------------------------------------------------------

// softmax / log_softmax of `a` along `axis`, row by row from the definition.
std::vector<double> reference_softmax(const Input& a, std::size_t axis, bool log) {
  std::vector<double> y(a.v.size());
  const Shape& s = a.shape;
  for (std::size_t i = 0; i < a.v.size(); ++i) {
    Index idx = unravel(i, s);
    if (idx[axis] != 0) continue;  // visit each row from its first element
    double m = -INFINITY;
    for (idx[axis] = 0; idx[axis] < s[axis]; ++idx[axis]) m = std::max(m, a.v[ravel(idx, s)]);
    double z = 0;
    for (idx[axis] = 0; idx[axis] < s[axis]; ++idx[axis]) z += std::exp(a.v[ravel(idx, s)] - m);
    for (idx[axis] = 0; idx[axis] < s[axis]; ++idx[axis]) {
      const std::size_t j = ravel(idx, s);
      y[j] = log ? a.v[j] - m - std::log(z) : std::exp(a.v[j] - m) / z;
    }
  }
  return y;
}

// masked_softmax along the last axis: disallowed positions weigh 0, a row with nothing
// allowed is all zeros.
std::vector<double> reference_masked_softmax(const Input& a, const Mask& mask) {
  const Shape& s = a.shape;
  const Shape ms(mask.shape().begin(), mask.shape().end());
  const std::size_t L = s.back();
  std::vector<double> y(a.v.size(), 0.0);
  for (std::size_t row = 0; row < a.v.size() / L; ++row) {
    std::vector<bool> allowed(L);
    double m = -INFINITY;
    for (std::size_t k = 0; k < L; ++k) {
      allowed[k] = mask.data()[broadcast_offset(unravel(row * L + k, s), ms)];
      if (allowed[k]) m = std::max(m, a.v[row * L + k]);
    }
    if (m == -INFINITY) continue;
    double z = 0;
    for (std::size_t k = 0; k < L; ++k)
      if (allowed[k]) z += std::exp(a.v[row * L + k] - m);
    for (std::size_t k = 0; k < L; ++k)
      if (allowed[k]) y[row * L + k] = std::exp(a.v[row * L + k] - m) / z;
  }
  return y;
}

// --- matmul -----------------------------------------------------------------------------

// NumPy matmul from its definition: a 1-D operand is a row (left) or column (right)
// vector whose added axis is dropped; batch axes broadcast. b_transposed: b is (..., N, K).
std::vector<double> reference_matmul(const Input& a, const Input& b, bool b_transposed,
                                     Shape& out_shape) {
  Shape as = a.shape, bs = b.shape;
  const bool va = as.size() == 1, vb = bs.size() == 1;
  if (va) as.insert(as.begin(), 1);
  if (vb) bs.push_back(1);
  const std::size_t M = as[as.size() - 2], K = as.back();
  const std::size_t N = b_transposed ? bs[bs.size() - 2] : bs.back();
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const Shape batch = broadcast_of(ab, bb);
  std::vector<double> c(count(batch) * M * N, 0.0);
  for (std::size_t n = 0; n < count(batch); ++n) {
    const Index bi = unravel(n, batch);
    const std::size_t ia = broadcast_offset(bi, ab), ib = broadcast_offset(bi, bb);
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t j = 0; j < N; ++j) {
        double acc = 0;
        for (std::size_t k = 0; k < K; ++k) {
          const double bv = b_transposed ? b.v[ib * N * K + j * K + k] : b.v[ib * K * N + k * N + j];
          acc += a.v[ia * M * K + m * K + k] * bv;
        }
        c[n * M * N + m * N + j] = acc;
      }
  }
  out_shape = batch;
  if (!va) out_shape.push_back(M);
  if (!vb) out_shape.push_back(N);
  return c;
}

// A batch shape for one operand given the output's batch shape `full` and a pattern per
// axis: 0 = missing, 1 = size 1, 2 = equal. Missing axes must lead.
Shape batch_by_pattern(const Shape& full, const std::vector<int>& pattern) {
  Shape s;
  for (std::size_t i = 0; i < full.size(); ++i) {
    if (pattern[i] == 0) {
      REQUIRE(s.empty());
      continue;
    }
    s.push_back(pattern[i] == 1 ? 1 : full[i]);
  }
  return s;
}

// Every per-operand pattern of two batch axes: missing/1/equal each, missing only leading.
std::vector<std::vector<int>> batch_patterns() {
  std::vector<std::vector<int>> out = {{0, 0}};
  for (int second : {1, 2}) out.push_back({0, second});
  for (int first : {1, 2})
    for (int second : {1, 2}) out.push_back({first, second});
  return out;
}

template <class F>
void matmul_case(const char* name, F op, const Input& a, const Input& b, bool b_transposed,
                 int n, std::uint64_t seed, bool grad, bool in_float, Counts& counts) {
  Shape out;
  const std::vector<double> want = reference_matmul(a, b, b_transposed, out);
  const std::string what =
      fmt::format("{} {} (case {}, seed {})", name, shapes_of({a.shape, b.shape}), n, seed);
  check_forward(op(a.tensor<double>(), b.tensor<double>()), out, want, what);
  if (in_float) check_forward(op(a.tensor<float>(), b.tensor<float>()), out, want, what);
  ++counts.forward;
  if (grad) {
    sample_gradcheck([op](const std::vector<Tensor<double>>& x) { return op(x[0], x[1]); },
                     {a, b}, seed + n, what);
    ++counts.gradcheck;
  }
}

}  // namespace

TEST_CASE("properties: binary elementwise ops with random broadcasting", "[properties]") {
  Counts counts;
  auto add_ = [](const auto& a, const auto& b) { return add(a, b); };
  auto sub_ = [](const auto& a, const auto& b) { return sub(a, b); };
  auto mul_ = [](const auto& a, const auto& b) { return mul(a, b); };
  auto div_ = [](const auto& a, const auto& b) { return div(a, b); };
  binary_cases("add", Domain::any, Domain::any, add_, [](double x, double y) { return x + y; }, 101, counts);
  binary_cases("sub", Domain::any, Domain::any, sub_, [](double x, double y) { return x - y; }, 102, counts);
  binary_cases("mul", Domain::any, Domain::any, mul_, [](double x, double y) { return x * y; }, 103, counts);
  binary_cases("div", Domain::any, Domain::away_from_zero, div_, [](double x, double y) { return x / y; },
               104, counts);
  auto pow_ = [](const auto& a, const auto& b) { return pow(a, b); };
  binary_cases("pow", Domain::positive, Domain::any, pow_, [](double x, double y) { return std::pow(x, y); },
               105, counts);
  counts.report("binary elementwise");
}

TEST_CASE("properties: unary and scalar elementwise ops on random shapes", "[properties]") {
  Counts counts;
  const double c = 0.75;
  unary_cases("neg", Domain::any, [](const auto& a) { return neg(a); }, [](double x) { return -x; }, 201, counts);
  unary_cases("exp", Domain::any, [](const auto& a) { return exp(a); }, [](double x) { return std::exp(x); }, 202, counts);
  unary_cases("log", Domain::positive, [](const auto& a) { return log(a); }, [](double x) { return std::log(x); }, 203, counts);
  unary_cases("sqrt", Domain::positive, [](const auto& a) { return sqrt(a); }, [](double x) { return std::sqrt(x); }, 204, counts);
  unary_cases("pow 2.5", Domain::positive, [](const auto& a) { return pow(a, decltype(a.item())(2.5)); },
              [](double x) { return std::pow(x, 2.5); }, 205, counts);
  unary_cases("pow -1.5", Domain::positive, [](const auto& a) { return pow(a, decltype(a.item())(-1.5)); },
              [](double x) { return std::pow(x, -1.5); }, 206, counts);
  unary_cases("tanh", Domain::any, [](const auto& a) { return tanh(a); }, [](double x) { return std::tanh(x); }, 207, counts);
  unary_cases("relu", Domain::away_from_zero, [](const auto& a) { return relu(a); },
              [](double x) { return x > 0 ? x : 0.0; }, 208, counts);
  unary_cases("sigmoid", Domain::any, [](const auto& a) { return sigmoid(a); },
              [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 209, counts);
  unary_cases("gelu", Domain::any, [](const auto& a) { return gelu(a); }, gelu_ref, 210, counts);
  unary_cases("add scalar", Domain::any, [c](const auto& a) { return add(a, decltype(a.item())(c)); },
              [c](double x) { return x + c; }, 211, counts);
  unary_cases("sub scalar", Domain::any, [c](const auto& a) { return sub(a, decltype(a.item())(c)); },
              [c](double x) { return x - c; }, 212, counts);
  unary_cases("scalar sub", Domain::any, [c](const auto& a) { return sub(decltype(a.item())(c), a); },
              [c](double x) { return c - x; }, 213, counts);
  unary_cases("mul scalar", Domain::any, [c](const auto& a) { return mul(a, decltype(a.item())(c)); },
              [c](double x) { return x * c; }, 214, counts);
  unary_cases("div scalar", Domain::any, [c](const auto& a) { return div(a, decltype(a.item())(c)); },
              [c](double x) { return x / c; }, 215, counts);
  unary_cases("scalar div", Domain::away_from_zero, [c](const auto& a) { return div(decltype(a.item())(c), a); },
              [c](double x) { return c / x; }, 216, counts);
  unary_cases("scalar pow", Domain::any, [c](const auto& a) { return pow(decltype(a.item())(c), a); },
              [c](double x) { return std::pow(c, x); }, 217, counts);
  counts.report("unary and scalar elementwise");
}

TEST_CASE("properties: sum mean and max over random axes", "[properties]") {
  Counts counts;
  Rand r(301);
  for (int n = 0; n < 3 * kCasesPerOp; ++n) {
    const Shape s = random_shape(r, r.between(1, 4));
    const Input a = input(r, s);
    const ReducePlan p = random_reduction(r, s);
    const bool is_mean = n % 3 == 1;
    const std::string what = fmt::format("{} {} axes ({}) keepdims {} (case {})",
                                         is_mean ? "mean" : "sum", shape_str(s),
                                         fmt::join(p.axes, ","), p.keepdims, n);
    const std::vector<double> want = reference_reduce(a, p, is_mean);
    auto op = [&p, is_mean](const auto& x) {
      return is_mean ? mean(x, p.axes, p.keepdims) : sum(x, p.axes, p.keepdims);
    };
    check_forward(op(a.tensor<double>()), p.result, want, what);
    // float sums of up to 256 terms: round-off grows with the count
    if (n % kFloatEvery == 0) check_forward(op(a.tensor<float>()), p.result, want, what, 10.0);
    ++counts.forward;
    if (n % kGradcheckEvery == 0) {
      sample_gradcheck([op](const std::vector<Tensor<double>>& x) { return op(x[0]); }, {a}, n, what);
      ++counts.gradcheck;
    }
    // over everything: a rank-0 result
    if (n % 3 == 2) {
      ReducePlan all;
      all.reduced.assign(s.size(), true);
      all.kept = Shape(s.size(), 1);
      std::vector<double> total = reference_reduce(a, all, n % 2 == 0);
      check_forward(n % 2 == 0 ? mean(a.tensor<double>()) : sum(a.tensor<double>()), Shape{}, total,
                    what + " over everything");
      ++counts.forward;
    }
  }
  for (int n = 0; n < kCasesPerOp; ++n) {
    const Shape s = random_shape(r, r.between(1, 4));
    const Input a = input(r, s);
    const long axis = random_axis(r, s.size());
    const std::size_t ax = positive_axis(axis, s.size());
    const bool keepdims = r.coin();
    Shape out;
    for (std::size_t i = 0; i < s.size(); ++i)
      if (i != ax || keepdims) out.push_back(i == ax ? 1 : s[i]);
    Shape kept = s;
    kept[ax] = 1;
    std::vector<double> want(count(kept), -INFINITY);
    for (std::size_t i = 0; i < a.v.size(); ++i) {
      Index idx = unravel(i, s);
      idx[ax] = 0;
      double& w = want[ravel(idx, kept)];
      w = std::max(w, a.v[i]);
    }
    const std::string what = fmt::format("max {} axis {} keepdims {} (case {})", shape_str(s), axis, keepdims, n);
    auto op = [axis, keepdims](const auto& x) { return max(x, axis, keepdims); };
    check_forward(op(a.tensor<double>()), out, want, what);
    if (n % kFloatEvery == 0) check_forward(op(a.tensor<float>()), out, want, what);
    ++counts.forward;
    if (n % kGradcheckEvery == 0) {
      sample_gradcheck([op](const std::vector<Tensor<double>>& x) { return op(x[0]); }, {a}, n, what);
      ++counts.gradcheck;
    }
  }
  counts.report("sum/mean/max");
}

TEST_CASE("properties: reshape transpose swapaxes concatenate and slice on random shapes", "[properties]") {
  Counts counts;
  Rand r(401);
  auto finish = [&](auto op, const Input& a, const Shape& out, const std::vector<double>& want,
                    const std::string& what, int n) {
    check_forward(op(a.template tensor<double>()), out, want, what);
    if (n % kFloatEvery == 0) check_forward(op(a.template tensor<float>()), out, want, what);
    ++counts.forward;
    if (n % kGradcheckEvery == 0) {
      sample_gradcheck([op](const std::vector<Tensor<double>>& x) { return op(x[0]); }, {a}, n, what);
      ++counts.gradcheck;
    }
  };
  for (int n = 0; n < kCasesPerOp; ++n) {  // reshape: a random factorisation of the size
    const Input a = input(r, random_shape(r, r.between(1, 4)));
    std::size_t rest = a.v.size();
    Shape to;
    const std::size_t rank = r.between(1, 4);
    for (std::size_t k = 0; k + 1 < rank; ++k) {
      std::vector<std::size_t> divisors;
      for (std::size_t d = 1; d <= rest; ++d)
        if (rest % d == 0) divisors.push_back(d);
      to.push_back(divisors[r.below(divisors.size())]);
      rest /= to.back();
    }
    to.push_back(rest);
    finish([to](const auto& x) { return reshape(x, to); }, a, to, a.v,
           fmt::format("reshape {} to {} (case {})", shape_str(a.shape), shape_str(to), n), n);
  }
  for (int n = 0; n < kCasesPerOp; ++n) {  // transpose: out[i...] = a[inverse-permuted i...]
    const Input a = input(r, random_shape(r, r.between(1, 4)));
    const std::vector<std::size_t> perm = random_permutation(r, a.shape.size());
    Shape out(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) out[i] = a.shape[perm[i]];
    std::vector<double> want(a.v.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      const Index oi = unravel(i, out);
      Index ai(perm.size());
      for (std::size_t k = 0; k < perm.size(); ++k) ai[perm[k]] = oi[k];
      want[i] = a.v[ravel(ai, a.shape)];
    }
    finish([perm](const auto& x) { return transpose(x, perm); }, a, out, want,
           fmt::format("transpose {} perm ({}) (case {})", shape_str(a.shape), fmt::join(perm, ","), n), n);
  }
  for (int n = 0; n < kCasesPerOp; ++n) {  // swapaxes, negative axes included
    const Input a = input(r, random_shape(r, r.between(1, 4)));
    const long i = random_axis(r, a.shape.size()), j = random_axis(r, a.shape.size());
    const std::size_t pi = positive_axis(i, a.shape.size()), pj = positive_axis(j, a.shape.size());
    Shape out = a.shape;
    std::swap(out[pi], out[pj]);
    std::vector<double> want(a.v.size());
    for (std::size_t k = 0; k < want.size(); ++k) {
      Index idx = unravel(k, out);
      std::swap(idx[pi], idx[pj]);
      want[k] = a.v[ravel(idx, a.shape)];
    }
    finish([i, j](const auto& x) { return swapaxes(x, i, j); }, a, out, want,
           fmt::format("swapaxes {} {} {} (case {})", shape_str(a.shape), i, j, n), n);
  }
  for (int n = 0; n < kCasesPerOp; ++n) {  // slice [start, stop), empty ranges included
    const Input a = input(r, random_shape(r, r.between(1, 4)));
    const long axis = random_axis(r, a.shape.size());
    const std::size_t ax = positive_axis(axis, a.shape.size());
    const std::size_t start = r.between(0, a.shape[ax]);
    const std::size_t stop = r.between(start, a.shape[ax]);
    Shape out = a.shape;
    out[ax] = stop - start;
    std::vector<double> want(count(out));
    for (std::size_t k = 0; k < want.size(); ++k) {
      Index idx = unravel(k, out);
      idx[ax] += start;
      want[k] = a.v[ravel(idx, a.shape)];
    }
    finish([axis, start, stop](const auto& x) { return slice(x, axis, start, stop); }, a, out, want,
           fmt::format("slice {} axis {} [{}, {}) (case {})", shape_str(a.shape), axis, start, stop, n), n);
  }
  for (int n = 0; n < kCasesPerOp; ++n) {  // concatenate 1-3 parts
    const Shape base = random_shape(r, r.between(1, 4));
    const long axis = random_axis(r, base.size());
    const std::size_t ax = positive_axis(axis, base.size());
    std::vector<Input> parts;
    std::vector<std::size_t> owner, offset;  // per position along ax: which part, where
    for (std::size_t k = 0, m = r.between(1, 3); k < m; ++k) {
      Shape s = base;
      s[ax] = r.between(1, 3);
      for (std::size_t j = 0; j < s[ax]; ++j) {
        owner.push_back(k);
        offset.push_back(j);
      }
      parts.push_back(input(r, s));
    }
    Shape out = base;
    out[ax] = owner.size();
    std::vector<double> want(count(out));
    for (std::size_t k = 0; k < want.size(); ++k) {
      Index idx = unravel(k, out);
      const Input& p = parts[owner[idx[ax]]];
      idx[ax] = offset[idx[ax]];
      want[k] = p.v[ravel(idx, p.shape)];
    }
    std::vector<Shape> shapes;
    for (const Input& p : parts) shapes.push_back(p.shape);
    const std::string what = fmt::format("concatenate {} axis {} (case {})", shapes_of(shapes), axis, n);
    auto op = [axis](const auto& xs) { return concatenate(xs, axis); };
    std::vector<Tensor<double>> xd;
    std::vector<Tensor<float>> xf;
    for (const Input& p : parts) {
      xd.push_back(p.tensor<double>());
      xf.push_back(p.tensor<float>());
    }
    check_forward(op(xd), out, want, what);
    if (n % kFloatEvery == 0) check_forward(op(xf), out, want, what);
    ++counts.forward;
    if (n % kGradcheckEvery == 0) {
      sample_gradcheck([op](const std::vector<Tensor<double>>& x) { return op(x); }, parts, n, what);
      ++counts.gradcheck;
    }
  }
  counts.report("shape ops");
}

TEST_CASE("properties: softmax log_softmax and masked_softmax on random shapes", "[properties]") {
  Counts counts;
  Rand r(501);
  for (int n = 0; n < 2 * kCasesPerOp; ++n) {
    const Input a = input(r, random_shape(r, r.between(1, 4), 5));
    const long axis = random_axis(r, a.shape.size());
    const bool log = n % 2 == 1;
    const std::vector<double> want = reference_softmax(a, positive_axis(axis, a.shape.size()), log);
    const std::string what = fmt::format("{} {} axis {} (case {})", log ? "log_softmax" : "softmax",
                                         shape_str(a.shape), axis, n);
    auto op = [axis, log](const auto& x) { return log ? log_softmax(x, axis) : softmax(x, axis); };
    check_forward(op(a.tensor<double>()), a.shape, want, what);
    if (n % kFloatEvery == 0) check_forward(op(a.tensor<float>()), a.shape, want, what);
    ++counts.forward;
    if (n % kGradcheckEvery == 0) {
      sample_gradcheck([op](const std::vector<Tensor<double>>& x) { return op(x[0]); }, {a}, n, what);
      ++counts.gradcheck;
    }
  }
  for (int n = 0; n < kCasesPerOp; ++n) {  // masks that broadcast (missing and size-1 axes)
    const Input a = input(r, random_shape(r, r.between(1, 4), 5));
    const Shape ms = broadcast_operand(r, a.shape);
    Mask mask = Mask::from_shape(ms);
    for (std::size_t i = 0; i < mask.size(); ++i) mask.data()[i] = r.coin(0.7);
    const std::vector<double> want = reference_masked_softmax(a, mask);
    const std::string what = fmt::format("masked_softmax {} mask {} (case {})", shape_str(a.shape),
                                         shape_str(ms), n);
    auto op = [mask](const auto& x) { return masked_softmax(x, mask); };
    check_forward(op(a.tensor<double>()), a.shape, want, what);
    if (n % kFloatEvery == 0) check_forward(op(a.tensor<float>()), a.shape, want, what);
    ++counts.forward;
    if (n % kGradcheckEvery == 0) {
      sample_gradcheck([op](const std::vector<Tensor<double>>& x) { return op(x[0]); }, {a}, n, what);
      ++counts.gradcheck;
    }
  }
  counts.report("softmax");
}

TEST_CASE("properties: matmul with every batch broadcasting pattern and 1-D operands", "[properties]") {
  Counts counts;
  Rand r(601);
  auto mm = [](const auto& a, const auto& b) { return matmul(a, b); };
  auto mm_nt = [](const auto& a, const auto& b) { return matmul_nt(a, b); };
  int n = 0;
  const std::vector<std::vector<int>> patterns = batch_patterns();
  for (int round = 0; round < 4; ++round) {
    for (const auto& pa : patterns)
      for (const auto& pb : patterns) {
        // batch sizes >= 2, so "equal" and "size 1" are different patterns
        const Shape full = {r.between(2, 3), r.between(2, 3)};
        const std::size_t M = r.between(1, 4), K = r.between(1, 4), N = r.between(1, 4);
        Shape sa = batch_by_pattern(full, pa), sb = batch_by_pattern(full, pb);
        Shape sbt = sb;
        sa.insert(sa.end(), {M, K});
        sb.insert(sb.end(), {K, N});
        sbt.insert(sbt.end(), {N, K});
        const Input a = input(r, sa), b = input(r, sb), bt = input(r, sbt);
        const bool grad = n % kGradcheckEvery == 0, in_float = n % kFloatEvery == 0;
        matmul_case("matmul", mm, a, b, false, n, 601, grad, in_float, counts);
        matmul_case("matmul_nt", mm_nt, a, bt, true, n, 601, grad, in_float, counts);
        ++n;
      }
    for (const auto& p : patterns) {  // a 1-D operand on either side, or both
      const Shape full = {r.between(2, 3), r.between(2, 3)};
      const std::size_t M = r.between(1, 4), K = r.between(1, 4), N = r.between(1, 4);
      Shape batched = batch_by_pattern(full, p);
      Shape left = batched, right = batched;
      left.insert(left.end(), {M, K});
      right.insert(right.end(), {K, N});
      const bool grad = n % 2 == 0;
      matmul_case("matmul", mm, input(r, {K}), input(r, right), false, n, 601, grad, true, counts);
      matmul_case("matmul", mm, input(r, left), input(r, {K}), false, n, 601, grad, true, counts);
      ++n;
    }
    const std::size_t K = r.between(1, 5);
    matmul_case("matmul", mm, input(r, {K}), input(r, {K}), false, n++, 601, true, true, counts);
  }
  // and fully random ranks 1-4 on both sides
  for (int k = 0; k < 2 * kCasesPerOp; ++k, ++n) {
    const Shape full = random_shape(r, r.between(0, 2), 3);
    const std::size_t M = r.between(1, 5), K = r.between(1, 5), N = r.between(1, 5);
    const std::size_t ra = r.between(1, full.size() + 2), rb = r.between(1, full.size() + 2);
    auto operand = [&](std::size_t rank, std::size_t rows, std::size_t cols) {
      if (rank == 1) return Shape{rows == K ? rows : cols};
      Shape full_batch(full.end() - static_cast<long>(rank - 2), full.end());
      Shape s;
      for (std::size_t d : full_batch) s.push_back(r.coin(0.3) ? 1 : d);
      s.insert(s.end(), {rows, cols});
      return s;
    };
    const Input a = input(r, operand(ra, M, K)), b = input(r, operand(rb, K, N));
    matmul_case("matmul", mm, a, b, false, n, 601, n % kGradcheckEvery == 0,
                n % kFloatEvery == 0, counts);
  }
  counts.report("matmul");
}

TEST_CASE("properties: incompatible shapes always throw ShapeError", "[properties]") {
  Counts counts;
  Rand r(701);
  const char* names[] = {"add", "sub", "mul", "div", "pow"};
  for (int n = 0; n < kCasesPerOp; ++n) {
    const std::pair<Shape, Shape> shapes = incompatible_pair(r);
    const Shape& sa = shapes.first;
    const Shape& sb = shapes.second;
    const Tensor<double> a = random<double>(sa, n), b = random<double>(sb, n + 1);
    const std::string what = fmt::format("{} (case {})", shapes_of({sa, sb}), n);
    const int k = n % 5;
    require_rejected([&] {
      switch (k) {
        case 0: add(a, b); break;
        case 1: sub(a, b); break;
        case 2: mul(a, b); break;
        case 3: div(a, b); break;
        default: pow(a, b); break;
      }
    }, {names[k], shape_str(sa), shape_str(sb)}, what, counts);
  }
  for (int n = 0; n < kCasesPerOp; ++n) {  // matmul: inner sizes differ, at every rank pair
    const std::size_t ra = r.between(1, 4), rb = r.between(1, 4);
    const std::size_t K = r.between(1, 4);
    Shape sa = random_shape(r, ra), sb = random_shape(r, rb);
    sa.back() = K;
    (rb == 1 ? sb[0] : sb[rb - 2]) = K + r.between(1, 2);
    const Tensor<double> a = random<double>(sa, n), b = random<double>(sb, n + 1);
    require_rejected([&] { matmul(a, b); }, {"matmul", shape_str(sa), shape_str(sb)},
                     fmt::format("matmul inner {} (case {})", shapes_of({sa, sb}), n), counts);
    Shape sbt = sb;
    if (rb >= 2) {
      std::swap(sbt[rb - 1], sbt[rb - 2]);
      if (ra >= 2)
        require_rejected([&] { matmul_nt(a, random<double>(sbt, n)); }, {"matmul_nt", shape_str(sa)},
                         fmt::format("matmul_nt inner {} (case {})", shapes_of({sa, sbt}), n), counts);
    }
  }
  for (int n = 0; n < kCasesPerOp; ++n) {  // matmul: batch axes that do not broadcast
    const std::size_t B1 = r.between(2, 3), B2 = r.between(2, 3);
    const Shape sa = {B1, B2, 2, 3};
    // the last batch axis differs (b lacks the first), or the first one does
    const Shape sb = n % 2 == 0 ? Shape{B2 + r.between(1, 2), 3, 4}
                                : Shape{B1 + r.between(1, 2), B2, 3, 4};
    const Tensor<double> a = random<double>(sa, n), b = random<double>(sb, n + 1);
    require_rejected([&] { matmul(a, b); }, {"matmul", shape_str(sa), shape_str(sb)},
                     fmt::format("matmul batch {} (case {})", shapes_of({sa, sb}), n), counts);
  }
  // rank 0 where rank >= 1 (or 2) is needed
  const Tensor<double> s0 = Tensor<double>::scalar(2.0);
  const Tensor<double> m = random<double>({2, 3}, 1), v = random<double>({3}, 2);
  require_rejected([&] { matmul(s0, m); }, {"matmul", "()"}, "matmul rank 0", counts);
  require_rejected([&] { matmul(m, s0); }, {"matmul", "()"}, "matmul rank 0 right", counts);
  require_rejected([&] { matmul_nt(v, m); }, {"matmul_nt", "(3)"}, "matmul_nt rank 1", counts);
  require_rejected([&] { max(s0, 0); }, {"max", "()"}, "max rank 0", counts);
  require_rejected([&] { softmax(s0, 0); }, {"softmax", "()"}, "softmax rank 0", counts);
  require_rejected([&] { log_softmax(s0, -1); }, {"log_softmax", "()"}, "log_softmax rank 0", counts);
  require_rejected([&] { slice(s0, 0, 0, 0); }, {"slice"}, "slice rank 0", counts);
  require_rejected([&] { concatenate<double>({s0, s0}, 0); }, {"concatenate"}, "concatenate rank 0", counts);
  require_rejected([&] { concatenate<double>({}, 0); }, {"concatenate"}, "concatenate nothing", counts);

  for (int n = 0; n < kCasesPerOp; ++n) {  // axes out of range, repeated axes, bad sizes
    const Shape s = random_shape(r, r.between(1, 4));
    const long rank = static_cast<long>(s.size());
    const Tensor<double> a = random<double>(s, n);
    const long bad = r.coin() ? rank + static_cast<long>(r.below(3)) : -rank - 1 - static_cast<long>(r.below(3));
    const std::string what = fmt::format("{} axis {} (case {})", shape_str(s), bad, n);
    const std::string ss = shape_str(s);
    require_rejected([&] { sum(a, {bad}); }, {"sum", ss}, "sum " + what, counts);
    require_rejected([&] { mean(a, {0, bad}, true); }, {"mean", ss}, "mean " + what, counts);
    require_rejected([&] { max(a, bad); }, {"max", ss}, "max " + what, counts);
    require_rejected([&] { softmax(a, bad); }, {"softmax", ss}, "softmax " + what, counts);
    require_rejected([&] { log_softmax(a, bad); }, {"log_softmax", ss}, "log_softmax " + what, counts);
    require_rejected([&] { swapaxes(a, 0, bad); }, {"swapaxes", ss}, "swapaxes " + what, counts);
    require_rejected([&] { slice(a, bad, 0, 1); }, {"slice", ss}, "slice " + what, counts);
    require_rejected([&] { concatenate<double>({a, a}, bad); }, {"concatenate", ss}, "concatenate " + what, counts);
    const long dup = random_axis(r, s.size());
    require_rejected([&] { sum(a, {dup, dup - (dup < 0 ? -rank : rank)}); }, {"sum", ss},
                     "sum repeated axis " + what, counts);
    // reshape to a different size
    Shape to = random_shape(r, r.between(1, 4));
    if (numel(to) == numel(s)) to.push_back(2);
    require_rejected([&] { reshape(a, to); }, {"reshape", ss, shape_str(to)}, "reshape " + what, counts);
    // transpose by something that is not a permutation of the axes
    std::vector<std::size_t> perm = random_permutation(r, s.size());
    if (r.coin() || s.size() == 1) perm.push_back(perm.size());
    else perm[0] = perm[1];
    require_rejected([&] { transpose(a, perm); }, {"transpose", ss}, "transpose " + what, counts);
    // slice ranges out of bounds or reversed
    const std::size_t ax = r.below(s.size());
    require_rejected([&] { slice(a, static_cast<long>(ax), 0, s[ax] + 1); }, {"slice", ss},
                     "slice past the end " + what, counts);
    if (s[ax] >= 1)
      require_rejected([&] { slice(a, static_cast<long>(ax), s[ax], s[ax] - 1); }, {"slice", ss},
                       "slice reversed " + what, counts);
    // concatenate parts that differ outside the axis (or in rank)
    Shape other = s;
    if (s.size() >= 2) {
      const std::size_t off = (ax + 1) % s.size();
      other[off] += 1;
    } else {
      other.push_back(2);
    }
    require_rejected([&] { concatenate<double>({a, random<double>(other, n)}, static_cast<long>(ax)); },
                     {"concatenate"}, "concatenate mismatch " + what, counts);
  }
  for (int n = 0; n < kCasesPerOp; ++n) {  // masks that do not fit the scores
    const Shape s = random_shape(r, r.between(1, 3), 4);
    const Tensor<double> x = random<double>(s, n);
    Shape ms = s;
    if (n % 2 == 0) {
      ms.back() = s.back() + r.between(1, 2);       // last axis mismatch
    } else {
      ms.insert(ms.begin(), r.between(2, 3));       // would enlarge x
    }
    const Mask mask = xt::ones<bool>(ms);
    require_rejected([&] { masked_softmax(x, mask); }, {"masked_softmax", shape_str(s), shape_str(ms)},
                     fmt::format("masked_softmax {} mask {} (case {})", shape_str(s), shape_str(ms), n), counts);
  }
  counts.report("incompatible shapes");
}

TEST_CASE("properties: zero-size axes give empty results or ShapeError never a crash", "[properties]") {
  Counts counts;
  Rand r(801);
  for (int n = 0; n < kCasesPerOp; ++n) {
    // a random shape with one axis of size 0 (a broadcast partner keeps it or has 1 there)
    Shape s = random_shape(r, r.between(1, 4), 3);
    const std::size_t zero = r.below(s.size());
    s[zero] = 0;
    const Input a = input(r, s), b = input(r, broadcast_operand(r, s));
    const std::string what = fmt::format("{} {} (case {})", shape_str(s), shape_str(b.shape), n);
    const Shape out = broadcast_of(s, b.shape);
    check_forward(add(a.tensor<double>(), b.tensor<double>()), out, {}, "add " + what);
    check_forward(exp(a.tensor<double>()), s, {}, "exp " + what);
    check_forward(sum(a.tensor<double>()), Shape{}, {0.0}, "sum " + what);
    require_rejected([&] { mean(a.tensor<double>()); }, {"mean"}, "mean " + what, counts);
    require_rejected([&] { max(a.tensor<double>(), static_cast<long>(zero)); }, {"max"}, "max " + what, counts);
    const ReducePlan p = random_reduction(r, s);
    check_forward(sum(a.tensor<double>(), p.axes, p.keepdims), p.result, reference_reduce(a, p, false),
                  "sum axes " + what);
    const long axis = random_axis(r, s.size());
    check_forward(softmax(a.tensor<double>(), axis), s, {}, "softmax " + what);
    check_forward(log_softmax(a.tensor<double>(), axis), s, {}, "log_softmax " + what);
    check_forward(reshape(a.tensor<double>(), Shape{0}), Shape{0}, {}, "reshape " + what);
    const std::vector<std::size_t> perm = random_permutation(r, s.size());
    Shape ts(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) ts[i] = s[perm[i]];
    check_forward(transpose(a.tensor<double>(), perm), ts, {}, "transpose " + what);
    check_forward(concatenate<double>({a.tensor<double>(), a.tensor<double>()}, axis), [&] {
      Shape c = s;
      c[positive_axis(axis, s.size())] *= 2;
      return c;
    }(), {}, "concatenate " + what);
    // gradients flow through (and have the input's shape) even when there is nothing in them
    Tensor<double> x = a.tensor<double>(true);
    Tensor<double> loss = sum(mul(softmax(x, axis), b.tensor<double>(true)));
    loss.backward();
    CHECK(shape_str(array_shape(x.grad())) == shape_str(s));
    CHECK(Tape<double>::active().size() == 0);
    counts.forward += 11;
  }
  for (int n = 0; n < kCasesPerOp; ++n) {  // matmul with M, K, N or a batch axis of size 0
    Shape dims = {r.between(1, 3), r.between(1, 3), r.between(1, 3), r.between(1, 3)};  // B M K N
    dims[r.below(4)] = 0;
    const Input a = input(r, {dims[0], dims[1], dims[2]});
    const Input b = input(r, r.coin() ? Shape{dims[2], dims[3]} : Shape{dims[0], dims[2], dims[3]});
    Shape out;
    const std::vector<double> want = reference_matmul(a, b, false, out);
    const std::string what = fmt::format("matmul {} (case {})", shapes_of({a.shape, b.shape}), n);
    check_forward(matmul(a.tensor<double>(), b.tensor<double>()), out, want, what);
    check_forward(matmul(a.tensor<float>(), b.tensor<float>()), out, want, what);
    sample_gradcheck([](const std::vector<Tensor<double>>& x) { return matmul(x[0], x[1]); }, {a, b}, n, what);
    counts.forward += 2;
    ++counts.gradcheck;
  }
  counts.report("zero-size axes");
}
