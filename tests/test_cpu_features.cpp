// What ops/kernels/cpu_features.cpp reads of the CPU, against what libgcc's own detection
// (__builtin_cpu_supports, __builtin_cpu_is) and Linux's /proc/cpuinfo say; and the bf16
// kernel dispatch.cpp picks from it, against the rule dispatch.hpp states. A baseline build
// (TAPEGRAD_NATIVE off) runs these too: the choice is made at run time, not by -march.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "ops/kernels/cpu_features.hpp"
#include "ops/kernels/dispatch.hpp"

using namespace tapegrad::kernels;

namespace {

// The first "flags" line of /proc/cpuinfo, padded with spaces ("" where there is none).
std::string cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0) return " " + line.substr(line.find(':') + 1) + " ";
  return "";
}

bool listed(const std::string& flags, const std::string& flag) {
  return flags.find(" " + flag + " ") != std::string::npos;
}

}  // namespace

#if defined(__x86_64__)
TEST_CASE("cpu features: cpuid and xgetbv read as libgcc reads them", "[cpu][bf16]") {
  __builtin_cpu_init();
  const CpuFeatures& cpu = cpu_features();
  CHECK(cpu.amd == __builtin_cpu_is("amd"));
  CHECK(cpu.avx512_bf16 ==
        (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16")));
  CHECK(&cpu == &cpu_features());  // read once
}

TEST_CASE("cpu features: AMX only where Linux lists the tiles", "[cpu][bf16]") {
  const std::string flags = cpuinfo_flags();
  if (flags.empty()) {
    WARN("skipped: no /proc/cpuinfo flags");
    return;
  }
  const CpuFeatures& cpu = cpu_features();
  CHECK(cpu.avx512_bf16 == (listed(flags, "avx512f") && listed(flags, "avx512_bf16")));
  if (cpu.amx_bf16) {
    CHECK(listed(flags, "amx_tile"));
    CHECK(listed(flags, "amx_bf16"));
  }
  if (!listed(flags, "amx_tile")) CHECK_FALSE(cpu.amx_bf16);
}
#endif

TEST_CASE("kernel dispatch: the automatic bf16 kernel is the one dispatch.hpp names for this CPU", "[cpu][bf16]") {
  const CpuFeatures& cpu = cpu_features();
  const Bf16Path want = cpu.amx_bf16                  ? Bf16Path::amx
                        : cpu.avx512_bf16 && cpu.amd ? Bf16Path::avx512_bf16
                                                     : Bf16Path::rounded;
  CHECK(resolve_bf16_path(Bf16Path::automatic) == want);
  CHECK(bf16_products_are_fast() == (want != Bf16Path::rounded));
  for (Bf16Path asked : {Bf16Path::portable, Bf16Path::avx512_bf16, Bf16Path::rounded,
                         Bf16Path::amx})
    CHECK(resolve_bf16_path(asked) == asked);
  // the tiles pay from one 16 x 16 tile on; VDPBF16PS for any shape; rounded copies never
  CHECK(bf16_kernel_pays(16, 16) == (want != Bf16Path::rounded));
  CHECK(bf16_kernel_pays(1, 64) == (want == Bf16Path::avx512_bf16));
  CHECK(bf16_kernel_pays(64, 15) == (want == Bf16Path::avx512_bf16));
}
