#include "ops/matmul.hpp"

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/elementwise.hpp"
#include "ops/kernels/gemm.hpp"
#include "ops/shape_ops.hpp"

namespace tapegrad {

namespace {

// How the batch axes of a product line up: the broadcast batch shape and, for every
// output matrix, which matrix of a and of b it multiplies.
struct MatmulPlan {
  Shape out_shape;
  std::size_t M = 0, N = 0, K = 0;
  std::size_t count = 0;  // output matrices
  // b a single matrix: a's batch folds into its rows and the product is one gemm (the
  // Linear layer case), which needs no index vectors
  bool fold = false;
  std::vector<std::size_t> a_index, b_index, c_index;  // per output matrix, unless fold
};

std::vector<std::size_t> broadcast_matrix_index(const Shape& batch, const Shape& operand_batch) {
  const std::size_t count = numel(batch);
  std::vector<std::size_t> index(count, 0);
  const std::size_t lead = batch.size() - operand_batch.size();
  // stride (in matrices) of each output batch axis within the operand; 0 if broadcast
  std::vector<std::size_t> stride(batch.size(), 0);
  std::size_t s = 1;
  for (std::size_t i = batch.size(); i-- > lead;) {
    const std::size_t d = operand_batch[i - lead];
    stride[i] = d == 1 ? 0 : s;
    s *= d;
  }
  std::vector<std::size_t> pos(batch.size(), 0);
  for (std::size_t n = 0; n < count; ++n) {
    std::size_t off = 0;
    for (std::size_t i = 0; i < batch.size(); ++i) off += pos[i] * stride[i];
    index[n] = off;
    for (std::size_t i = batch.size(); i-- > 0;) {  // odometer increment
      if (++pos[i] < batch[i]) break;
      pos[i] = 0;
    }
  }
  return index;
}

std::vector<std::size_t> iota(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// a (..., M, K) @ b (..., K, N) when !b_transposed; b (..., N, K) when b_transposed.
MatmulPlan plan_matmul(const char* op, const Shape& a, const Shape& b, bool b_transposed) {
  if (a.size() < 2 || b.size() < 2)
    fail(op, "needs operands of rank >= 2, got {} and {}", shape_str(a), shape_str(b));
  MatmulPlan p;
  p.M = a[a.size() - 2];
  p.K = a[a.size() - 1];
  const std::size_t bK = b_transposed ? b[b.size() - 1] : b[b.size() - 2];
  p.N = b_transposed ? b[b.size() - 2] : b[b.size() - 1];
  if (p.K != bK)
    fail(op, "inner dimensions differ: {} @ {}{} ({} vs {})", shape_str(a), shape_str(b),
         b_transposed ? "^T" : "", p.K, bK);
  p.fold = b.size() == 2;
  Shape batch;
  if (p.fold) {  // b is one matrix: the batch is a's, and nothing needs broadcasting
    batch.reserve(a.size());  // with room for M and N below
    batch.assign(a.begin(), a.end() - 2);
  } else {
    const Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
    try {
      batch = broadcast_shapes(op, a_batch, b_batch);
    } catch (const ShapeError&) {
      fail(op, "batch dimensions do not broadcast: {} @ {}{}", shape_str(a), shape_str(b),
           b_transposed ? "^T" : "");
    }
    p.a_index = broadcast_matrix_index(batch, a_batch);
    p.b_index = broadcast_matrix_index(batch, b_batch);
  }
  p.count = numel(batch);
  if (!p.fold) p.c_index = iota(p.count);
  p.out_shape = std::move(batch);
  p.out_shape.push_back(p.M);
  p.out_shape.push_back(p.N);
  return p;
}

kernels::GemmBatch batch_of(std::size_t M, std::size_t N, std::size_t K, bool ta, bool tb,
                            const std::vector<std::size_t>& a_idx, std::size_t a_size,
                            const std::vector<std::size_t>& b_idx, std::size_t b_size,
                            const std::vector<std::size_t>& c_idx, std::size_t c_size) {
  kernels::GemmBatch g;
  g.M = M, g.N = N, g.K = K, g.trans_a = ta, g.trans_b = tb;
  for (std::size_t i = 0; i < c_idx.size(); ++i) {
    g.a_offset.push_back(a_idx[i] * a_size);
    g.b_offset.push_back(b_idx[i] * b_size);
    g.c_offset.push_back(c_idx[i] * c_size);
  }
  return g;
}

template <class T>
Array<T> zeros_like_shape(const Shape& shape) {
  Array<T> z = Array<T>::from_shape(shape);
  z.fill(T(0));
  return z;
}

// c = a @ op(b), with op(b) = b or b^T, into a new array of the plan's shape.
template <class T>
Array<T> product(const MatmulPlan& p, const T* a, const T* b, bool bt) {
  const std::size_t MK = p.M * p.K, KN = p.K * p.N, MN = p.M * p.N;
  Array<T> c = Array<T>::from_shape(p.out_shape);
  if (p.fold) {
    kernels::gemm<T>(false, bt, p.count * p.M, p.N, p.K, T(1), a, b, T(0), c.data());
  } else {
    kernels::gemm_batch<T>(batch_of(p.M, p.N, p.K, false, bt, p.a_index, MK, p.b_index, KN,
                                    p.c_index, MN),
                           T(1), a, b, T(0), c.data());
  }
  return c;
}

// The product's part of a backward: da and db from dc (inputs 0 and 1 of the node).
template <class T>
void product_backward(BackwardContext<T>& ctx, const MatmulPlan& p, const Shape& as,
                      const Shape& bs, bool bt) {
  const T* A = ctx.input(0).data();
  const T* B = ctx.input(1).data();
  const T* dC = ctx.grad().data();
  const std::size_t count = p.count;
  const bool fold = p.fold;
  const std::size_t MK = p.M * p.K, KN = p.K * p.N, MN = p.M * p.N;
  if (ctx.wants(0)) {
    // c = a @ b   -> da = dc @ b^T ;  c = a @ b^T -> da = dc @ b
    // the folded gemm overwrites dA (beta 0); a batch accumulates (beta 1) because a
    // broadcast operand receives several products
    Array<T> dA = fold ? Array<T>::from_shape(as) : zeros_like_shape<T>(as);
    if (fold) {
      kernels::gemm<T>(false, !bt, count * p.M, p.K, p.N, T(1), dC, B, T(0), dA.data());
    } else {
      kernels::gemm_batch<T>(batch_of(p.M, p.K, p.N, false, !bt, p.c_index, MN, p.b_index, KN,
                                      p.a_index, MK),
                             T(1), dC, B, T(1), dA.data());
    }
    ctx.accumulate(0, std::move(dA));
  }
  if (ctx.wants(1)) {
    // c = a @ b   -> db = a^T @ dc ;  c = a @ b^T -> db = dc^T @ a
    Array<T> dB = fold ? Array<T>::from_shape(bs) : zeros_like_shape<T>(bs);
    if (fold) {
      if (!bt)
        kernels::gemm<T>(true, false, p.K, p.N, count * p.M, T(1), A, dC, T(0), dB.data());
      else
        kernels::gemm<T>(true, false, p.N, p.K, count * p.M, T(1), dC, A, T(0), dB.data());
    } else if (!bt) {
      kernels::gemm_batch<T>(batch_of(p.K, p.N, p.M, true, false, p.a_index, MK, p.c_index, MN,
                                      p.b_index, KN),
                             T(1), A, dC, T(1), dB.data());
    } else {
      kernels::gemm_batch<T>(batch_of(p.N, p.K, p.M, true, false, p.c_index, MN, p.a_index, MK,
                                      p.b_index, KN),
                             T(1), dC, A, T(1), dB.data());
    }
    ctx.accumulate(1, std::move(dB));
  }
}

// The plain and the transposed form share one forward and one backward; only the flags
// differ.
template <class T>
Tensor<T> matmul_impl(const char* op, const Tensor<T>& a, const Tensor<T>& b, bool bt) {
  Shape as = a.shape(), bs = b.shape();  // moved into the backward below
  MatmulPlan p = plan_matmul(op, as, bs, bt);
  Array<T> c = product(p, a.data(), b.data(), bt);
  return record<T>(op, {a, b}, std::move(c),
                   [p = std::move(p), as = std::move(as), bs = std::move(bs),
                    bt](BackwardContext<T>& ctx) { product_backward(ctx, p, as, bs, bt); });
}

}  // namespace

// c = a @ b: a (..., M, K), b (..., K, N) -> (..., M, N)
// backward: da = dc @ b^T, db = a^T @ dc (each summed over the batch axes it broadcast on)
template <class T>
Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b) {
  if (a.dim() == 0 || b.dim() == 0)
    fail("matmul", "needs operands of rank >= 1, got {} and {}", a.shape_string(),
         b.shape_string());
  // NumPy: a 1-D operand becomes (1, K) or (K, 1), and that axis is removed afterwards.
  if (a.dim() == 1 || b.dim() == 1) {
    const bool va = a.dim() == 1, vb = b.dim() == 1;
    // checked here so the message shows the user's shapes, not the promoted ones
    const std::size_t bK = vb ? b.shape()[0] : b.shape()[b.dim() - 2];
    if (a.shape().back() != bK)
      fail("matmul", "inner dimensions differ: {} @ {} ({} vs {})", a.shape_string(),
           b.shape_string(), a.shape().back(), bK);
    const Tensor<T> a2 = va ? reshape(a, Shape{1, a.size()}) : a;
    const Tensor<T> b2 = vb ? reshape(b, Shape{b.size(), 1}) : b;
    Tensor<T> c = matmul_impl<T>("matmul", a2, b2, false);
    Shape s = c.shape();
    if (vb) s.erase(s.end() - 1);
    if (va) s.erase(s.end() - 1 - (vb ? 0 : 1));
    return reshape(c, s);
  }
  return matmul_impl<T>("matmul", a, b, false);
}

// c = a @ b^T: a (..., M, K), b (..., N, K) -> (..., M, N)
// backward: da = dc @ b, db = dc^T @ a
template <class T>
Tensor<T> matmul_nt(const Tensor<T>& a, const Tensor<T>& b) {
  return matmul_impl<T>("matmul_nt", a, b, true);
}

// y = x @ weight + bias: x (..., K) of rank >= 2 @ weight (K, N) -> (..., N), + bias (N)
// in place: each number fl(fl(x @ weight) + bias), as matmul then add. No bias (an
// undefined tensor): matmul.
// backward: dx = dy @ weight^T, dweight = x^T @ dy (matmul's), dbias = dy summed over every
// axis but the last (sum_to's order, as add's backward): the same numbers as the two ops.
template <class T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias) {
  if (!bias.defined()) return matmul(x, weight);
  if (x.dim() < 2 || weight.dim() != 2) return matmul(x, weight) + bias;
  Shape xs = x.shape(), ws = weight.shape();
  MatmulPlan p = plan_matmul("linear", xs, ws, false);
  if (bias.shape() != Shape{p.N})
    fail("linear", "bias of shape {} does not fit x {} @ weight {}: expected ({})",
         bias.shape_string(), shape_str(xs), shape_str(ws), p.N);
  Array<T> y = product(p, x.data(), weight.data(), false);
  const T* b = bias.data();
  T* out = y.data();
  for (std::size_t row = 0, rows = p.count * p.M; row < rows; ++row, out += p.N) {
#pragma omp simd
    for (std::size_t j = 0; j < p.N; ++j) out[j] += b[j];
  }
  return record<T>("linear", {x, weight, bias}, std::move(y),
                   [p = std::move(p), xs = std::move(xs), ws = std::move(ws)](BackwardContext<T>& ctx) {
    if (ctx.wants(2)) ctx.accumulate(2, summed_to<T>(ctx.grad(), Shape{p.N}));
    product_backward(ctx, p, xs, ws, false);
  });
}

template Tensor<float> matmul(const Tensor<float>&, const Tensor<float>&);
template Tensor<double> matmul(const Tensor<double>&, const Tensor<double>&);
template Tensor<float> matmul_nt(const Tensor<float>&, const Tensor<float>&);
template Tensor<double> matmul_nt(const Tensor<double>&, const Tensor<double>&);
template Tensor<float> linear(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&);
template Tensor<double> linear(const Tensor<double>&, const Tensor<double>&, const Tensor<double>&);

}  // namespace tapegrad
