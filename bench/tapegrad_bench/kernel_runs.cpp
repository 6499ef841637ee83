// The kernel workloads: a chain of 1,000 small ops, the batched matrix products of
// attention, and the gemm ceiling (float and double, and the sgemm peak a step is read against).
#include "shared.hpp"

#include <cmath>

#include "ops/kernels/gemm.hpp"

namespace tapegrad_bench {

Result run_chain(const Args& a) {
  const auto [xv, bv] = bench::make_chain_inputs();
  Tensor<float> x = tensor_of<float>(xv, {bench::kChainLen}, true);
  Tensor<float> b = tensor_of<float>(bv, {bench::kChainLen}, true);
  float loss = 0;
  auto step = [&] {
    x.zero_grad();
    b.zero_grad();
    Tensor<float> y = x;
    for (std::size_t i = 0; i < bench::kChainOps; ++i)
      y = i % 3 == 0 ? y * 0.9f : i % 3 == 1 ? y + b : tapegrad::tanh(y);
    Tensor<float> L = sum(y);
    L.backward();
    loss = L.item();
  };
  step();
  const bench::ChainReference ref = bench::naive_chain(xv, bv);
  Result r;
  const double e_loss = std::abs(loss - ref.loss) / std::abs(ref.loss);
  const double e_dx = bench::max_rel_error(values(x.grad()), ref.dx);
  const double e_db = bench::max_rel_error(values(b.grad()), ref.db);
  r.add("check_loss_rel_err", e_loss);
  r.add("check_grad_rel_err", std::max(e_dx, e_db));
  bench::require(e_loss < 1e-4 && e_dx < 1e-3 && e_db < 1e-3,
                 "chain loss/gradients differ from the naive loop");
  r.time_steps(a.warmup, a.repeats, step);
  return r;
}

// ------------------------------------------------------------ batched matmul in attention

// q, k (B, H, T, dh): scores = q @ k^T, B*H gemms of (T, dh) @ (dh, T). Timed three ways
// in the same loop: the differentiable op (matmul_nt, allocating its result), the raw
// batched kernel into a reused buffer, and one square sgemm of the same FLOPs.
Result run_bmm(const Args& a, const MhaShape& s) {
  const std::size_t BH = s.B * s.H, T = s.T, dh = s.D / s.H;
  bench::Rng rng(3);
  Tensor<float> q = tensor_of<float>(rng.normals(BH * T * dh, 1.0), {s.B, s.H, T, dh}, false);
  Tensor<float> k = tensor_of<float>(rng.normals(BH * T * dh, 1.0), {s.B, s.H, T, dh}, false);
  const std::size_t n = bench::same_flops_gemm_n(s);
  std::vector<float> A(n * n), Bm(n * n), C(n * n);
  // the kernel's output aligned as a tensor's storage is (and as libtorch's is): its
  // streaming stores need whole aligned vectors
  std::vector<float, TensorAllocator<float>> S(BH * T * T);
  for (auto& v : A) v = float(rng.normal());
  for (auto& v : Bm) v = float(rng.normal());
  kernels::GemmBatch batch;
  batch.M = T, batch.N = T, batch.K = dh, batch.trans_b = true;
  for (std::size_t i = 0; i < BH; ++i) {
    batch.a_offset.push_back(i * T * dh);
    batch.b_offset.push_back(i * T * dh);
    batch.c_offset.push_back(i * T * T);
  }

  // Check the op against a naive dot product at a few entries.
  Result r;
  {
    NoGradGuard no_grad;
    const Tensor<float> sc = matmul_nt(q, k);
    double err = 0;
    for (std::size_t e : {std::size_t(0), BH * T * T / 2 + 7, BH * T * T - 1}) {
      const std::size_t bh = e / (T * T), i = (e / T) % T, j = e % T;
      double want = 0;
      for (std::size_t d = 0; d < dh; ++d)
        want += double(q.data()[(bh * T + i) * dh + d]) * double(k.data()[(bh * T + j) * dh + d]);
      err = std::max(err, std::abs(sc.data()[e] - want) / (1 + std::abs(want)));
    }
    r.add("check_rel_err", err);
    bench::require(err < 1e-4, "matmul_nt differs from a naive dot product");
  }

  // The op (allocating its result), the batched kernel into a reused buffer and one square
  // sgemm of the same FLOPs, each timed alone.
  const auto wall = r.time_parts(
      a.warmup, a.repeats,
      {[&] {
         NoGradGuard no_grad;
         const Tensor<float> sc = matmul_nt(q, k);
         g_sink = g_sink + double(sc.data()[0]);
       },
       [&] {
         kernels::gemm_batch<float>(batch, 1.0f, q.data(), k.data(), 0.0f, S.data());
         g_sink = g_sink + double(S[0]);
       },
       [&] {
         kernels::gemm<float>(false, false, n, n, n, 1.0f, A.data(), Bm.data(), 0.0f, C.data());
         g_sink = g_sink + double(C[0]);
       }});
  const std::vector<double>& kernel_ms = wall[1];
  const std::vector<double>& sgemm_ms = wall[2];
  const double flops = bench::bmm_flops(s);
  const double op = flops / (bench::median(r.samples_ms) * 1e6);
  const double kern = flops / (bench::median(kernel_ms) * 1e6);
  const double big = 2.0 * double(n) * double(n) * double(n) / (bench::median(sgemm_ms) * 1e6);
  r.add("gflops", op);
  r.add("kernel_ms", bench::median(kernel_ms));
  r.add("kernel_gflops", kern);
  r.add("sgemm_n", double(n));
  r.add("sgemm_ms", bench::median(sgemm_ms));
  r.add("sgemm_gflops", big);
  r.add("fraction", op / big);
  r.add("kernel_fraction", kern / big);
  return r;
}

// ------------------------------------------------------------ the gemm ceiling

template <class R>
Result run_gemm_peak(const Args& a) {
  const std::size_t n = bench::kGemmPeakN;
  bench::Rng rng(5);
  std::vector<R> A(n * n), B(n * n), C(n * n);
  for (auto& v : A) v = R(rng.normal());
  for (auto& v : B) v = R(rng.normal());
  Result r;
  kernels::gemm<R>(false, false, n, n, n, R(1), A.data(), B.data(), R(0), C.data());
  double want = 0;
  for (std::size_t k = 0; k < n; ++k) want += double(A[7 * n + k]) * double(B[k * n + 3]);
  const double err = std::abs(C[7 * n + 3] - want) / (1 + std::abs(want));
  r.add("check_rel_err", err);
  bench::require(err < 1e-3, "gemm differs from a naive dot product");
  r.time_steps(a.warmup, a.repeats, [&] {
    kernels::gemm<R>(false, false, n, n, n, R(1), A.data(), B.data(), R(0), C.data());
    g_sink = g_sink + double(C[0]);
  });
  r.add("gflops", 2.0 * double(n * n) * double(n) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

double sgemm_peak_gflops(int repeats) {
  MatmulPrecisionGuard f32(MatmulPrecision::f32);  // a _bf16 step's ceiling is sgemm's too
  const std::size_t n = bench::kGemmPeakN;
  bench::Rng rng(5);
  std::vector<float> A(n * n), B(n * n), C(n * n);
  for (auto& v : A) v = float(rng.normal());
  for (auto& v : B) v = float(rng.normal());
  std::vector<double> ms;
  for (int i = 0; i <= repeats; ++i) {  // the first one warms up
    const double t0 = bench::now_ms();
    kernels::gemm<float>(false, false, n, n, n, 1.0f, A.data(), B.data(), 0.0f, C.data());
    if (i > 0) ms.push_back(bench::now_ms() - t0);
  }
  g_sink = g_sink + double(C[0]);
  return 2.0 * double(n * n) * double(n) / (bench::median(ms) * 1e6);
}

template Result run_gemm_peak<float>(const Args&);
template Result run_gemm_peak<double>(const Args&);

}  // namespace tapegrad_bench
