// nn/transformer and nn/block with the modern parts: one Llama block against PyTorch
// float64 (tests/make_llama_fixtures.py), gradcheck of the whole model for every
// configuration switch, the fused attention path against the composed one inside the
// model, and tied embeddings.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "nn/transformer.hpp"
#include "ops/kernels/parallel.hpp"
#include "ops/norm.hpp"
#include "ops/reduce.hpp"
#include "reference.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

const char* kSet = "llama_block";

void copy_into(const Tensor<double>& parameter, const Array<double>& value) {
  REQUIRE(parameter.shape_string() == shape_str(Shape(value.shape().begin(), value.shape().end())));
  Tensor<double> p = parameter;
  std::copy(value.begin(), value.end(), p.value().begin());
}

struct BlockCase {
  const char* name;
  std::size_t heads, kv_heads, head_dim, window;
  RopeStyle style;
  bool qk_norm;
};

// The fixture's parameter files by the block's parameter names.
std::vector<std::pair<std::string, std::string>> block_parameters(bool qk_norm) {
  std::vector<std::pair<std::string, std::string>> names = {
      {"norm1.weight", "norm1"}, {"attn.Wq", "Wq"}, {"attn.Wk", "Wk"}, {"attn.Wv", "Wv"},
      {"attn.Wo", "Wo"}, {"norm2.weight", "norm2"}, {"mlp.gate.weight", "gate"},
      {"mlp.up.weight", "up"}, {"mlp.down.weight", "down"}};
  if (qk_norm) {
    names.push_back({"attn.q_norm.weight", "q_norm"});
    names.push_back({"attn.k_norm.weight", "k_norm"});
  }
  return names;
}

void check_block(const BlockCase& bc, AttentionPath path) {
  const Array<double> x0 = load_fixture(kSet, bc.name, "x");
  const std::size_t D = x0.shape()[2];
  BlockConfig c;
  c.attention.d_model = D;
  c.attention.spec.heads = bc.heads;
  c.attention.spec.kv_heads = bc.kv_heads;
  c.attention.spec.head_dim = bc.head_dim;
  c.attention.spec.window = bc.window;
  c.attention.qk_norm = bc.qk_norm;
  RopeSpec rope;
  rope.style = bc.style;
  c.attention.rope = rope;
  c.mlp_hidden = load_fixture(kSet, bc.name, "gate").shape()[1];
  c.mlp = MlpKind::swiglu;
  c.mlp_bias = false;
  c.norm = NormKind::rms_norm;
  Generator gen(0);
  Block<double> block(c, gen);
  block.attention().set_path(path);
  const auto names = block_parameters(bc.qk_norm);
  REQUIRE(block.named_parameters().size() == names.size());
  for (const auto& [param, file] : names) copy_into(block.parameter(param), load_fixture(kSet, bc.name, file));

  Tensor<double> x(x0, true);
  Tensor<double> y = block(x);
  check_close("y", y.value(), load_fixture(kSet, bc.name, "y"), 1e-10);
  sum(y * Tensor<double>(load_fixture(kSet, bc.name, "gy"))).backward();
  check_close("dx", x.grad(), load_fixture(kSet, bc.name, "dx"), 1e-10);
  for (const auto& [param, file] : names) {
    INFO(param);
    check_close("d" + file, block.parameter(param).grad(), load_fixture(kSet, bc.name, "d" + file), 1e-10);
  }
}

TransformerConfig tiny(TransformerConfig c) {
  c.vocab = 7;
  c.context = 6;
  c.d_model = 8;
  c.heads = 2;
  c.layers = 2;
  c.mlp_ratio = 2;
  c.mlp_multiple = 4;
  c.seed = 5;
  return c;
}

