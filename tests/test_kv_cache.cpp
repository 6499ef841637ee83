// The KV cache (nn/kv_cache.hpp), the one-query decode path (ops/attention_decode.hpp) and
// Transformer::forward(tokens, caches). The reference is always the plain full forward of
// the whole sequence: at every position the cached logits must equal its row within 1e-12
// (double) / 1e-5 (float) relative to the row's scale, for every preset and switch; chunked
// prefill (chunk 1, 3, the whole prompt) must give the same; a wrapped ring buffer must
// decode exactly what attention() computes; and the top-left mask trap is shown failing.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "autograd/tape.hpp"
#include "nn/kv_cache.hpp"
#include "nn/transformer.hpp"
#include "ops/attention.hpp"
#include "ops/attention_decode.hpp"
#include "ops/kernels/parallel.hpp"
#include "ops/shape_ops.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

TransformerConfig small(TransformerConfig c) {
  c.vocab = 11;
  c.context = 20;
  c.d_model = 16;
  c.heads = 4;
  c.layers = 2;
  c.mlp_ratio = 2;
  c.mlp_multiple = 4;
  c.seed = 9;
  return c;
}

std::vector<std::pair<std::string, TransformerConfig>> variants() {
  TransformerConfig g = small(gpt2_preset()), l = small(llama_preset());
  l.kv_heads = 2;
  std::vector<std::pair<std::string, TransformerConfig>> out;
  auto add = [&](const std::string& name, TransformerConfig c) { out.push_back({name, c}); };
  add("gpt2", g);
  add("llama (gqa 4/2)", l);
  TransformerConfig mha = l; mha.kv_heads = 4; add("llama mha", mha);
  TransformerConfig m = l; m.kv_heads = 1; add("mqa", m);
  TransformerConfig w = l; w.window = 5; add("window 5 < 20", w);
  TransformerConfig w1 = l; w1.window = 1; add("window 1", w1);
  TransformerConfig gw = g; gw.window = 4; add("gpt2 window 4", gw);
  TransformerConfig q = l; q.qk_norm = true; add("qk_norm", q);
  TransformerConfig b = w; b.attn_qkv_bias = true; b.attn_out_bias = true;
  add("window 5 + attention biases", b);
  TransformerConfig gb = g; gb.attn_qkv_bias = true; gb.attn_out_bias = true;
  add("gpt2 + attention biases", gb);
  TransformerConfig i = l; i.rope_style = RopeStyle::interleaved; add("rope interleaved", i);
  TransformerConfig y = l; y.rope_scaling = RopeScaling::yarn; y.rope_factor = 4;
  y.rope_original_context = 8; add("rope yarn", y);
  TransformerConfig t = l; t.tie_embeddings = true; add("tied head", t);
  TransformerConfig none = g; none.positions = PositionKind::none; add("no positions", none);
  TransformerConfig a = l; a.positions = PositionKind::alibi; add("alibi", a);
  TransformerConfig caps = a; caps.attn_softcap = 0.05; caps.final_softcap = 0.5;
  caps.window = 6; add("alibi, both soft-caps, window 6", caps);
  // Gemma 2 (window 10 = context/2 on layers 0 and 2, layers 1 and 3 global: rings and full
  // caches side by side, the rings wrapped past position 10) and BLOOM
  TransformerConfig gemma2 = small(gemma2_preset()); gemma2.layers = 4;
  finish_preset("gemma2", gemma2); add("gemma2", gemma2);
  TransformerConfig gemma3 = gemma2; gemma3.window = 3; gemma3.window_pattern = 4;
  add("gemma2, window 3 on layers 0-2", gemma3);
  add("bloom", small(bloom_preset()));
  // GPT-Neo (layers 0 and 2 global, 1 and 3 a ring of 10, unscaled) and Granite's multipliers
  TransformerConfig neo = small(preset("gpt_neo")); neo.layers = 4;
  finish_preset("gpt_neo", neo); add("gpt_neo", neo);
  TransformerConfig granite = l; granite.embed_multiplier = 3; granite.residual_multiplier = 0.4;
  granite.logit_divisor = 2.5; granite.attention_scale = 0.09; add("granite multipliers", granite);
  return out;
}

std::vector<std::int64_t> random_tokens(std::size_t n, std::size_t vocab, std::uint64_t seed) {
  Generator gen(seed);
  std::vector<std::int64_t> t(n);
  for (auto& v : t) v = std::int64_t(gen.integer(vocab));
  return t;
}

