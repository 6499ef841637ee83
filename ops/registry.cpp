#include "ops/registry.hpp"

#include "ops/attention.hpp"
#include "ops/attention_fused.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/linear_cross_entropy.hpp"
#include "ops/elementwise.hpp"
#include "ops/embedding.hpp"
#include "ops/matmul.hpp"
#include "ops/norm.hpp"
#include "ops/reduce.hpp"
#include "ops/rope.hpp"
#include "ops/shape_ops.hpp"
#include "ops/softmax.hpp"

namespace tapegrad {

namespace {

using T = double;
using Inputs = std::vector<Tensor<T>>;
constexpr InputDomain any = InputDomain::any;

Mask random_mask(const Shape& shape, Generator& gen) {
  Mask m = Mask::from_shape(shape);
  for (auto&& v : m) v = gen.uniform() < 0.7;
  return m;
}

std::vector<RegisteredOp> elementwise_ops() {
  const auto positive = InputDomain::positive;
  return {
      {"add", 2, {{"add", {{2, 3}, {2, 3}}, any, [](const Inputs& x) { return x[0] + x[1]; }},
                  {"add (broadcast)", {{2, 1, 4}, {3, 1}}, any, [](const Inputs& x) { return x[0] + x[1]; }},
                  {"add (scalar)", {{3, 2}}, any, [](const Inputs& x) { return x[0] + 2.5; }}}},
      {"sub", 2, {{"sub (broadcast)", {{4}, {3, 4}}, any, [](const Inputs& x) { return x[0] - x[1]; }},
                  {"sub (scalar - x)", {{3}}, any, [](const Inputs& x) { return 1.0 - x[0]; }}}},
      {"mul", 2, {{"mul (broadcast)", {{2, 3, 1}, {1, 4}}, any, [](const Inputs& x) { return x[0] * x[1]; }},
                  {"mul (rank 0)", {{3, 2}, {}}, any, [](const Inputs& x) { return x[0] * x[1]; }}}},
      {"div", 2, {{"div (broadcast)", {{2, 3}, {3}}, positive, [](const Inputs& x) { return x[0] / x[1]; }},
                  {"div (scalar / x)", {{4}}, positive, [](const Inputs& x) { return 2.0 / x[0]; }}}},
      {"neg", 1, {{"neg", {{3, 2}}, any, [](const Inputs& x) { return -x[0]; }}}},
      {"exp", 1, {{"exp", {{3, 2}}, any, [](const Inputs& x) { return exp(x[0]); }}}},
      {"log", 1, {{"log", {{3, 2}}, positive, [](const Inputs& x) { return log(x[0]); }}}},
      {"sqrt", 1, {{"sqrt", {{3, 2}}, positive, [](const Inputs& x) { return sqrt(x[0]); }}}},
      {"pow", 2, {{"pow", {{3, 2}}, positive, [](const Inputs& x) { return pow(x[0], 2.5); }},
                  {"pow (broadcast)", {{2, 3}, {3}}, positive, [](const Inputs& x) { return pow(x[0], x[1]); }},
                  {"pow (scalar ^ x)", {{4}}, any, [](const Inputs& x) { return pow(2.0, x[0]); }}}},
      {"tanh", 1, {{"tanh", {{3, 2}}, any, [](const Inputs& x) { return tanh(x[0]); }}}},
      {"softcap", 1, {{"softcap (c 0.7)", {{3, 4}}, any, [](const Inputs& x) { return softcap(x[0], 0.7); }}}},
      {"relu", 1, {{"relu", {{3, 4}}, InputDomain::away_from_zero, [](const Inputs& x) { return relu(x[0]); }}}},
      {"sigmoid", 1, {{"sigmoid", {{3, 2}}, any, [](const Inputs& x) { return sigmoid(x[0]); }}}},
      {"gelu", 1, {{"gelu (tanh form)", {{3, 4}}, any, [](const Inputs& x) { return gelu(x[0]); }}}},
      {"silu", 1, {{"silu", {{3, 4}}, any, [](const Inputs& x) { return silu(x[0]); }}}},
  };
}

std::vector<RegisteredOp> shape_and_reduction_ops() {
  return {
      {"sum", 1, {{"sum (all)", {{2, 3, 4}}, any, [](const Inputs& x) { return sum(x[0]); }},
                  {"sum (axes 0,2 keepdims)", {{2, 3, 4}}, any,
                   [](const Inputs& x) { return sum(x[0], {0, -1}, true); }}}},
      {"mean", 1, {{"mean (axis 1)", {{2, 3, 4}}, any, [](const Inputs& x) { return mean(x[0], {1}); }}}},
      {"max", 1, {{"max (axis -1)", {{3, 5}}, any, [](const Inputs& x) { return max(x[0], -1); }}}},
      {"reshape", 1, {{"reshape", {{2, 6}}, any, [](const Inputs& x) { return reshape(x[0], {3, 4}); }}}},
      {"transpose", 1, {{"transpose (2,0,1)", {{2, 3, 4}}, any,
                         [](const Inputs& x) { return transpose(x[0], {2, 0, 1}); }}}},
      {"swapaxes", 1, {{"swapaxes (-1,-2)", {{2, 3, 4}}, any,
                        [](const Inputs& x) { return swapaxes(x[0], -1, -2); }}}},
      {"concatenate", 0, {{"concatenate (axis 1)", {{2, 3}, {2, 2}}, any,
                           [](const Inputs& x) { return concatenate<T>({x[0], x[1]}, 1); }}}},
      {"slice", 1, {{"slice (axis 1, 1:3)", {{2, 4, 3}}, any,
                     [](const Inputs& x) { return slice(x[0], 1, 1, 3); }}}},
      {"repeat_interleave", 1, {{"repeat_interleave (x2, axis 1)", {{2, 3, 4}}, any,
                                 [](const Inputs& x) { return repeat_interleave(x[0], 2, 1); }}}},
  };
}

std::vector<RegisteredOp> matmul_ops() {
  const auto mm = [](const Inputs& x) { return matmul(x[0], x[1]); };
  return {
      {"matmul", 2, {{"matmul 2-D", {{3, 4}, {4, 5}}, any, mm},
                     {"matmul batched", {{2, 3, 4}, {2, 4, 5}}, any, mm},
                     {"matmul (B,T,D)@(D,D)", {{2, 3, 4}, {4, 4}}, any, mm},
                     {"matmul broadcast batch", {{2, 1, 3, 4}, {5, 4, 2}}, any, mm},
                     {"matmul (M,K)@(B,K,N)", {{3, 4}, {2, 4, 5}}, any, mm},
                     {"matmul vector", {{4}, {2, 4, 3}}, any, mm}}},
      {"matmul_nt", 2, {{"matmul_nt (q @ k^T)", {{2, 3, 4}, {2, 5, 4}}, any,
                         [](const Inputs& x) { return matmul_nt(x[0], x[1]); }}}},
      {"linear", 3, {{"linear (B,T,K)@(K,N)+(N)", {{2, 3, 4}, {4, 5}, {5}}, any,
                      [](const Inputs& x) { return linear(x[0], x[1], x[2]); }},
                     {"linear (M,K)@(K,N)+(N)", {{3, 4}, {4, 2}, {2}}, any,
                      [](const Inputs& x) { return linear(x[0], x[1], x[2]); }}}},
  };
}

std::vector<RegisteredOp> softmax_and_model_ops(Generator& g) {
  const Mask mask = [&] {
    Mask m = random_mask({2, 5, 6}, g);
    for (std::size_t k = 0; k < 6; ++k) m(1, 2, k) = false;  // one fully masked row
    return m;
  }();
  const Indices ids = {{0, 3, 3}, {4, 1, 0}};
  const Indices targets = {{1, 0, -100}, {2, 2, 1}};
  // 21 rows over a vocabulary of 9, some ignored
  const Indices head_targets = {{0, 4, -100, 8, 2, 2, 1}, {-100, 8, 5, 3, 0, 7, 6}, {1, 1, 1, 1, 1, 1, 1}};
  RopeSpec half, yarn;
  yarn.style = RopeStyle::interleaved;
  yarn.scaling = RopeScaling::yarn;
  yarn.factor = 4;
  yarn.original_context = 2;
  return {
      {"softmax", 1, {{"softmax (axis -1)", {{2, 3, 5}}, any, [](const Inputs& x) { return softmax(x[0], -1); }},
                      {"softmax (axis 1)", {{2, 3, 5}}, any, [](const Inputs& x) { return softmax(x[0], 1); }}}},
      {"log_softmax", 1, {{"log_softmax (axis -1)", {{2, 3, 5}}, any,
                           [](const Inputs& x) { return log_softmax(x[0], -1); }}}},
      {"masked_softmax", 1, {{"masked_softmax (masked row)", {{2, 5, 6}}, any,
                              [mask](const Inputs& x) { return masked_softmax(x[0], mask); }}}},
      {"embedding", 1, {{"embedding (repeated ids)", {{5, 3}}, any,
                         [ids](const Inputs& x) { return embedding(x[0], ids); }}}},
      {"weighted_row_sum", 2, {{"weighted_row_sum (repeated ids)", {{5, 3}, {2, 3}}, any,
                                [ids](const Inputs& x) { return weighted_row_sum(x[0], ids, x[1]); }}}},
      {"layer_norm", 3, {{"layer_norm", {{2, 3, 5}, {5}, {5}}, any,
                          [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); }}}},
      {"rms_norm", 2, {{"rms_norm", {{2, 3, 5}, {5}}, any, [](const Inputs& x) { return rms_norm(x[0], x[1]); }}}},
      {"cross_entropy", 1, {{"cross_entropy (ignore_index)", {{2, 3, 4}}, any,
                             [targets](const Inputs& x) { return cross_entropy(x[0], targets); }}}},
      {"linear_cross_entropy", 2,
       {{"linear_cross_entropy (2 chunks)", {{3, 7, 4}, {4, 9}}, any,
         [head_targets](const Inputs& x) {
           LinearCrossEntropyOptions o;
           o.chunk_rows = 16;
           return linear_cross_entropy(x[0], x[1], head_targets, o);
         }},
        {"linear_cross_entropy (tied, softcap 0.8)", {{3, 7, 4}, {9, 4}}, any,
         [head_targets](const Inputs& x) {
           LinearCrossEntropyOptions o;
           o.chunk_rows = 16;
           o.transposed = true;
           o.softcap = 0.8;
           return linear_cross_entropy(x[0], x[1], head_targets, o);
         }}}},
      {"rope", 1, {{"rope (half, offset 3)", {{2, 5, 6}}, any, [half](const Inputs& x) { return rope(x[0], 3, half); }}}},
      {"rope_heads", 1, {{"rope_heads (interleaved, yarn)", {{2, 4, 12}}, any,
                          [yarn](const Inputs& x) { return rope_heads(x[0], 2, 1, yarn); }}}},
  };
}

std::vector<RegisteredOp> attention_ops(Generator& g) {
  const Mask mask = random_mask({3, 4}, g);
  const AttentionSpec gqa = causal_spec(4, 2);
  const AttentionSpec window = causal_spec(4, 1, 2);  // head_dim 3, v head_dim 4
  const auto flash = [](const AttentionSpec& spec) {
    return [spec](const Inputs& x) { return attention(x[0], x[1], x[2], spec, AttentionPath::flash).out; };
  };
  MultiHeadOptions unscaled_composed;
  unscaled_composed.causal = true;
  unscaled_composed.scale = 1.0;
  unscaled_composed.fused = false;
  return {
      {"scaled_dot_product_attention", 3,
       {{"sdpa out (random mask)", {{3, 4}, {4, 4}, {4, 2}}, any,
         [mask](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2], mask).out; }},
        {"sdpa weights (causal, 4-D)", {{2, 2, 4, 3}, {2, 2, 4, 3}, {2, 2, 4, 5}}, any,
         [](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2], causal_mask(4)).weights; }},
        {"sdpa out (Tq != Tk, broadcast K/V)", {{2, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 3}}, any,
         [](const Inputs& x) { return scaled_dot_product_attention(x[0], x[1], x[2]).out; }}}},
      {"attention_weights", 2, {{"attention_weights (fused, causal)", {{2, 4, 6}, {2, 4, 6}}, any,
                                 [](const Inputs& x) { return attention_weights(x[0], x[1], 3, 0.7, true); }}}},
      {"attention_mix", 2, {{"attention_mix (fused)", {{2, 3, 4, 4}, {2, 4, 6}}, any,
                             [](const Inputs& x) { return attention_mix(x[0], x[1], 3); }}}},
      {"multi_head_attention", 5,
       {{"multi_head_attention (causal)", {{2, 5, 8}, {8, 8}, {8, 8}, {8, 8}, {8, 8}}, any,
         [](const Inputs& x) { return multi_head_attention(x[0], x[1], x[2], x[3], x[4], 2, true); }},
        {"multi_head_attention", {{2, 4, 6}, {6, 6}, {6, 6}, {6, 6}, {6, 6}}, any,
         [](const Inputs& x) { return multi_head_attention(x[0], x[1], x[2], x[3], x[4], 3, false); }}}},
      {"multi_head_attention_with_weights", 5,
       {{"multi_head_attention_with_weights", {{2, 4, 6}, {6, 6}, {6, 6}, {6, 6}, {6, 6}}, any,
         [unscaled_composed](const Inputs& x) {
           return multi_head_attention_with_weights(x[0], x[1], x[2], x[3], x[4], 2, unscaled_composed).out;
         }}}},
      {"attention", 3,
       {{"attention (GQA 4/2, causal, fused)", {{2, 5, 12}, {2, 5, 6}, {2, 5, 6}}, any,
         [gqa](const Inputs& x) { return attention(x[0], x[1], x[2], gqa).out; }},
        {"attention (MQA, window 2, Tq 2 < Tk 5)", {{2, 2, 12}, {2, 5, 3}, {2, 5, 4}}, any,
         [window](const Inputs& x) { return attention(x[0], x[1], x[2], window).out; }}}},
      {"flash_attention", 3,
       {{"flash_attention (GQA 4/2, causal)", {{2, 5, 12}, {2, 5, 6}, {2, 5, 6}}, any, flash(gqa)},
        {"flash_attention (MQA, window 2, Tq 2 < Tk 5)", {{2, 2, 12}, {2, 5, 3}, {2, 5, 4}}, any,
         flash(window)}}},
  };
}

