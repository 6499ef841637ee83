#include "ops/cross_entropy.hpp"

#include <vector>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/kernels/rowwise.hpp"

namespace tapegrad {

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
  // softmax = exp(logits - lse). The exponentials (B*T*C of them, here and in the backward)
  // are the whole cost of this op: the row kernels vectorise them.
  const T* x = logits.data();
  std::vector<T> lse(N, T(0));
  double total = 0.0;  // up to B*T terms: accumulate in double even for float logits
  for (std::size_t n = 0; n < N; ++n) {
    if (kept[n] < 0) continue;
    const T* xr = x + n * C;
    lse[n] = kernels::logsumexp_row(xr, C);
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
            kernels::softmax_row_from_lse(xin + n * C, C, lse[n], scale, dr);
            dr[kept[n]] -= scale;
          }
        }
        c.accumulate(0, std::move(dx));
      });
}

template Tensor<float> cross_entropy(const Tensor<float>&, const Indices&, std::int64_t);
template Tensor<double> cross_entropy(const Tensor<double>&, const Indices&, std::int64_t);

}  // namespace tapegrad