Indices as_row(const std::vector<std::int64_t>& ids, std::size_t begin, std::size_t end) {
  Indices t = Indices::from_shape({std::size_t(1), end - begin});
  for (std::size_t i = begin; i < end; ++i) t(0, i - begin) = ids[i];
  return t;
}

// max |a - b| / max |b| over one row of V logits
template <class T>
double row_error(const T* a, const T* b, std::size_t V) {
  double err = 0, scale = 0;
  for (std::size_t v = 0; v < V; ++v) {
    err = std::max(err, std::abs(double(a[v]) - double(b[v])));
    scale = std::max(scale, std::abs(double(b[v])));
  }
  return err / scale;
}

// Feeds `ids` to the model through a fresh cache: the first `prompt` positions in chunks
// of `chunk`, then one at a time. Returns the worst row error against `full` (1, N, V).
template <class T>
double cached_error(Transformer<T>& model, const std::vector<std::int64_t>& ids,
                    const Tensor<T>& full, std::size_t prompt, std::size_t chunk) {
  const std::size_t V = model.config().vocab;
  KVCacheSet<T> caches(model.config(), 1, ids.size());
  double worst = 0;
  std::size_t pos = 0;
  while (pos < ids.size()) {
    const std::size_t n = pos < prompt ? std::min(chunk, prompt - pos) : 1;
    const Tensor<T> logits = model.forward(as_row(ids, pos, pos + n), caches);
    REQUIRE(logits.shape() == Shape{1, n, V});
    for (std::size_t r = 0; r < n; ++r)
      worst = std::max(worst, row_error(logits.data() + r * V, full.data() + (pos + r) * V, V));
    pos += n;
  }
  CHECK(caches.length() == ids.size());
  return worst;
}

template <class T>
void check_every_variant(double tolerance) {
  for (const auto& [name, config] : variants()) {
    INFO(name);
    Transformer<T> model(config);
    spread_attention_biases(model, 31);
    const std::vector<std::int64_t> ids = random_tokens(config.context, config.vocab, 77);
    NoGradGuard no_grad;
    const Tensor<T> full = model.forward(as_row(ids, 0, ids.size()));
    // chunk 1 all along: every position through the decode path
    CHECK(cached_error(model, ids, full, ids.size(), 1) <= tolerance);
    CHECK(cached_error(model, ids, full, 13, 3) <= tolerance);   // chunks of 3, then decode
    CHECK(cached_error(model, ids, full, 13, 13) <= tolerance);  // one-shot prefill of 13
    CHECK(cached_error(model, ids, full, 20, 20) <= tolerance);  // the whole sequence at once
  }
}

}  // namespace

TEST_CASE("kv cache: cached logits equal the full forward at every position (double)", "[kv_cache]") {
  check_every_variant<double>(1e-12);
}

TEST_CASE("kv cache: cached logits equal the full forward at every position (float)", "[kv_cache]") {
  check_every_variant<float>(1e-5);
}

TEST_CASE("kv cache: a chunk attends with grad on, its gradient reaching the chunk", "[kv_cache]") {
  // Tq = 1 with grad on goes through attention(), not the decode kernel; same logits.
  TransformerConfig c = small(llama_preset());
  c.kv_heads = 2;
  Transformer<double> model(c);
  const std::vector<std::int64_t> ids = random_tokens(10, c.vocab, 3);
  Tensor<double> full;
  {
    NoGradGuard no_grad;
    full = model.forward(as_row(ids, 0, 10));
  }
  KVCacheSet<double> caches(c, 1, 10);
  {
    NoGradGuard no_grad;
    model.forward(as_row(ids, 0, 9), caches);
  }
  const Tensor<double> last = model.forward(as_row(ids, 9, 10), caches);
  CHECK(row_error(last.data(), full.data() + 9 * c.vocab, c.vocab) <= 1e-12);
  CHECK(last.requires_grad());
  Tape<double>::active().clear();
}

