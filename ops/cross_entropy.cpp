#include "ops/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "platform/simd.hpp"

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"

namespace tapegrad {

namespace {
// The exponentials are the whole cost of this op (B*T*C of them, twice): xsimd's exp, as
// glibc's std::exp stays scalar (XTENSOR.md, section 5).
template <class T>
using Batch = xsimd::batch<T>;

// m + log(sum(exp(row - m))), m the row max: no exponent is positive, so nothing overflows
template <class T>
T row_logsumexp(const T* row, std::size_t C) {
  constexpr std::size_t W = Batch<T>::size;
  const T m = *std::max_element(row, row + C);
  const Batch<T> mb(m);
  Batch<T> acc(T(0));
  std::size_t j = 0;
  for (; j + W <= C; j += W) acc += xsimd::exp(Batch<T>::load_unaligned(row + j) - mb);
  T s = xsimd::hadd(acc);
  for (; j < C; ++j) s += std::exp(row[j] - m);
  return m + std::log(s);
}

// out = exp(row - lse) * scale = softmax(row) * scale
template <class T>
void row_softmax_scaled(const T* row, std::size_t C, T lse, T scale, T* out) {
  constexpr std::size_t W = Batch<T>::size;
  const Batch<T> lb(lse), sb(scale);
  std::size_t j = 0;
  for (; j + W <= C; j += W)
    (xsimd::exp(Batch<T>::load_unaligned(row + j) - lb) * sb).store_unaligned(out + j);
  for (; j < C; ++j) out[j] = std::exp(row[j] - lse) * scale;
}
}  // namespace

// logits (..., C), targets (...) -> loss ():
//   loss = (1/count) * sum over kept rows n of (logsumexp(logits[n, :]) - logits[n, t_n]),
//   kept = target != ignore_index, count = number of kept rows
template <class T>
Tensor<T> cross_entropy(const Tensor<T>& logits, const Indices& targets,
                        std::int64_t ignore_index) {
  const Shape ls = logits.shape();
  const Shape ts(targets.shape().begin(), targets.shape().end());
  if (ls.empty())
    fail("cross_entropy", "logits must have rank >= 1 (..., C), got () (targets are {})",
         shape_str(ts));
  const Shape expected(ls.begin(), ls.end() - 1);
  if (ts != expected)
    fail("cross_entropy",
         "targets of shape {} do not match logits {}: expected targets of shape {}",
         shape_str(ts), shape_str(ls), shape_str(expected));
  const std::size_t C = ls.back();
  const std::size_t N = targets.size();
  // Validate every target before computing anything, so a bad one never yields a number.
  // kept[n] = target class, or -1 for an ignored row.
  std::vector<std::int64_t> kept(N);
  std::size_t count = 0;
  for (std::size_t n = 0; n < N; ++n) {
    const std::int64_t t = targets.data()[n];
    if (t == ignore_index) {
      kept[n] = -1;
      continue;
    }
    if (t < 0 || static_cast<std::uint64_t>(t) >= C)
      fail("cross_entropy",
           "target {} at flat position {} is out of range [0, C={}) and is not ignore_index={} "
           "(logits {}, targets {})",
           t, n, C, ignore_index, shape_str(ls), shape_str(ts));
    kept[n] = t;
    ++count;
  }
  // Per kept row, the log-sum-exp is all the backward needs besides the logits:
  // softmax = exp(logits - lse).
  const T* x = logits.data();
  std::vector<T> lse(N, T(0));
  double total = 0.0;  // up to B*T terms: accumulate in double even for float logits
  for (std::size_t n = 0; n < N; ++n) {
    if (kept[n] < 0) continue;
    const T* xr = x + n * C;
    lse[n] = row_logsumexp(xr, C);
    total += static_cast<double>(lse[n]) - static_cast<double>(xr[kept[n]]);
  }
  Array<T> loss = Array<T>::from_shape(Shape{});
  loss() = count == 0 ? T(0) : static_cast<T>(total / static_cast<double>(count));
  // backward of loss = mean over kept rows of (lse_n - logits[n, t_n]):
  //   dlogits[n, :] = dloss * (softmax(logits[n, :]) - onehot(t_n)) / count for kept rows,
  //   0 for ignored rows (and everywhere when count == 0: no division by zero)
  return record<T>(
      "cross_entropy", {logits}, std::move(loss),
      [kept = std::move(kept), lse = std::move(lse), count, C](BackwardContext<T>& c) {
        Array<T> dx = Array<T>::from_shape(c.input(0).shape());
        dx.fill(T(0));
        if (count > 0) {
          const T scale = c.grad().data()[0] / static_cast<T>(count);
          const T* xin = c.input(0).data();
          T* d = dx.data();
          for (std::size_t n = 0; n < kept.size(); ++n) {
            if (kept[n] < 0) continue;
            T* dr = d + n * C;
            row_softmax_scaled(xin + n * C, C, lse[n], scale, dr);
            dr[kept[n]] -= scale;
          }
        }
        c.accumulate(0, std::move(dx));
      });
}

template Tensor<float> cross_entropy(const Tensor<float>&, const Indices&, std::int64_t);
template Tensor<double> cross_entropy(const Tensor<double>&, const Indices&, std::int64_t);

}  // namespace tapegrad
