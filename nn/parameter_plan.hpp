#pragma once
// The parameters of a Transformer<T>, described from its configuration alone and without
// allocating any of them: each one's name as named_parameters() gives it, its shape and its
// role. count_parameters (nn/config.hpp), the npz checkpoint loader's guards and the Hugging
// Face loader's size guard are sums over this plan, so a part added to a module is described
// here once; tests/test_parameter_plan.cpp holds the plan to the built model, name for name
// and shape for shape.
//
// A hostile config may have 2^24 layers of 2^16 experts, so the plan never lists every
// layer: it holds the parameters before the blocks, one block of each kind (dense, and
// mixture of experts where c.layer_plan(l) has experts), one expert's parameters and those
// after the blocks. The totals multiply each by how many the model holds.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/shape.hpp"
#include "nn/config.hpp"

namespace tapegrad {

// What a parameter is for: the rows of ParameterCounts, one each (norm: every norm's gain and
// bias, qk_norm: the per-head q and k norms' gains).
enum class ParameterRole {
  token_embedding,
  position_embedding,
  attention_q,
  attention_kv,
  attention_out,
  qk_norm,
  temperature,
  feed_forward,
  router,
  norm,
  unembedding,
};
std::string to_string(ParameterRole role);
// Adds n parameters of `role` to their row of `counts` (norm: norms).
void add_to_row(ParameterCounts& counts, ParameterRole role, std::uint64_t n);

struct PlannedParameter {
  // A block's parameter without its "blocks.<l>." and an expert's without its block's and its
  // "moe.experts.<e>." ("attn.Wk", "gate.weight"); the others in full ("tok_emb.weight").
  std::string name;
  Shape shape;
  ParameterRole role = ParameterRole::norm;
  bool expert = false;  // one of an MoE layer's experts (role feed_forward)
  // The product of the shape, modulo 2^64 as count_parameters has always counted; elements()
  // in long double for the guards, where a hostile shape's product would wrap.
  std::uint64_t size() const;
  long double elements() const;
};

class ParameterPlan {
 public:
  // No check of c: a config validate() refuses is described as its parts read, for the
  // counts; only a valid one is a model to hold the plan to.
  explicit ParameterPlan(const TransformerConfig& c);

  // Every parameter in the order of Transformer<T>::named_parameters(), with its full name
  // ("blocks.3.moe.experts.1.up.weight"): one call per parameter the model holds, so only
  // for a model about to be built or tested; the totals below are for the rest.
  void for_each(
      const std::function<void(const std::string& name, const PlannedParameter&)>& f) const;

  // Each described parameter once, with how many of it the model holds (1 outside the
  // blocks; the layers of its block's kind; times `experts` for an expert's).
  void for_each_kind(
      const std::function<void(const PlannedParameter&, std::uint64_t copies)>& f) const;

  // The parameter of that full name ("blocks.3.moe.experts.1.up.weight"), or nullptr when the
  // model has none: looked up in the block of layer 3's kind, without listing the layers.
  const PlannedParameter* find(const std::string& name) const;

  // The model's scalars and parameter tensors, in long double: no config overflows them.
  long double scalars() const;
  long double tensors() const;

  // How many layers are of each kind (c.moe_layers() and the rest), and of experts per MoE layer.
  std::uint64_t dense_layers() const { return dense_layers_; }
  std::uint64_t moe_layers() const { return moe_layers_; }
  std::uint64_t experts() const { return experts_; }

 private:
  // A block of one kind: the parameters before its experts (norms, attention, the dense
  // feed-forward or the router), its experts (one expert's, held experts_ times; empty in a
  // dense block) and those after them (norm2_post).
  struct BlockPlan {
    std::vector<PlannedParameter> before, expert, after;
  };
  TransformerConfig config_;  // its layer_plan(l) says which block layer l is
  std::vector<PlannedParameter> first_, last_;  // before the blocks, after them
  BlockPlan dense_, moe_;
  std::uint64_t dense_layers_ = 0, moe_layers_ = 0, experts_ = 0;
};

}  // namespace tapegrad