TEST_CASE("kv cache: a window model keeps going past its context", "[kv_cache]") {
  // RoPE's and ALiBi's scores depend on relative positions only and a window of 5 sees the
  // last 5 keys: so position p > context of a long run must give the logits of a full
  // forward over the last `context` tokens (rounding differs: the angles and biases are
  // other numbers).
  TransformerConfig rope = small(llama_preset());
  rope.kv_heads = 2;
  rope.window = 5;
  rope.layers = 1;  // with L layers the receptive field is L*(window-1)+1 <= context
  TransformerConfig alibi = rope;
  alibi.positions = PositionKind::alibi;
  for (const TransformerConfig& c : {rope, alibi}) {
    INFO(to_string(c.positions));
    REQUIRE(past_context_ok(c));
    Transformer<double> model(c);
    const std::size_t N = 3 * c.context + 7;
    const std::vector<std::int64_t> ids = random_tokens(N, c.vocab, 5);
    NoGradGuard no_grad;
    KVCacheSet<double> caches(c, 1, N);
    CHECK(caches[0].capacity() == 5);  // a ring of the window, however long the run
    const double* store = caches[0].key_store().data();
    double worst = 0;
    for (std::size_t p = 0; p < N; ++p) {
      const Tensor<double> step = model.forward(as_row(ids, p, p + 1), caches);
      if (p + 1 < c.context) continue;
      const Tensor<double> ref = model.forward(as_row(ids, p + 1 - c.context, p + 1));
      worst = std::max(worst, row_error(step.data(), ref.data() + (c.context - 1) * c.vocab, c.vocab));
    }
    CHECK(worst <= 1e-10);
    CHECK(caches[0].key_store().data() == store);  // never reallocated
    // chunks longer than the context are fine past it too: the ring takes their last 5
    const Tensor<double> last = model.forward(as_row(ids, N - 1, N), caches);  // position N
    KVCacheSet<double> chunked(c, 1, N);
    Tensor<double> logits;
    for (std::size_t p = 0; p < N; p += 30) logits = model.forward(as_row(ids, p, std::min(N, p + 30)), chunked);
    logits = model.forward(as_row(ids, N - 1, N), chunked);
    CHECK(row_error(logits.data(), last.data(), c.vocab) <= 1e-12);
    CHECK(caches.bytes() == 2 * 1 * 5 * 2 * 4 * sizeof(double));
  }
}

TEST_CASE("kv cache: a full-attention model stops at its context", "[kv_cache]") {
  TransformerConfig c = small(gpt2_preset());
  Transformer<float> model(c);
  REQUIRE_FALSE(past_context_ok(c));
  KVCacheSet<float> caches(c, 1, c.context);
  NoGradGuard no_grad;
  model.forward(as_row(random_tokens(20, c.vocab, 1), 0, 20), caches);
  require_shape_error([&] { model.forward(as_row({1}, 0, 1), caches); },
                      {"Transformer", "positions 20..20 go past the context of 20"});
  // RoPE without a window stops too: full attention at positions it was not trained for
  TransformerConfig r = small(llama_preset());
  CHECK_FALSE(past_context_ok(r));
  r.window = 4;
  CHECK(past_context_ok(r));
  TransformerConfig lw = c;
  lw.window = 4;
  CHECK_FALSE(past_context_ok(lw));  // learned positions end at the table's last row
}

TEST_CASE("kv cache: a ring refuses a query that looks further back than it holds",
          "[kv_cache]") {
  AttentionSpec layer = causal_spec(2, 1, 3);
  layer.head_dim = 4;
  KVCache<double> ring(1, layer, 8);
  CHECK(ring.capacity() == 3);
  Generator gen(5);
  NoGradGuard no_grad;
  for (std::size_t p = 0; p < 5; ++p)
    ring.append(Tensor<double>::randn({1, 1, 4}, gen), Tensor<double>::randn({1, 1, 4}, gen));
  const Tensor<double> q = Tensor<double>::randn({1, 1, 8}, gen);
  CHECK(ring.decode(q, layer).shape() == Shape{1, 1, 8});
  AttentionSpec full = layer, wider = layer;
  full.window = 0;
  wider.window = 4;
  for (const AttentionSpec& spec : {full, wider})
    CHECK_THROWS_WITH(ring.decode(q, spec), Catch::Contains("reaches further back than this "
                                                            "cache's window=3"));
  // a full cache holds every key: any window reads a part of it
  KVCache<double> all(1, full, 8);
  all.append(Tensor<double>::randn({1, 1, 4}, gen), Tensor<double>::randn({1, 1, 4}, gen));
  CHECK_NOTHROW(all.decode(q, layer));
}