std::vector<RegisteredOp> all_ops() {
  Generator g(7);  // the masks'
  std::vector<RegisteredOp> ops;
  for (std::vector<RegisteredOp> group :
       {elementwise_ops(), shape_and_reduction_ops(), matmul_ops(), softmax_and_model_ops(g),
        attention_ops(g)})
    for (RegisteredOp& op : group) ops.push_back(std::move(op));
  return ops;
}

}  // namespace

const std::vector<RegisteredOp>& op_registry() {
  static const std::vector<RegisteredOp> ops = all_ops();
  return ops;
}

std::vector<Tensor<double>> gradcheck_inputs(const GradcheckCase& c, Generator& gen) {
  std::vector<Tensor<double>> inputs;
  for (const Shape& shape : c.shapes) {
    Array<double> a = Array<double>::from_shape(shape);
    for (double& v : a) {
      switch (c.domain) {
        case InputDomain::any: v = gen.normal(); break;
        case InputDomain::positive: v = gen.uniform(0.5, 2.0); break;
        case InputDomain::away_from_zero:
          v = gen.uniform(0.1, 1.5) * (gen.uniform() < 0.5 ? -1.0 : 1.0);
          break;
      }
    }
    inputs.emplace_back(std::move(a), true);
  }
  return inputs;
}

}  // namespace tapegrad
