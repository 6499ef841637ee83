#pragma once
// What this CPU, and the operating system for this process, let the kernels use: read once,
// on first use, from cpuid and xgetbv (and, for AMX, Linux's permission), and kept. The
// kernels' run-time choices (ops/kernels/dispatch.hpp) read it here and nowhere else, so a
// build for the baseline x86-64 still takes the fast paths of the CPU it runs on.
namespace tapegrad::kernels {

struct CpuFeatures {
  // cpuid's vendor is AuthenticAMD (where VDPBF16PS outruns the float32 FMAs).
  bool amd = false;
  // VDPBF16PS: AVX512F and AVX512_BF16, and the operating system saves the AVX-512 state.
  bool avx512_bf16 = false;
  // AMX's bf16 tiles: AMX-TILE and AMX-BF16 (with avx512_bf16, whose VCVTNE2PS2BF16 packs
  // the tiles' operands), the operating system saves the tiles' state, and Linux granted
  // this process their use (asked for once, here).
  bool amx_bf16 = false;
};

const CpuFeatures& cpu_features();

}  // namespace tapegrad::kernels
