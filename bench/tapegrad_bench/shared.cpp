#include "shared.hpp"

namespace tapegrad_bench {

volatile double g_sink = 0;
Modifier g_modifier = Modifier::none;
KVDtype g_kv_dtype = KVDtype::model;
bool g_checkpoint_blocks = false;

void apply_modifier(AttentionSpec& spec) {
  if (g_modifier == Modifier::alibi) spec.bias = PositionBias::alibi;
  if (g_modifier == Modifier::softcap) spec.softcap = kBenchSoftcap;
}

// "llama_step_alibi" -> "llama_step" with g_modifier = alibi; other names are left alone.
void take_modifier(std::string& workload) {
  const std::pair<const char*, Modifier> suffixes[] = {{"_alibi", Modifier::alibi},
                                                       {"_softcap", Modifier::softcap}};
  for (const auto& [suffix, modifier] : suffixes) {
    const std::string tail(suffix);
    if (workload.size() > tail.size() &&
        workload.compare(workload.size() - tail.size(), tail.size(), tail) == 0) {
      workload.resize(workload.size() - tail.size());
      g_modifier = modifier;
    }
  }
}

AttentionSpec causal_spec_of(const MhaShape& s) {
  AttentionSpec spec = causal_spec(s.H, s.kv());
  spec.head_dim = s.D / s.H;
  apply_modifier(spec);
  return spec;
}

}  // namespace tapegrad_bench
