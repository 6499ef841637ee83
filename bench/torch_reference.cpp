// libtorch side of the tapegrad/libtorch benchmark: the same workloads, shapes, dtypes, inputs and
// command line as tapegrad_bench.cpp (see harness.hpp), written as a PyTorch user writes
// them in C++. One workload per process, one JSON line out.
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/torch.h>

#include <cstdlib>

#include "torch_reference/shared.hpp"

namespace {

using namespace torch_reference;

// Debian's libtorch calls BLAS through libblas.so.3, which is OpenBLAS here; torch does not
// know it is OpenBLAS, so its thread count is looked up rather than assumed.
int blas_threads() {
  using Fn = int (*)();
  auto f = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return f ? f() : -1;
}

// torch::set_num_threads does not reach OpenBLAS in Debian's build (BLAS_INFO=generic):
// left alone, OpenBLAS would run every gemm on all cores even at --threads 1. The same
// thread count for both frameworks means telling OpenBLAS too.
void set_blas_threads(int n) {
  using Fn = void (*)(int);
  auto f = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (f) f(n);
}

void print_info() {
  nlohmann::ordered_json info;
  info["framework"] = "libtorch";
  info["version"] = TORCH_VERSION;
  info["intra_op_threads"] = at::get_num_threads();
  info["openblas_threads"] = blas_threads();
  info["config"] = at::show_config() + at::get_parallel_info();
  std::printf("%s\n", info.dump().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const long start_rss = bench::peak_rss_kb();
  const Args a = bench::parse_args(argc, argv);
  if (a.list) {
    for (const auto& w : bench::workload_names()) std::printf("%s\n", w.c_str());
    return 0;
  }
  // Intra-op threads as asked; no inter-op pool (one stream of ops, as in training).
  at::set_num_interop_threads(1);
  torch::set_num_threads(a.threads);
  set_blas_threads(a.threads);
  if (a.info) {
    print_info();
    return 0;
  }
  Result r;
  bench::MhaWorkload mha_w;
  if (bench::parse_mha(a.workload, mha_w)) {
    r = mha_w.is_double ? run_mha<double>(a, mha_w) : run_mha<float>(a, mha_w);
  } else if (bench::parse_gqa(a.workload, mha_w)) {
    r = run_gqa(a, mha_w);
  } else if (a.workload == "toygpt_step") {
    r = run_toygpt(a);
  } else if (a.workload == "llama_step") {
    r = run_llama(a);
  } else if (const std::size_t ctx = bench::parse_decode(a.workload)) {
    r = run_decode(a, ctx);
  } else if (const bench::FlashShape fs = bench::parse_flash(a.workload); fs.T != 0) {
    r = run_flash(a, fs);
  } else if (a.workload == "chain1000") {
    r = run_chain(a);
  } else if (a.workload.rfind("bmm_", 0) == 0) {
    r = run_bmm(a, bench::mha_shape(a.workload.substr(4)));
  } else if (a.workload == "gemm_peak_f32") {
    r = run_gemm_peak<float>(a);
  } else if (a.workload == "gemm_peak_f64") {
    r = run_gemm_peak<double>(a);
  } else {
    std::fprintf(stderr, "torch_reference: unknown workload %s (--list names them)\n", a.workload.c_str());
    return 4;
  }
  r.add("blas_threads", blas_threads());
  bench::print_json("libtorch", a, r, start_rss);
  return 0;
}