// Gemma 2's and BLOOM's parts, each on its own, and the two presets whole. Norm gains and
// gemma's w start where a missing part could hide (1 and 0); the gradcheck moves through
// them anyway, as every parameter is an input.
template <class Add>
void add_gemma2_and_bloom_parts(const TransformerConfig& g, const TransformerConfig& l, Add add) {
  TransformerConfig gn = l; gn.norm = NormKind::gemma; add("gemma norm", gn);
  TransformerConfig en = g; en.embed_norm = true; add("gpt2 + embed_norm", en);
  TransformerConfig es = l; es.embed_scale = true; add("embed_scale", es);
  TransformerConfig est = es; est.tie_embeddings = true; add("embed_scale + tied head", est);
  TransformerConfig pn = l; pn.post_norms = true; add("post_norms", pn);
  TransformerConfig pa = g; pa.post_norms = true; pa.mlp = MlpKind::none;
  add("post_norms attention-only", pa);
  TransformerConfig gg = g; gg.mlp = MlpKind::geglu; add("gpt2 + geglu (biases)", gg);
  TransformerConfig wp = l; wp.window = 2; wp.window_pattern = 2; add("window 2 on layer 0 only", wp);
  TransformerConfig qs = l; qs.query_scale = 0.8; add("query_scale", qs);
  for (const char* name : {"gemma2", "bloom"}) {
    TransformerConfig p = tiny(preset(name));
    finish_preset(name, p);
    add(std::string(name) + " preset", p);
  }
}

// Every switch of the configuration, each on its own over the gpt2 and llama presets.
std::vector<std::pair<std::string, TransformerConfig>> switches() {
  std::vector<std::pair<std::string, TransformerConfig>> out;
  TransformerConfig g = tiny(gpt2_preset()), l = tiny(llama_preset());
  l.heads = 4;
  l.kv_heads = 2;
  auto add = [&](const std::string& name, TransformerConfig c) { out.push_back({name, c}); };
  add("gpt2", g);
  add("llama (gqa 4/2)", l);
  TransformerConfig m = l; m.kv_heads = 1; add("mqa", m);
  TransformerConfig w = l; w.window = 2; add("window 2", w);
  TransformerConfig q = l; q.qk_norm = true; add("qk_norm", q);
  TransformerConfig t = l; t.tie_embeddings = true; add("tied head", t);
  TransformerConfig i = l; i.rope_style = RopeStyle::interleaved; add("rope interleaved", i);
  TransformerConfig lin = l; lin.rope_scaling = RopeScaling::linear; lin.rope_factor = 2; add("rope linear", lin);
  TransformerConfig ntk = l; ntk.head_dim = 4; ntk.rope_scaling = RopeScaling::ntk; ntk.rope_factor = 3; add("rope ntk", ntk);
  TransformerConfig l3 = l; l3.rope_scaling = RopeScaling::llama3; l3.rope_factor = 4;
  l3.rope_original_context = 4; add("rope llama3", l3);
  TransformerConfig y = l; y.rope_scaling = RopeScaling::yarn; y.rope_factor = 4;
  y.rope_original_context = 4; add("rope yarn", y);
  TransformerConfig hd = l; hd.head_dim = 6; add("head_dim 6 (heads*head_dim != d_model)", hd);
  TransformerConfig none = g; none.positions = PositionKind::none; add("no positions", none);
  TransformerConfig sw = g; sw.mlp = MlpKind::swiglu; add("gpt2 + swiglu (biases)", sw);
  TransformerConfig gb = g; gb.attn_qkv_bias = true; gb.attn_out_bias = true;
  add("gpt2 + attention biases", gb);
  TransformerConfig qb = l; qb.attn_qkv_bias = true; add("llama + q/k/v biases (qwen2)", qb);
  TransformerConfig us = l; us.attention_scale = 1.0; add("llama unscaled", us);
  TransformerConfig ao = g; ao.mlp = MlpKind::none; add("gpt2 attention-only", ao);
  TransformerConfig lo = l; lo.mlp = MlpKind::none; add("llama attention-only", lo);
  // caps small enough that the tiny model's scores and logits reach the bend of tanh
  TransformerConfig a = l; a.positions = PositionKind::alibi; a.attn_softcap = 0.05;
  a.final_softcap = 0.1; add("alibi + both soft-caps", a);
  add_gemma2_and_bloom_parts(g, l, add);
  return out;
}

}  // namespace

