#pragma once
// The kinds of feed-forward a block can have, declared once: X(name, matrices). The model's
// `mlp` field (its choices and their names), the FeedForward part, the hidden-width rule,
// the parameter and tensor counts and the conditions on the mlp_* fields all read this
// list, so a new activation is a line here plus its case in FeedForward::hidden()
// (nn/feed_forward.cpp). `matrices` is the number of weight matrices: 2 for an ungated kind
// (in, out), 3 for a gated one (gate, up, down), 0 for none (attention-only blocks).
// Checkpoints store the `mlp` field as the kind's position in this list: a new kind goes
// last.
#include <cstddef>
#include <string>
#include <vector>

namespace tapegrad {

#define TAPEGRAD_MLP_KINDS(X) \
  X(gelu, 2)                  \
  X(swiglu, 3)                \
  X(none, 0)                  \
  X(geglu, 3)

enum class MlpKind {
#define TAPEGRAD_MLP_KIND_NAME(name, matrices) name,
  TAPEGRAD_MLP_KINDS(TAPEGRAD_MLP_KIND_NAME)
#undef TAPEGRAD_MLP_KIND_NAME
};

inline constexpr std::size_t mlp_matrices(MlpKind kind) {
  constexpr std::size_t matrices[] = {
#define TAPEGRAD_MLP_KIND_MATRICES(name, matrices) matrices,
      TAPEGRAD_MLP_KINDS(TAPEGRAD_MLP_KIND_MATRICES)
#undef TAPEGRAD_MLP_KIND_MATRICES
  };
  return matrices[static_cast<std::size_t>(kind)];
}
// A gated kind multiplies its activation by a second input projection (gate, up, down).
inline constexpr bool mlp_gated(MlpKind kind) { return mlp_matrices(kind) == 3; }

// The kinds' names, in the list's order ("gelu", "swiglu", "none", "geglu").
inline std::vector<std::string> mlp_kind_names() {
  return {
#define TAPEGRAD_MLP_KIND_STRING(name, matrices) #name,
      TAPEGRAD_MLP_KINDS(TAPEGRAD_MLP_KIND_STRING)
#undef TAPEGRAD_MLP_KIND_STRING
  };
}

}  // namespace tapegrad
