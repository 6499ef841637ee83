// The bf16 KV cache (KVDtype::bf16): keys and values rounded to nearest even as they are
// appended, half the bytes, and read back widened. The reference for its decode is a float32
// cache holding the same rounded numbers (the kernel's arithmetic is the same, so the
// results must be equal); a model decoding from it (llama, gemma2 with its ring beside a
// global layer, bloom) must stay close to the float32 cache and
// differ from it (the rounding is real); what cannot be stored in bf16 is refused.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "helpers.hpp"
#include "autograd/tape.hpp"
#include "nn/kv_cache.hpp"
#include "nn/transformer.hpp"
#include "ops/attention.hpp"
#include "ops/attention_decode.hpp"
#include "ops/precision.hpp"
#include "ops/shape_ops.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

Tensor<float> rounded(const Tensor<float>& x) {
  Tensor<float> out = Tensor<float>::zeros(x.shape());
  for (std::size_t i = 0; i < x.size(); ++i) out.value().data()[i] = kernels::round_to_bf16(x.data()[i]);
  return out;
}

double max_abs_difference(const Tensor<float>& a, const Tensor<float>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a.data()[i]) - double(b.data()[i])));
  return worst;
}

Indices as_row(const std::vector<std::int64_t>& ids, std::size_t begin, std::size_t end) {
  Indices t = Indices::from_shape({std::size_t(1), end - begin});
  for (std::size_t i = begin; i < end; ++i) t(0, i - begin) = ids[i];
  return t;
}

}  // namespace

TEST_CASE("kv cache bf16: appended values are rounded to nearest even, in half the bytes", "[kv_cache]") {
  KVCache<float> wide(1, 1, 4, 4, 8);
  KVCache<float> narrow(1, 1, 4, 4, 8, 0, KVDtype::bf16);
  CHECK(narrow.dtype() == KVDtype::bf16);
  CHECK(narrow.bytes() * 2 == wide.bytes());
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to the even 1; 1 + 3 * 2^-8 is halfway
  // between 1 + 2^-7 and 1 + 2^-6: to the even 1 + 2^-6; just above halfway rounds up
  const std::vector<float> given = {from_bits(0x3F808000), from_bits(0x3F818000),
                                    from_bits(0x3F808001), -3.0f};
  const std::vector<float> stored = {1.0f, 1.0f + 1.0f / 64, 1.0f + 1.0f / 128, -3.0f};
  Tensor<float> k = Tensor<float>::zeros({1, 1, 4});
  std::copy(given.begin(), given.end(), k.value().data());
  narrow.append(k, k);
  const Tensor<float> keys = narrow.keys(), values = narrow.values();
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(keys.data()[i] == stored[i]);
    CHECK(values.data()[i] == stored[i]);
  }
}

TEST_CASE("kv cache bf16: decode equals a float32 cache of the rounded keys and values", "[kv_cache]") {
  // GQA, a ring that wraps (window 37 of 150 positions), ALiBi, and enough keys for the
  // widening's blocks of 64 rows and their tail
  const std::size_t B = 2, H = 4, KV = 2, dh = 24, N = 150;
  for (std::size_t window : {std::size_t(0), std::size_t(37), std::size_t(100)}) {
    INFO("window " << window);
    AttentionSpec spec = make_spec(H, KV, true, window);
    spec.bias = PositionBias::alibi;
    Generator gen(31 + window);
    const Tensor<float> q = Tensor<float>::randn({B, N, H * dh}, gen);
    const Tensor<float> k = Tensor<float>::randn({B, N, KV * dh}, gen);
    const Tensor<float> v = Tensor<float>::randn({B, N, KV * dh}, gen);
    KVCache<float> narrow(B, KV, dh, dh, N, window, KVDtype::bf16);
    KVCache<float> wide(B, KV, dh, dh, N, window);
    NoGradGuard no_grad;
    narrow.append(k, v);
    wide.append(rounded(k), rounded(v));
    const Tensor<float> last = slice(q, 1, N - 1, N);
    const Tensor<float> y = narrow.decode(last, spec);
    CHECK(max_abs_difference(y, wide.decode(last, spec)) == 0.0);
    // and that is attention() over the rounded keys, not over the float32 ones
    const Tensor<float> want =
        slice(attention(q, rounded(k), rounded(v), spec).out, 1, N - 1, N);
    CHECK(max_abs_difference(y, want) <= 1e-5);
    const Tensor<float> unrounded = slice(attention(q, k, v, spec).out, 1, N - 1, N);
    CHECK(max_abs_difference(y, unrounded) > 1e-4);
  }
}