TEST_CASE("llama block: RMSNorm, GQA with RoPE, SwiGLU equal PyTorch float64", "[transformer][llama]") {
  const BlockCase cases[] = {
      {"gqa_rope_half", 4, 2, 6, 0, RopeStyle::half, false},
      {"mqa_rope_interleaved_window_qknorm", 3, 1, 4, 3, RopeStyle::interleaved, true},
  };
  for (const BlockCase& bc : cases)
    for (AttentionPath path : {AttentionPath::fused, AttentionPath::composed}) {
      INFO(bc.name << (path == AttentionPath::fused ? " fused" : " composed"));
      check_block(bc, path);
    }
}

TEST_CASE("swiglu: down(silu(gate x) * up x) equals PyTorch float64", "[transformer][swiglu]") {
  Generator gen(0);
  SwiGLU<double> mlp(6, 10, false, gen);
  copy_into(mlp.parameter("gate.weight"), load_fixture(kSet, "swiglu", "gate"));
  copy_into(mlp.parameter("up.weight"), load_fixture(kSet, "swiglu", "up"));
  copy_into(mlp.parameter("down.weight"), load_fixture(kSet, "swiglu", "down"));
  Tensor<double> x(load_fixture(kSet, "swiglu", "x"), true);
  Tensor<double> y = mlp(x);
  check_close("y", y.value(), load_fixture(kSet, "swiglu", "y"), 1e-10);
  sum(y * Tensor<double>(load_fixture(kSet, "swiglu", "gy"))).backward();
  check_close("dx", x.grad(), load_fixture(kSet, "swiglu", "dx"), 1e-10);
  for (const char* p : {"gate", "up", "down"})
    check_close(p, mlp.parameter(std::string(p) + ".weight").grad(),
                load_fixture(kSet, "swiglu", std::string("d") + p), 1e-10);
}

TEST_CASE("transformer: gradcheck of the loss for every configuration switch", "[transformer][gradcheck]") {
  const Indices tokens = random_tokens(2, 5, 7, 11), targets = random_tokens(2, 5, 7, 12);
  for (auto& [name, config] : switches()) {
    INFO(name);
    Transformer<double> model(config);
    spread_attention_biases(model, 43);
    TensorFunction<double> f = [&](const std::vector<Tensor<double>>&) {
      return model.loss(tokens, targets);
    };
    GradcheckOptions options;
    options.max_elements = 8;
    options.seed = 3;
    const GradcheckResult r = gradcheck<double>(f, model.parameters(), options);
    CHECK(r.passed);
  }
}

TEST_CASE("transformer: the fused attention path equals the composed one inside the model", "[transformer]") {
  const Indices tokens = random_tokens(3, 6, 7, 21), targets = random_tokens(3, 6, 7, 22);
  for (int threads : {1, 2}) {
    kernels::set_num_threads(threads);
    for (auto& [name, config] : switches()) {
      INFO(name << ", " << threads << " threads");
      Transformer<double> fused(config), composed(config);
      spread_attention_biases(fused, 41);
      spread_attention_biases(composed, 41);
      fused.set_attention_path(AttentionPath::fused);  // the default would be flash
      composed.set_attention_path(AttentionPath::composed);
      fused.loss(tokens, targets).backward();
      composed.loss(tokens, targets).backward();
      const auto& a = fused.named_parameters();
      const auto& b = composed.named_parameters();
      for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(a[i].name);
        const Array<double> got = a[i].tensor.grad(), want = b[i].tensor.grad();
        // bk without RoPE adds q.bk to a whole row of scores, which the softmax ignores: its
        // gradient is zero but for rounding, which the two paths round differently
        if (xt::amax(xt::abs(want))() < 1e-12)
          CHECK(xt::amax(xt::abs(got))() < 1e-12);
        else
          check_close(a[i].name, got, want, 1e-12);
      }
    }
  }
  kernels::set_num_threads(1);
}

