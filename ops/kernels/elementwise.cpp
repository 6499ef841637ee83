#include "ops/kernels/elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/kernels/parallel.hpp"
#include "platform/simd.hpp"

namespace tapegrad::kernels {

namespace {

// ---- flat loops: plain ones for arithmetic, xsimd for the transcendental functions ----

// body(begin, end) over [0, n): on one thread, or, when n is large, in blocks of whole SIMD
// vectors over the kernel threads, so that every element meets the same code either way.
template <class T, class Body>
void over_blocks(std::size_t n, const Body& body) {
  parallel_blocks_if_worth(n, xsimd::batch<T>::size, n, body);
}

// dst[i] = f(src[i]...) where f is arithmetic and comparisons: the compiler vectorises it.
template <class T, class F, class... Src>
void each(T* dst, std::size_t n, F f, const Src*... src) {
  over_blocks<T>(n, [&](std::size_t begin, std::size_t end) {
#pragma omp simd
    for (std::size_t i = begin; i < end; ++i) dst[i] = f(src[i]...);
  });
}

// The same for an f that calls exp, log, sqrt, tanh or pow: xsimd's over whole vectors from
// the first element, then std's one value at a time over the tail. That is the split
// xtensor's assignment made, so the numbers are the ones the xtensor expressions gave.
template <class T, class F, class... Src>
void vectorised(T* dst, std::size_t n, F f, const Src*... src) {
  using batch = xsimd::batch<T>;
  over_blocks<T>(n, [&](std::size_t begin, std::size_t end) {
    std::size_t i = begin;
    for (; i + batch::size <= end; i += batch::size)
      f(batch::load_unaligned(src + i)...).store_unaligned(dst + i);
    for (; i < end; ++i) dst[i] = f(src[i]...);
  });
}

// ---- binary: the broadcast as runs, each a loop the compiler vectorises --------------

struct Add {
  template <class T>
  T operator()(T a, T b) const { return a + b; }
};
struct Sub {
  template <class T>
  T operator()(T a, T b) const { return a - b; }
};
struct Mul {
  template <class T>
  T operator()(T a, T b) const { return a * b; }
};
struct Div {
  template <class T>
  T operator()(T a, T b) const { return a / b; }
};
struct Pow {
  template <class T>
  T operator()(T a, T b) const { return std::pow(a, b); }
};

// z[0..n) = op(a, b), each operand stepping through memory or held at its first value (one
// of them steps). `omp simd` because z may be a or b: the compiler would otherwise vectorise
// behind a run-time overlap test, or at -O2 not at all.
template <class T, class Op>
void loop(Op op, const T* a, bool a_steps, const T* b, bool b_steps, T* z, std::size_t n) {
  over_blocks<T>(n, [&](std::size_t begin, std::size_t end) {
    if (a_steps && b_steps) {
#pragma omp simd
      for (std::size_t i = begin; i < end; ++i) z[i] = op(a[i], b[i]);
    } else if (a_steps) {
      const T held = *b;
#pragma omp simd
      for (std::size_t i = begin; i < end; ++i) z[i] = op(a[i], held);
    } else {
      const T held = *a;
#pragma omp simd
      for (std::size_t i = begin; i < end; ++i) z[i] = op(held, b[i]);
    }
  });
}

std::size_t count(Extents s) {
  std::size_t n = 1;
  for (std::size_t k = 0; k < s.rank; ++k) n *= s.dims[k];
  return n;
}

// The operand's extent along axis k of an output of `rank` axes: its shape is aligned on
// the right, and the axes it lacks on the left count as 1.
std::size_t extent_along(Extents s, std::size_t k, std::size_t rank) {
  return k + s.rank < rank ? 1 : s.dims[k + s.rank - rank];
}

// The broadcast as nested loops, innermost first: the output's extents and each operand's
// stride in elements, 0 along an axis it is broadcast over. Axes of extent 1 are dropped and
// neighbours that both operands step through alike are merged, so that (B,T,D) + (D) is one
// loop over B*T rows around the row, and few shapes need more than kMaxLoops. Fixed arrays:
// a small op's time is mostly its overheads, and an allocation would double it.
constexpr std::size_t kMaxLoops = 8;
struct Loops {
  std::size_t depth = 0;
  std::size_t extent[kMaxLoops], a_stride[kMaxLoops], b_stride[kMaxLoops];
};

// false when the shapes alternate between broadcast and not more than kMaxLoops times
bool loops_of(Extents a, Extents b, Extents z, Loops& loops) {
  std::size_t step_a = 1, step_b = 1;
  for (std::size_t k = z.rank; k-- > 0;) {
    const std::size_t n = z.dims[k];
    if (n == 1) continue;  // and a and b have extent 1 there too
    const std::size_t ea = extent_along(a, k, z.rank), eb = extent_along(b, k, z.rank);
    const std::size_t sa = ea == 1 ? 0 : step_a, sb = eb == 1 ? 0 : step_b;
    step_a *= ea;
    step_b *= eb;
    const std::size_t d = loops.depth;
    // this axis steps, in both operands, over exactly the loop inside it: one longer loop
    if (d > 0 && sa == loops.a_stride[d - 1] * loops.extent[d - 1] &&
        sb == loops.b_stride[d - 1] * loops.extent[d - 1]) {
      loops.extent[d - 1] *= n;
      continue;
    }
    if (d == kMaxLoops) return false;
    loops.extent[d] = n;
    loops.a_stride[d] = sa;
    loops.b_stride[d] = sb;
    ++loops.depth;
  }
  return true;
}

// Calls run(iz, ia, ib, n, a_steps, b_steps) for each run of n output elements from z[iz]
// on, whose operands start at a[ia] and b[ib] and each step by 1 or stay put. An operand
// with z's element count has z's shape up to leading 1s, hence its layout: equal shapes and
// a one-number operand are one run; any other broadcast is a run per innermost loop. The
// offsets are those of the part of a larger call this is (see peel).
template <class Run>
void for_each_run(Extents a, Extents b, Extents z, const Run& run, std::size_t iz = 0,
                  std::size_t ia = 0, std::size_t ib = 0);

// Beyond kMaxLoops: one call per index of z's outermost axis, on the axes inside it.
template <class Run>
void peel(Extents a, Extents b, Extents z, const Run& run, std::size_t iz, std::size_t ia,
          std::size_t ib) {
  const auto inner = [&](Extents s) {
    return s.rank == z.rank ? Extents{s.dims + 1, s.rank - 1} : s;
  };
  const Extents ai = inner(a), bi = inner(b), zi = inner(z);
  const std::size_t step_a = a.rank == z.rank && a.dims[0] != 1 ? count(ai) : 0;
  const std::size_t step_b = b.rank == z.rank && b.dims[0] != 1 ? count(bi) : 0;
  const std::size_t step_z = count(zi);
  for (std::size_t i = 0; i < z.dims[0]; ++i)
    for_each_run(ai, bi, zi, run, iz + i * step_z, ia + i * step_a, ib + i * step_b);
}

template <class Run>
void for_each_run(Extents a, Extents b, Extents z, const Run& run, std::size_t iz,
                  std::size_t ia, std::size_t ib) {
  const std::size_t size = count(z), na = count(a), nb = count(b);
  if (size == 0) return;
  if (na == size && nb == size) return run(iz, ia, ib, size, true, true);
  if (na == size && nb == 1) return run(iz, ia, ib, size, true, false);
  if (na == 1 && nb == size) return run(iz, ia, ib, size, false, true);
  Loops loops;  // size > 1 here, so some axis has extent > 1 and depth >= 1
  if (!loops_of(a, b, z, loops)) return peel(a, b, z, run, iz, ia, ib);
  // the innermost loop has extent > 1, so one operand at least steps along it, by 1
  const std::size_t n = loops.extent[0];
  const bool a_steps = loops.a_stride[0] != 0, b_steps = loops.b_stride[0] != 0;
  std::size_t index[kMaxLoops] = {};
  for (const std::size_t end = iz + size; iz < end; iz += n) {
    run(iz, ia, ib, n, a_steps, b_steps);
    // the next run: the outer loops count like an odometer, the innermost of them fastest
    for (std::size_t k = 1; k < loops.depth; ++k) {
      ia += loops.a_stride[k];
      ib += loops.b_stride[k];
      if (++index[k] < loops.extent[k]) break;
      ia -= loops.a_stride[k] * loops.extent[k];
      ib -= loops.b_stride[k] * loops.extent[k];
      index[k] = 0;
    }
  }
}

template <class T, class Op>
void apply(Op op, const T* a, Extents a_shape, const T* b, Extents b_shape, T* z,
           Extents z_shape) {
  for_each_run(a_shape, b_shape, z_shape,
               [&](std::size_t iz, std::size_t ia, std::size_t ib, std::size_t n, bool a_steps,
                   bool b_steps) { loop(op, a + ia, a_steps, b + ib, b_steps, z + iz, n); });
}

// quotient_grad's product and quotient go over stretches this long, so that the quotient
// reads the product back from L1 (three stretches of doubles, dz, z and db: 24 KB).
constexpr std::size_t kStretch = 1024;

// ---- unary ------------------------------------------------------------------------------

// Each function once for a batch and for a scalar: xsimd's found for a batch, std's for T.
template <class V>
V exp_of(const V& x) {
  using std::exp;
  using xsimd::exp;
  return exp(x);
}
template <class V>
V log_of(const V& x) {
  using std::log;
  using xsimd::log;
  return log(x);
}
template <class V>
V sqrt_of(const V& x) {
  using std::sqrt;
  using xsimd::sqrt;
  return sqrt(x);
}
template <class V>
V tanh_of(const V& x) {
  using std::tanh;
  using xsimd::tanh;
  return tanh(x);
}

}  // namespace

template <class T>
void binary(Binary op, const T* a, Extents a_shape, const T* b, Extents b_shape, T* z,
            Extents z_shape) {
  switch (op) {
    case Binary::add: return apply(Add{}, a, a_shape, b, b_shape, z, z_shape);
    case Binary::sub: return apply(Sub{}, a, a_shape, b, b_shape, z, z_shape);
    case Binary::mul: return apply(Mul{}, a, a_shape, b, b_shape, z, z_shape);
    case Binary::div: return apply(Div{}, a, a_shape, b, b_shape, z, z_shape);
    case Binary::pow: return apply(Pow{}, a, a_shape, b, b_shape, z, z_shape);
  }
}

template <class T>
void power_grads(const T* dz, const T* z, Extents z_shape, const T* a, Extents a_shape,
                 const T* b, Extents b_shape, T* da, T* db) {
  for_each_run(a_shape, b_shape, z_shape,
               [&](std::size_t iz, std::size_t ia, std::size_t ib, std::size_t n, bool a_steps,
                   bool b_steps) {
                 for (std::size_t i = 0; i < n; ++i) {
                   const T x = a[ia + (a_steps ? i : 0)], p = b[ib + (b_steps ? i : 0)];
                   const T g = dz[iz + i];
                   if (da) da[iz + i] = p == T(0) ? T(0) : g * p * std::pow(x, p - T(1));
                   if (db)
                     db[iz + i] = x == T(0) && p >= T(0) ? T(0) : g * z[iz + i] * std::log(x);
                 }
               });
}

template <class T>
void quotient_grad(const T* dz, const T* z, Extents z_shape, const T* b, Extents b_shape,
                   T* db) {
  for_each_run(z_shape, b_shape, z_shape,
               [&](std::size_t iz, std::size_t, std::size_t ib, std::size_t n, bool,
                   bool b_steps) {
                 for (std::size_t k = 0; k < n; k += kStretch) {
                   const std::size_t m = std::min(kStretch, n - k);
                   T* t = db + iz + k;
                   each(t, m, [](T g, T y) { return (-g) * y; }, dz + iz + k, z + iz + k);
                   loop(Div{}, t, true, b + ib + (b_steps ? k : 0), b_steps, t, m);
                 }
               });
}

template <class T>
void unary(Unary op, const T* x, T* z, std::size_t n) {
  switch (op) {
    // a sign flip: xsimd 8.1's AVX-512 negation, which xtensor's -x used, is 0 - x, which
    // turns +0 into +0 and keeps a NaN's sign
    case Unary::neg: return each(z, n, [](T v) { return -v; }, x);
    case Unary::relu: return each(z, n, [](T v) { return v > T(0) ? v : T(0); }, x);
    case Unary::exp: return vectorised(z, n, [](const auto& v) { return exp_of(v); }, x);
    case Unary::log: return vectorised(z, n, [](const auto& v) { return log_of(v); }, x);
    case Unary::sqrt: return vectorised(z, n, [](const auto& v) { return sqrt_of(v); }, x);
    case Unary::tanh: return vectorised(z, n, [](const auto& v) { return tanh_of(v); }, x);
    case Unary::sigmoid:
      return vectorised(z, n, [](const auto& v) { return T(1) / (T(1) + exp_of(-v)); }, x);
    case Unary::silu:
      return vectorised(z, n, [](const auto& v) { return v / (T(1) + exp_of(-v)); }, x);
  }
}

template <class T>
void unary_backward(Unary op, const T* saved, const T* dz, T* dx, std::size_t n) {
  switch (op) {
    case Unary::neg: return each(dx, n, [](T g) { return -g; }, dz);
    case Unary::exp: return each(dx, n, [](T g, T z) { return g * z; }, dz, saved);
    case Unary::log: return each(dx, n, [](T g, T x) { return g / x; }, dz, saved);
    case Unary::sqrt: return each(dx, n, [](T g, T z) { return g / (T(2) * z); }, dz, saved);
    case Unary::tanh: return each(dx, n, [](T g, T z) { return g * (T(1) - z * z); }, dz, saved);
    case Unary::relu:
      return each(dx, n, [](T g, T x) { return x > T(0) ? g : T(0); }, dz, saved);
    case Unary::sigmoid:
      return each(dx, n, [](T g, T z) { return g * z * (T(1) - z); }, dz, saved);
    case Unary::silu:
      return vectorised(dx, n, [](const auto& g, const auto& x) {
        return g / (T(1) + exp_of(-x)) * (T(1) + x / (T(1) + exp_of(x)));
      }, dz, saved);
  }
}

template <class T>
void power(const T* x, T p, T* z, std::size_t n) {
  vectorised(z, n, [p](const auto& v) {
    using V = std::decay_t<decltype(v)>;
    using std::pow;
    using xsimd::pow;
    return pow(v, V(p));
  }, x);
}

template <class T>
void power_backward(const T* x, T p, const T* dz, T* dx, std::size_t n) {
  const T q = p - T(1);
  vectorised(dx, n, [p, q](const auto& g, const auto& v) {
    using V = std::decay_t<decltype(v)>;
    using std::pow;
    using xsimd::pow;
    return g * V(p) * pow(v, V(q));
  }, dz, x);
}

#define TAPEGRAD_INSTANTIATE(T)                                                          \
  template void binary(Binary, const T*, Extents, const T*, Extents, T*, Extents);       \
  template void quotient_grad(const T*, const T*, Extents, const T*, Extents, T*);       \
  template void power_grads(const T*, const T*, Extents, const T*, Extents, const T*,     \
                            Extents, T*, T*);                                            \
  template void unary(Unary, const T*, T*, std::size_t);                                 \
  template void unary_backward(Unary, const T*, const T*, T*, std::size_t);              \
  template void power(const T*, T, T*, std::size_t);                                     \
  template void power_backward(const T*, T, const T*, T*, std::size_t);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad::kernels
