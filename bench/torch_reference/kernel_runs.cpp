// The kernel workloads in libtorch: a chain of 1,000 small ops, the batched matrix
// products of attention, and the gemm ceiling.
#include "shared.hpp"

#include <cmath>

namespace torch_reference {

Result run_chain(const Args& a) {
  const auto [xv, bv] = bench::make_chain_inputs();
  torch::Tensor x = tensor_of<float>(xv, {int64_t(bench::kChainLen)}, true);
  torch::Tensor b = tensor_of<float>(bv, {int64_t(bench::kChainLen)}, true);
  float loss = 0;
  auto step = [&] {
    x.mutable_grad() = torch::Tensor();
    b.mutable_grad() = torch::Tensor();
    torch::Tensor y = x;
    for (std::size_t i = 0; i < bench::kChainOps; ++i)
      y = i % 3 == 0 ? y * 0.9f : i % 3 == 1 ? y + b : torch::tanh(y);
    torch::Tensor L = y.sum();
    L.backward();
    loss = L.item<float>();
  };
  step();
  const bench::ChainReference ref = bench::naive_chain(xv, bv);
  Result r;
  const double e_loss = std::abs(loss - ref.loss) / std::abs(ref.loss);
  const double e_dx = bench::max_rel_error(values<float>(x.grad()), ref.dx);
  const double e_db = bench::max_rel_error(values<float>(b.grad()), ref.db);
  r.add("check_loss_rel_err", e_loss);
  r.add("check_grad_rel_err", std::max(e_dx, e_db));
  bench::require(e_loss < 1e-4 && e_dx < 1e-3 && e_db < 1e-3,
                 "chain loss/gradients differ from the naive loop");
  r.time_steps(a.warmup, a.repeats, step);
  return r;
}

// ------------------------------------------------------------ batched matmul in attention

// The same three timings as tapegrad_bench: torch::matmul(q, k^T) allocating its result,
// bmm_out into a reused buffer, and one square mm_out of the same FLOPs.
Result run_bmm(const Args& a, const MhaShape& s) {
  const int64_t B = int64_t(s.B), H = int64_t(s.H), T = int64_t(s.T), dh = int64_t(s.D / s.H);
  bench::Rng rng(3);
  const torch::Tensor q = tensor_of<float>(rng.normals(s.B * s.H * s.T * (s.D / s.H), 1.0), {B, H, T, dh}, false);
  const torch::Tensor k = tensor_of<float>(rng.normals(s.B * s.H * s.T * (s.D / s.H), 1.0), {B, H, T, dh}, false);
  const int64_t n = int64_t(bench::same_flops_gemm_n(s));
  std::vector<double> av(std::size_t(n * n)), bv(std::size_t(n * n));
  for (auto& v : av) v = double(float(rng.normal()));
  for (auto& v : bv) v = double(float(rng.normal()));
  const torch::Tensor A = tensor_of<float>(av, {n, n}, false), Bm = tensor_of<float>(bv, {n, n}, false);
  torch::Tensor C = torch::empty({n, n}, torch::kFloat32);
  torch::Tensor S = torch::empty({B * H, T, T}, torch::kFloat32);
  const torch::Tensor q3 = q.reshape({B * H, T, dh}), k3t = k.reshape({B * H, T, dh}).transpose(1, 2);

  torch::NoGradGuard no_grad;
  Result r;
  {
    const torch::Tensor sc = torch::matmul(q, k.transpose(-2, -1)).contiguous();
    const float* qp = q.data_ptr<float>();
    const float* kp = k.data_ptr<float>();
    const int64_t total = B * H * T * T;
    double err = 0;
    for (int64_t e : {int64_t(0), total / 2 + 7, total - 1}) {
      const int64_t bh = e / (T * T), i = (e / T) % T, j = e % T;
      double want = 0;
      for (int64_t d = 0; d < dh; ++d) want += double(qp[(bh * T + i) * dh + d]) * double(kp[(bh * T + j) * dh + d]);
      err = std::max(err, std::abs(sc.data_ptr<float>()[e] - want) / (1 + std::abs(want)));
    }
    r.add("check_rel_err", err);
    bench::require(err < 1e-4, "torch::matmul differs from a naive dot product");
  }

  // The op (allocating its result), bmm into a reused buffer and one square sgemm of the
  // same FLOPs, each timed alone.
  const auto wall = r.time_parts(
      a.warmup, a.repeats,
      {[&] {
         const torch::Tensor sc = torch::matmul(q, k.transpose(-2, -1));
         g_sink = g_sink + sc.data_ptr<float>()[0];
       },
       [&] {
         torch::bmm_out(S, q3, k3t);
         g_sink = g_sink + S.data_ptr<float>()[0];
       },
       [&] {
         torch::mm_out(C, A, Bm);
         g_sink = g_sink + C.data_ptr<float>()[0];
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
  const int64_t n = int64_t(bench::kGemmPeakN);
  bench::Rng rng(5);
  const torch::Tensor A = tensor_of<R>(rng.normals(std::size_t(n * n), 1.0), {n, n}, false);
  const torch::Tensor B = tensor_of<R>(rng.normals(std::size_t(n * n), 1.0), {n, n}, false);
  torch::Tensor C = torch::empty({n, n}, dtype_of<R>());
  torch::NoGradGuard no_grad;
  torch::mm_out(C, A, B);
  double want = 0;
  for (int64_t k = 0; k < n; ++k) want += double(A.data_ptr<R>()[7 * n + k]) * double(B.data_ptr<R>()[k * n + 3]);
  const double err = std::abs(C.data_ptr<R>()[7 * n + 3] - want) / (1 + std::abs(want));
  Result r;
  r.add("check_rel_err", err);
  bench::require(err < 1e-3, "torch::mm differs from a naive dot product");
  r.time_steps(a.warmup, a.repeats, [&] {
    torch::mm_out(C, A, B);
    g_sink = g_sink + double(C.data_ptr<R>()[0]);
  });
  r.add("gflops", 2.0 * double(n * n) * double(n) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

// Debian's libtorch calls BLAS through libblas.so.3, which is OpenBLAS here; torch does not

template Result run_gemm_peak<float>(const Args&);
template Result run_gemm_peak<double>(const Args&);

}  // namespace torch_reference
