#include "ops/kernels/cpu_features.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cstring>

namespace tapegrad::kernels {

namespace {

#if defined(__x86_64__) || defined(__i386__)
struct Registers {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

// cpuid's leaf (and subleaf); zeros where the CPU has no such leaf.
Registers cpuid(unsigned leaf, unsigned subleaf = 0) {
  Registers r;
  if (!__get_cpuid_count(leaf, subleaf, &r.a, &r.b, &r.c, &r.d)) r = Registers{};
  return r;
}

bool bit(unsigned word, int n) { return (word >> n) & 1u; }

// XCR0: the register state the operating system saves on a context switch (zero where
// OSXSAVE says xgetbv may not be used).
unsigned long long saved_state() {
  if (!bit(cpuid(1).c, 27)) return 0;  // OSXSAVE
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

// Linux hands the tiles' 8 KiB of state only to a process that asks for it.
bool amx_permitted() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
  const Registers vendor = cpuid(0);
  char name[12];
  std::memcpy(name, &vendor.b, 4);
  std::memcpy(name + 4, &vendor.d, 4);
  std::memcpy(name + 8, &vendor.c, 4);
  f.amd = std::memcmp(name, "AuthenticAMD", 12) == 0;
  if (vendor.a < 7) return f;
  const unsigned long long xcr0 = saved_state();
  // SSE, AVX, the mask registers and both halves of the 32 ZMM registers
  constexpr unsigned long long kAvx512State = 0xe6;
  // XTILECFG and XTILEDATA
  constexpr unsigned long long kTileState = 3ull << 17;
  const Registers leaf7 = cpuid(7), leaf7_1 = leaf7.a >= 1 ? cpuid(7, 1) : Registers{};
  f.avx512_bf16 = (xcr0 & kAvx512State) == kAvx512State && bit(leaf7.b, 16) &&
                  bit(leaf7_1.a, 5);
  f.amx_bf16 = f.avx512_bf16 && bit(leaf7.d, 24) && bit(leaf7.d, 22) &&
               (xcr0 & kTileState) == kTileState && amx_permitted();
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace tapegrad::kernels