TEST_CASE("kv cache: a wrapped ring decodes what attention() computes", "[kv_cache]") {
  // Keys and values appended one position at a time into a ring of capacity = window;
  // after the ring wraps, slot order is not position order. The decode of the newest
  // query must equal the last row of attention() over the whole sequence. Head widths of 3
  // and 11 and rings of 19 and 45 keys cover the kernel's vector blocks of keys and of the
  // head width (8 doubles), their scalar tails, and a run boundary inside a block.
  struct Case { std::size_t dh, N, window; };
  for (const Case& c : {Case{3, 11, 1}, Case{3, 11, 3}, Case{3, 11, 4}, Case{11, 45, 19},
                        Case{11, 45, 45}}) {
    for (std::size_t kv_heads : {1, 2, 4}) {
      const std::size_t window = c.window, dh = c.dh, N = c.N;
      INFO("dh " << dh << ", window " << window << ", kv_heads " << kv_heads);
      const std::size_t B = 2, H = 4;
      AttentionSpec spec;
      spec.heads = H;
      spec.kv_heads = kv_heads;
      spec.causal = true;
      spec.window = window;
      Generator gen(window * 10 + kv_heads);
      const Tensor<double> q = Tensor<double>::randn({B, N, H * dh}, gen);
      const Tensor<double> k = Tensor<double>::randn({B, N, kv_heads * dh}, gen);
      const Tensor<double> v = Tensor<double>::randn({B, N, kv_heads * dh}, gen);
      const Tensor<double> ref = attention(q, k, v, spec).out;  // (B, N, H*dh)
      KVCache<double> cache(B, kv_heads, dh, dh, N, window);
      REQUIRE(cache.capacity() == window);
      NoGradGuard no_grad;
      double worst = 0;
      for (std::size_t p = 0; p < N; ++p) {
        cache.append(slice(k, 1, p, p + 1), slice(v, 1, p, p + 1));
        const Tensor<double> y =
            attention_decode(slice(q, 1, p, p + 1), cache.key_store(), cache.value_store(),
                             cache.ring(), spec);
        const Tensor<double> want = slice(ref, 1, p, p + 1);
        for (std::size_t i = 0; i < y.size(); ++i)
          worst = std::max(worst, std::abs(y.data()[i] - want.data()[i]));
      }
      CHECK(worst <= 1e-13);
      CHECK(cache.ring().first_slot == N % window);  // it did wrap
    }
  }
}

TEST_CASE("kv cache: the decode kernel split over 2 threads equals attention()", "[kv_cache][threads]") {
  // 2 x 8 heads over 300 keys of 32: enough work for the kernel to use the thread pool,
  // each (batch item, kv head) pair writing its own block of the output.
  const std::size_t B = 2, H = 8, KV = 2, dh = 32, N = 300;
  AttentionSpec spec;
  spec.heads = H;
  spec.kv_heads = KV;
  spec.causal = true;
  spec.window = 200;
  Generator gen(12);
  const Tensor<float> q = Tensor<float>::randn({B, N, H * dh}, gen);
  const Tensor<float> k = Tensor<float>::randn({B, N, KV * dh}, gen);
  const Tensor<float> v = Tensor<float>::randn({B, N, KV * dh}, gen);
  const Tensor<float> want = slice(attention(q, k, v, spec).out, 1, N - 1, N);
  KVCache<float> cache(B, KV, dh, dh, N, spec.window);
  cache.append(k, v);  // 300 positions into a ring of 200: wrapped
  NoGradGuard no_grad;
  for (int threads : {1, 2}) {
    kernels::set_num_threads(threads);
    const Tensor<float> y = attention_decode(slice(q, 1, N - 1, N), cache.key_store(),
                                             cache.value_store(), cache.ring(), spec);
    kernels::set_num_threads(1);
    double worst = 0;
    for (std::size_t i = 0; i < y.size(); ++i)
      worst = std::max(worst, std::abs(double(y.data()[i]) - double(want.data()[i])));
    INFO("threads " << threads);
    CHECK(worst <= 1e-5);
  }
}