TEST_CASE("transformer: the gpt2 preset is the GPT-2 model and the llama preset has no gpt2 parts", "[transformer]") {
  Transformer<float> g(tiny(gpt2_preset()));
  CHECK(g.has_parameter("pos_emb.weight"));
  CHECK(g.has_parameter("blocks.0.norm1.bias"));
  CHECK(g.has_parameter("blocks.0.mlp.fc.bias"));
  CHECK(g.has_parameter("head.weight"));
  TransformerConfig lc = tiny(llama_preset());
  lc.heads = 4;
  finish_preset("llama", lc);
  Transformer<float> l(lc);
  CHECK_FALSE(l.has_parameter("pos_emb.weight"));
  CHECK_FALSE(l.has_parameter("blocks.0.norm1.bias"));
  CHECK(l.has_parameter("blocks.0.mlp.gate.weight"));
  CHECK_FALSE(l.has_parameter("blocks.0.mlp.gate.bias"));
  CHECK(l.parameter("blocks.0.attn.Wk").shape_string() == "(8,4)");  // 2 kv heads of width 2
  CHECK(l.parameter("blocks.0.attn.Wq").shape_string() == "(8,8)");
}

TEST_CASE("transformer: a tied head reuses tok_emb and its gradient sums both uses", "[transformer]") {
  TransformerConfig c = tiny(llama_preset());
  c.tie_embeddings = true;
  Transformer<double> tied(c);
  CHECK_FALSE(tied.has_parameter("head.weight"));
  const Indices tokens = random_tokens(2, 4, 7, 31), targets = random_tokens(2, 4, 7, 32);
  // The same model untied, with its head set to tok_emb^T: same loss; the tied gradient
  // is the untied tok_emb gradient plus the untied head's gradient transposed.
  c.tie_embeddings = false;
  Transformer<double> untied(c);
  for (const auto& p : tied.named_parameters()) copy_into(untied.parameter(p.name), p.tensor.value());
  Array<double> emb_t = xt::transpose(tied.parameter("tok_emb.weight").value());
  copy_into(untied.parameter("head.weight"), emb_t);
  Tensor<double> lt = tied.loss(tokens, targets);
  lt.backward();
  Tensor<double> lu = untied.loss(tokens, targets);
  CHECK(lt.item() == Approx(lu.item()).epsilon(1e-14));
  lu.backward();
  Array<double> want = untied.parameter("tok_emb.weight").grad() +
                       xt::transpose(untied.parameter("head.weight").grad());
  check_close("tok_emb grad", tied.parameter("tok_emb.weight").grad(), want, 1e-12);
}

TEST_CASE("transformer: final_softcap is c*tanh(l/c) of the uncapped logits, and NaN stays NaN",
          "[transformer]") {
  TransformerConfig c = tiny(llama_preset());
  c.positions = PositionKind::alibi;
  c.attn_softcap = 0.05;
  Transformer<double> plain(c);
  c.final_softcap = 0.01;  // below the logits' size, so that tanh bends them
  Transformer<double> capped(c);
  const Indices tokens = random_tokens(2, 6, 7, 31);
  NoGradGuard no_grad;
  const Tensor<double> l = plain.forward(tokens), capped_l = capped.forward(tokens);
  REQUIRE(capped_l.shape() == l.shape());
  double largest = 0;
  for (std::size_t i = 0; i < l.size(); ++i) {
    const double want = 0.01 * std::tanh(l.data()[i] / 0.01);
    CHECK(std::abs(capped_l.data()[i] - want) <= 1e-15);
    largest = std::max(largest, std::abs(l.data()[i]));
  }
  CHECK(largest > 0.02);  // some logits were bent, not passed through
  // a damaged checkpoint's NaN weight must not come out of either tanh as a finite logit
  Tensor<double> wq = capped.parameter("blocks.0.attn.Wq");
  std::fill(wq.value().begin(), wq.value().end(), std::nan(""));
  const Tensor<double> broken = capped.forward(tokens);
  for (std::size_t i = 0; i < broken.size(); ++i) CHECK(std::isnan(broken.data()[i]));
}

