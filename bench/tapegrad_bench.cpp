// tapegrad side of the tapegrad/libtorch benchmark: one workload per process, one JSON line out.
// The same command line and the same inputs as torch_reference.cpp (see harness.hpp).
#include <array>
#include <optional>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ops/kernels/parallel.hpp"  // kernels::set_num_threads
#include "tapegrad_bench/shared.hpp"

extern "C" {
char* openblas_get_config();
char* openblas_get_corename();
int openblas_get_num_threads();
}

namespace {

using namespace tapegrad_bench;

// "toygpt_step_bf16" -> "toygpt_step" (likewise every bench::kBf16Workloads); "" otherwise.
std::string bf16_base(const std::string& workload) {
  for (const char* base : bench::kBf16Workloads)
    if (workload == std::string(base) + "_bf16") return base;
  return "";
}

void print_info() {
  auto env = [](const char* k) {
    const char* v = std::getenv(k);
    return std::string(v ? v : "(unset)");
  };
  nlohmann::ordered_json info;
  info["framework"] = "tapegrad";
  info["openblas_config"] = openblas_get_config();
  info["openblas_corename"] = openblas_get_corename();
  info["openblas_threads"] = openblas_get_num_threads();
  info["OPENBLAS_CORETYPE"] = env("OPENBLAS_CORETYPE");
  info["OPENBLAS_L2_SIZE"] = env("OPENBLAS_L2_SIZE");
  info["compiler"] = std::string("g++ ") + __VERSION__;
  std::printf("%s\n", info.dump().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const long start_rss = bench::peak_rss_kb();
  Args a = bench::parse_args(argc, argv);
  const std::string workload_name = a.workload;  // as asked: a _bf16 step runs its base step
  if (a.list) {
    for (const auto& w : bench::workload_names()) std::printf("%s\n", w.c_str());
    return 0;
  }
  kernels::set_num_threads(a.threads);
  // W_bf16: workload W (a training step, flash fwd+bwd, a decode step) with its float32
  // matrix products in bf16 (ops/precision.hpp), from W's reference. Its start-up check is W's in float32 (bf16's rounding is far outside
  // the check's 1e-4), so a bf16 run skips it.
  // W_alibi, W_softcap: W with the modifier on every attention; no reference has it, so
  // such a run skips the start-up check too.
  take_modifier(a.workload);
  if (a.workload == "decode_ctx1024_kvbf16") {
    a.workload = "decode_ctx1024";
    g_kv_dtype = KVDtype::bf16;
  }
  if (a.workload == bench::kGpt2CheckpointedStep) {
    a.workload = bench::gpt2_name(4, 1024);
    g_checkpoint_blocks = true;
  }
  if (g_modifier != Modifier::none) a.skip_check = true;
  std::optional<MatmulPrecisionGuard> bf16;
  if (const std::string step = bf16_base(a.workload); !step.empty()) {
    a.workload = step;
    a.skip_check = true;
    bf16.emplace(MatmulPrecision::bf16);
  }
  if (a.info) {
    print_info();
    return 0;
  }
  if (!a.dump.empty()) {
    if (dump_reference(a)) return 0;
    std::fprintf(stderr, "tapegrad_bench: --dump: no reference for workload %s\n", a.workload.c_str());
    return 2;
  }
  Result r;
  bench::MhaWorkload mha;
  if (bench::parse_mha(a.workload, mha)) {
    r = mha.is_double ? run_mha<double>(a, mha) : run_mha<float>(a, mha);
  } else if (bench::parse_gqa(a.workload, mha)) {
    r = run_gqa(a, mha);
  } else if (a.workload == "toygpt_step") {
    r = run_toygpt(a, bench::ToyGptShape{});
  } else if (const bench::ToyGptShape g = bench::parse_gpt2(a.workload); g.batch != 0) {
    r = run_toygpt(a, g);
  } else if (a.workload == "llama_step") {
    r = run_llama(a);
  } else if (a.workload == "moe_step") {
    r = run_moe(a);
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
    std::fprintf(stderr, "tapegrad_bench: unknown workload %s (--list names them)\n", a.workload.c_str());
    return 4;
  }
  r.add("blas_threads", openblas_get_num_threads());
  a.workload = workload_name;
  bench::print_json("tapegrad", a, r, start_rss);
  return 0;
}
