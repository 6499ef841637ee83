#include "platform/execution.hpp"

#include <atomic>

namespace tapegrad::kernels {

namespace {

thread_local ThreadSettings tl_settings;  // constant-initialised: f32, no reference products
std::atomic<Bf16Notice> g_bf16_notice{nullptr};

}  // namespace

MatmulPrecision matmul_precision() { return tl_settings.precision; }

void set_matmul_precision(MatmulPrecision precision) {
  if (precision == MatmulPrecision::bf16)
    if (const Bf16Notice notice = g_bf16_notice.load(std::memory_order_acquire)) notice();
  tl_settings.precision = precision;
}

bool reference_products() { return tl_settings.reference; }
void set_reference_products(bool on) { tl_settings.reference = on; }

ThreadSettings thread_settings() { return tl_settings; }
void set_thread_settings(const ThreadSettings& settings) { tl_settings = settings; }

Bf16Notice set_bf16_notice(Bf16Notice notice) {
  return g_bf16_notice.exchange(notice, std::memory_order_acq_rel);
}

}  // namespace tapegrad::kernels