TEST_CASE("transformer: positions=alibi and attn_softcap reach every layer's attention",
          "[transformer]") {
  TransformerConfig none = tiny(llama_preset());
  none.positions = PositionKind::none;
  TransformerConfig alibi = none, capped = none;
  alibi.positions = PositionKind::alibi;
  capped.attn_softcap = 0.05;  // below the scores' size, so that tanh bends them
  Transformer<double> m_none(none), m_alibi(alibi), m_capped(capped);
  for (const Block<double>& b : m_alibi.blocks()) {
    CHECK(b.attention().spec().bias == PositionBias::alibi);
    CHECK(b.attention().spec().softcap == 0.0);
  }
  for (const Block<double>& b : m_capped.blocks()) {
    CHECK(b.attention().spec().bias == PositionBias::none);
    CHECK(b.attention().spec().softcap == 0.05);
  }
  // the same weights (neither has a positional table), so without the modifier the logits
  // would be the same bits; with it they move (ALiBi by 4e-4, the cap by 5e-7: the small
  // init's Wo and head scale every change in the scores down)
  const Indices tokens = random_tokens(2, 6, 7, 41);
  NoGradGuard no_grad;
  const Tensor<double> base = m_none.forward(tokens);
  for (Transformer<double>* m : {&m_alibi, &m_capped}) {
    INFO(to_string(m->config().positions) << ", attn_softcap " << m->config().attn_softcap);
    const Tensor<double> l = m->forward(tokens);
    double diff = 0;
    for (std::size_t i = 0; i < l.size(); ++i)
      diff = std::max(diff, std::abs(l.data()[i] - base.data()[i]));
    CHECK(diff > 1e-10);
  }
}

TEST_CASE("transformer: mlp=none builds attention-only blocks with exactly their parameters",
          "[transformer][attention_only]") {
  TransformerConfig c = tiny(gpt2_preset());
  c.mlp = MlpKind::none;
  Transformer<double> model(c);
  std::vector<std::string> expected = {"tok_emb.weight", "pos_emb.weight"};
  for (const char* layer : {"blocks.0.", "blocks.1."})
    for (const char* p : {"norm1.weight", "norm1.bias", "attn.Wq", "attn.Wk", "attn.Wv", "attn.Wo"})
      expected.push_back(std::string(layer) + p);
  for (const char* p : {"norm_f.weight", "norm_f.bias", "head.weight"}) expected.push_back(p);
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) names.push_back(p.name);
  CHECK(names == expected);
  // V*D + context*D + layers * (2D + 4 D*D) + 2D + D*V with V=7, context 6, D=8, 2 layers
  const std::size_t by_hand = 7 * 8 + 6 * 8 + 2 * (2 * 8 + 4 * 8 * 8) + 2 * 8 + 8 * 7;
  CHECK(model.parameter_count() == by_hand);
  CHECK(count_parameters(c).total() == by_hand);
  // the block is x + attn(norm1(x)) and nothing else: its output minus its input is the
  // attention's output on the normalised input
  Block<double>& block = model.blocks()[0];
  const Tensor<double> x = random<double>({1, 4, 8}, 3, false);
  const Tensor<double> attn = block.attention()(
      layer_norm(x, block.parameter("norm1.weight"), block.parameter("norm1.bias")));
  check_close((block(x) - x).value(), attn.value(), 1e-12);
  TransformerConfig moe = c;
  moe.experts = 2;
  CHECK_THROWS_WITH(moe.validate(), Catch::Contains("mlp=none") && Catch::Contains("experts=2"));
}

namespace {

// Each of `to`'s parameters set to `from`'s of the same name.
void copy_parameters(const Transformer<double>& from, Transformer<double>& to) {
  for (const NamedParameter<double>& p : to.named_parameters()) {
    Tensor<double> t = p.tensor;
    t.value() = from.parameter(p.name).value();
  }
}

double max_difference(const Array<double>& a, const Array<double>& b) {
  REQUIRE(a.shape() == b.shape());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a.data()[i] - b.data()[i]));
  return m;
}