// The worst logit error of decoding c's model through a bf16 cache (7 positions prefilled in
// chunks of 4 and 3, which read keys() widened, then one at a time), and the largest logit,
// against the full float32 forward.
static std::pair<double, double> bf16_decode_error(const TransformerConfig& c) {
  Transformer<float> model(c);
  Generator gen(8);
  std::vector<std::int64_t> ids(c.context);
  for (auto& t : ids) t = std::int64_t(gen.integer(c.vocab));
  NoGradGuard no_grad;
  const Tensor<float> full = model.forward(as_row(ids, 0, ids.size()));
  KVCacheSet<float> caches(c, 1, c.context, KVDtype::bf16);
  CHECK(caches.bytes() * 2 == KVCacheSet<float>(c, 1, c.context).bytes());
  double worst = 0, scale = 0;
  for (std::size_t pos = 0; pos < ids.size();) {
    const std::size_t n = pos < 7 ? std::min<std::size_t>(4, 7 - pos) : 1;
    const Tensor<float> logits = model.forward(as_row(ids, pos, pos + n), caches);
    for (std::size_t i = 0; i < logits.size(); ++i) {
      const double want = full.data()[pos * c.vocab + i];
      worst = std::max(worst, std::abs(double(logits.data()[i]) - want));
      scale = std::max(scale, std::abs(want));
    }
    pos += n;
  }
  return {worst, scale};
}

TEST_CASE("kv cache bf16: a model decodes close to the float32 cache, prefill chunks included", "[kv_cache]") {
  // llama; gemma2 (window 10 on layer 0, a ring, beside a global layer 1); bloom (ALiBi)
  for (const char* name : {"llama", "gemma2", "bloom"}) {
    INFO(name);
    TransformerConfig c = preset(name);
    c.vocab = 11;
    c.context = 20;
    c.d_model = 32;
    c.heads = 4;
    c.kv_heads = name == std::string("bloom") ? 0 : 2;
    c.layers = 2;
    c.seed = 5;
    finish_preset(name, c);
    const auto [worst, scale] = bf16_decode_error(c);
    INFO("worst " << worst << " of " << scale);
    CHECK(worst <= 2e-2 * scale);  // bf16 keeps 8 significant bits: errors of ~2^-9 relative
    CHECK(worst > 1e-6 * scale);   // and the keys were rounded: not the float32 cache's result
  }
}

TEST_CASE("kv cache bf16: what cannot be stored so is refused by name", "[kv_cache]") {
  TransformerConfig c = gpt2_preset();
  c.vocab = 11;
  c.context = 8;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 1;
  require_shape_error([&] { KVCacheSet<double>(c, 1, 8, KVDtype::bf16); },
                      {"KVCache", "bf16 storage is for float32 models"});
  require_shape_error([] { kv_dtype_from_name("fp8"); }, {"KVCache", "f32", "bf16", "'fp8'"});
  CHECK(kv_dtype_from_name("bf16") == KVDtype::bf16);
  CHECK(kv_dtype_from_name("f32") == KVDtype::model);
  KVCache<float> narrow(1, 1, 4, 4, 8, 0, KVDtype::bf16);
  require_shape_error([&] { narrow.key_store(); }, {"KVCache", "key_store()", "bf16"});
  CHECK(kv_value_bytes<float>(KVDtype::bf16) == 2);
  CHECK(kv_value_bytes<float>(KVDtype::model) == 4);
  CHECK(kv_value_bytes<double>(KVDtype::model) == 8);
}