TEST_CASE("kv cache: linearised keys are in position order after a wrap", "[kv_cache]") {
  KVCache<double> cache(1, 1, 2, 2, 100, 3);
  for (int p = 0; p < 7; ++p) {
    Tensor<double> k = Tensor<double>::full({1, 1, 2}, double(p));
    cache.append(k, k);
  }
  // positions 4, 5, 6 held in slots 1, 2, 0
  CHECK(cache.count() == 3);
  CHECK(cache.first_position() == 4);
  const Tensor<double> keys = cache.keys();
  REQUIRE(keys.shape() == Shape{1, 3, 2});
  CHECK(keys.data()[0] == 4);
  CHECK(keys.data()[2] == 5);
  CHECK(keys.data()[4] == 6);
}

TEST_CASE("kv cache: the top-left mask trap fails the chunked-prefill check", "[kv_cache]") {
  // A chunk of Tq = 3 queries after 5 cached keys: bottom-right alignment (query r at
  // position 5 + r) reproduces rows 5..7 of the full causal attention; a top-left mask
  // (query r sees keys 0..r, PyTorch's is_causal for Tq < Tk) does not.
  Generator gen(4);
  const std::size_t N = 8, Tq = 3, d = 4;
  const Tensor<double> q = Tensor<double>::randn({1, N, d}, gen);
  const Tensor<double> k = Tensor<double>::randn({1, N, d}, gen);
  const Tensor<double> v = Tensor<double>::randn({1, N, d}, gen);
  const Tensor<double> full = scaled_dot_product_attention(q, k, v, causal_mask(N)).out;
  const Tensor<double> chunk_q = slice(q, 1, N - Tq, N);
  Mask top_left = Mask::from_shape({Tq, N});
  for (std::size_t r = 0; r < Tq; ++r)
    for (std::size_t j = 0; j < N; ++j) top_left(r, j) = j <= r;
  const Tensor<double> right = scaled_dot_product_attention(chunk_q, k, v, causal_mask(Tq, N)).out;
  const Tensor<double> left = scaled_dot_product_attention(chunk_q, k, v, top_left).out;
  const Tensor<double> want = slice(full, 1, N - Tq, N);
  double right_err = 0, left_err = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    right_err = std::max(right_err, std::abs(right.data()[i] - want.data()[i]));
    left_err = std::max(left_err, std::abs(left.data()[i] - want.data()[i]));
  }
  CHECK(right_err <= 1e-14);
  CHECK(left_err > 1e-2);  // the trap: far outside any tolerance the check allows
}

TEST_CASE("kv cache: bad arguments name the op and the shapes", "[kv_cache]") {
  KVCache<float> cache(1, 2, 4, 4, 3);
  const Tensor<float> k = Tensor<float>::zeros({1, 2, 8});
  cache.append(k, k);
  require_shape_error([&] { cache.append(k, k); },
                      {"KVCache", "appending 2 positions to the 2 held would exceed the capacity of 3"});
  require_shape_error([&] { cache.append(Tensor<float>::zeros({1, 1, 6}), k); },
                      {"KVCache", "(1,1,6)"});
  AttentionSpec spec;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.causal = true;
  NoGradGuard no_grad;
  require_shape_error([&] {
    attention_decode(Tensor<float>::zeros({1, 2, 16}), cache.key_store(), cache.value_store(),
                     cache.ring(), spec);
  }, {"attention_decode", "Tq=2", "(1,2,16)"});
  AttentionSpec bad = spec;
  bad.kv_heads = 3;
  require_shape_error([&] {
    attention_decode(Tensor<float>::zeros({1, 1, 16}), cache.key_store(), cache.value_store(),
                     cache.ring(), bad);
  }, {"attention_decode", "heads=4 is not divisible by kv_heads=3"});
}

TEST_CASE("kv cache: decode refuses to run where a gradient is wanted", "[kv_cache]") {
  KVCache<double> cache(1, 1, 2, 2, 4);
  const Tensor<double> k = Tensor<double>::ones({1, 1, 2});
  cache.append(k, k);
  AttentionSpec spec;
  spec.causal = true;
  const Tensor<double> q = Tensor<double>::ones({1, 1, 2}, true);
  require_shape_error([&] {
    attention_decode(q, cache.key_store(), cache.value_store(), cache.ring(), spec);
  }, {"attention_decode", "inference only"});
  NoGradGuard no_grad;
  const Tensor<double> y = attention_decode(q, cache.key_store(), cache.value_store(), cache.ring(), spec);
  CHECK(y.data()[0] == 1.0);  // the one value
}