Array<double> logits_on(Transformer<double>& model, AttentionPath path, const Indices& tokens) {
  NoGradGuard no_grad;
  model.set_attention_path(path);
  return model.forward(tokens).value();
}

}  // namespace

// Two identities that do not go through the code under test: the attention weights of a
// query sum to 1, so a bias on v reaches the output as bv @ Wo, a constant shift like bo;
// and a bias on k adds q.bk to every score of a query, which the softmax takes away unless
// RoPE turns k first.
TEST_CASE("transformer: attention biases: bv is bo's shift and bk matters only under RoPE", "[transformer]") {
  TransformerConfig g = tiny(gpt2_preset());
  g.attn_qkv_bias = g.attn_out_bias = true;
  const Indices tokens = random_tokens(2, 5, 7, 31);
  Transformer<double> a(g);
  spread_attention_biases(a, 51);
  Transformer<double> folded(g);
  copy_parameters(a, folded);
  for (std::size_t l = 0; l < g.layers; ++l) {
    const std::string at = "blocks." + std::to_string(l) + ".attn.";
    const Array<double>& bv = a.parameter(at + "bv").value();
    const Array<double>& Wo = a.parameter(at + "Wo").value();
    Array<double>& bo = folded.parameter(at + "bo").value();
    for (std::size_t j = 0; j < g.d_model; ++j)
      for (std::size_t i = 0; i < bv.size(); ++i) bo(j) += bv(i) * Wo(i, j);
    std::fill(folded.parameter(at + "bv").value().begin(), folded.parameter(at + "bv").value().end(), 0.0);
  }
  Transformer<double> no_bk(g);
  copy_parameters(a, no_bk);
  for (std::size_t l = 0; l < g.layers; ++l) {
    Array<double>& bk = no_bk.parameter("blocks." + std::to_string(l) + ".attn.bk").value();
    std::fill(bk.begin(), bk.end(), 0.0);
  }
  for (AttentionPath path : {AttentionPath::composed, AttentionPath::fused, AttentionPath::flash}) {
    const Array<double> ref = logits_on(a, path, tokens);
    check_close(logits_on(folded, path, tokens), ref, 1e-12);
    check_close(logits_on(no_bk, path, tokens), ref, 1e-12);
    // and the biases do change the model: without them the logits move
    Transformer<double> plain(tiny(gpt2_preset()));
    copy_parameters(a, plain);
    CHECK(max_difference(logits_on(plain, path, tokens), ref) > 1e-3);
  }
  // with RoPE, k's bias is turned with k and changes the scores
  TransformerConfig r = tiny(llama_preset());
  r.attn_qkv_bias = true;
  Transformer<double> rotated(r), rotated_no_bk(r);
  spread_attention_biases(rotated, 53);
  copy_parameters(rotated, rotated_no_bk);
  for (std::size_t l = 0; l < r.layers; ++l) {
    Array<double>& bk = rotated_no_bk.parameter("blocks." + std::to_string(l) + ".attn.bk").value();
    std::fill(bk.begin(), bk.end(), 0.0);
  }
  CHECK(max_difference(logits_on(rotated, AttentionPath::fused, tokens),
                       logits_on(rotated_no_bk, AttentionPath::fused, tokens)) > 1e-4);
}

TEST_CASE("transformer: zero attention biases leave a model's draws and logits as they were", "[transformer]") {
  const Indices tokens = random_tokens(2, 5, 7, 33);
  for (TransformerConfig c : {tiny(gpt2_preset()), tiny(llama_preset())}) {
    Transformer<double> plain(c);
    c.attn_qkv_bias = c.attn_out_bias = true;
    Transformer<double> biased(c);
    for (const NamedParameter<double>& p : plain.named_parameters())
      CHECK(max_difference(biased.parameter(p.name).value(), p.tensor.value()) == 0.0);
    CHECK(biased.named_parameters().size() == plain.named_parameters().size() + 4 * c.layers);
    CHECK(max_difference(logits_on(biased, AttentionPath::fused, tokens),
                         logits_on(plain, AttentionPath::fused, tokens)) == 0.0);
  }
}
