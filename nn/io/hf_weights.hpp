#pragma once
// The tensors of a Hugging Face folder bound to a built Transformer's storage: the
// description of hf_tensor_map.hpp (names, shapes, which parameters) with the functions that
// move values between the file's layout and the parameters (docs/INTEROP.md):
//   - a Linear's weight is (in, out) in tapegrad and (out, in) in nn.Linear: transposed;
//     GPT-2's Conv1D is (in, out) already;
//   - GPT-2's c_attn is [q | k | v] along its columns, weight (d, 3d) and bias (3d); BLOOM's
//     query_key_value is an nn.Linear (3d, d) whose rows are per head [q (dh) k (dh) v (dh)],
//     its bias (3d) in the same order;
//   - Gemma 2's post_attention_layernorm is the norm on the attention's output
//     (blocks.L.norm1_post), its pre_/post_feedforward_layernorm norm2 / norm2_post, and its
//     norms' weight w (gain 1 + w) is tapegrad's gemma norm weight as it is; BLOOM's
//     word_embeddings_layernorm is embed_norm;
//   - HF's RoPE rotates halves (pairs i, i + head_dim/2), tapegrad's `half`; a model with
//     `interleaved` pairs (2i, 2i+1) is written with the rows of q_proj permuted per head
//     and those of k_proj per K/V head (q's bias too), so that HF's rotation computes the
//     same scores; read back, the same permutation is undone;
//   - Mixtral's block_sparse_moe.gate is the router (E, d), experts.e.w1/w3/w2 the expert's
//     gate/up/down;
//   - a tied head is written once (no lm_head.weight);
//   - a bias the file's model_type has and the model lacks is written as zeros (GPT-2's
//     Conv1D always has one; Llama's attention_bias is one switch for q, k, v and o).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "nn/io/hf_tensor_map.hpp"  // HfLayout, hf_layout, HfTensorSpec: the described tensors

namespace tapegrad {

template <class T>
class Transformer;

// One tensor of the folder: its name and shape as the file holds it, and the two
// directions between its values (row-major, in the file's layout) and the model's
// parameters. `load` throws CheckpointError when values that stand for a bias the model
// lacks are not all zero.
template <class T>
struct HfTensor {
  std::string name;
  std::vector<std::size_t> shape;
  std::size_t elements() const;
  std::function<void(const T* values)> load;
  std::function<void(T* values)> save;
  // The parameter's own storage when the file holds it in the same layout (an embedding, a
  // norm, GPT-2's Conv1D): a reader converts straight into it, and `load` is not needed.
  T* direct = nullptr;
};

// Every tensor a folder of `layout` holds for `model`, each of the model's parameters in
// exactly one of them. The functions write into and read from the model's own storage.
template <class T>
std::vector<HfTensor<T>> hf_tensors(const Transformer<T>& model, const HfLayout& layout);

// The same for tensors already described (hf_tensor_specs of the model's config): each
// spec's parts bound to the model's parameters of those names and shapes, every one of the
// model's parameters in exactly one; CheckpointError otherwise.
template <class T>
std::vector<HfTensor<T>> hf_bind_tensors(const Transformer<T>& model,
                                         const std::vector<HfTensorSpec>& specs,
                                         const std::string& model_type);

}  // namespace tapegrad
