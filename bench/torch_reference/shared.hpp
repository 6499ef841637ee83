#pragma once
// What torch_reference's workloads share: tensors from the harness's inputs and back, the
// textbook attention and its causal mask (the attention workloads' and the models'), and
// each workload's run.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "../harness.hpp"
#include "../llama_reference.hpp"

namespace torch_reference {

using bench::Args;
using bench::MhaInputs;
using bench::MhaShape;
using bench::Result;

inline volatile double g_sink = 0;  // keeps results observable so no step is optimised away

template <class R>
torch::Dtype dtype_of() {
  return sizeof(R) == 8 ? torch::kFloat64 : torch::kFloat32;
}

template <class R>
torch::Tensor tensor_of(const std::vector<double>& v, std::vector<int64_t> shape, bool rg) {
  torch::Tensor t = torch::tensor(v, torch::kFloat64).to(dtype_of<R>()).reshape(shape).contiguous();
  return t.set_requires_grad(rg);
}

template <class R>
std::vector<R> values(const torch::Tensor& t) {
  torch::Tensor c = t.detach().contiguous();
  const R* p = c.data_ptr<R>();
  return std::vector<R>(p, p + c.numel());
}

// Multi-head attention as the textbook composition a PyTorch user writes by hand
// (attention_runs.cpp says how).
torch::Tensor mha(const torch::Tensor& x, const torch::Tensor& Wq, const torch::Tensor& Wk,
                  const torch::Tensor& Wv, const torch::Tensor& Wo, int64_t heads,
                  const torch::Tensor& blocked);
// Grouped-query attention's heads: q (B, heads, T, dh), k and v (B, kv_heads, T, dh)
// repeated to `heads` -> merged (B, T, heads*dh), before the output projection.
torch::Tensor gqa_heads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& blocked);
// The positions a causal row may not see, (T, T), true above the diagonal.
torch::Tensor blocked_mask(int64_t T);

// The workloads, each a Result as bench::print_json writes it.
template <class R>
Result run_mha(const Args& a, const bench::MhaWorkload& w);
Result run_gqa(const Args& a, const bench::MhaWorkload& w);
Result run_flash(const Args& a, const bench::FlashShape& s);
Result run_toygpt(const Args& a);
Result run_llama(const Args& a);
Result run_decode(const Args& a, std::size_t context);
Result run_chain(const Args& a);
Result run_bmm(const Args& a, const MhaShape& s);
template <class R>
Result run_gemm_peak(const Args& a);

}  // namespace torch_reference
