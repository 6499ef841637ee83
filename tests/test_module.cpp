// nn/module: hierarchical names, registration order, counts, zero_grad, shared handles.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "helpers.hpp"
#include "nn/module.hpp"
#include "nn/transformer.hpp"

using namespace tapegrad;
using tapegrad::test::require_shape_error;

namespace {

struct Leaf : Module<double> {
  Tensor<double> w, b;
  Leaf() {
    w = register_parameter("w", Tensor<double>::ones({2, 3}));
    b = register_parameter("b", Tensor<double>::zeros({3}));
  }
};

struct Tree : Module<double> {
  Leaf first, second;
  Tensor<double> scale;
  Tree() {
    register_module("first", first);
    scale = register_parameter("scale", Tensor<double>::full({}, 2.0));
    register_module("blocks.0", second);
  }
};

std::vector<std::string> names_of(const std::vector<NamedParameter<double>>& named) {
  std::vector<std::string> names;
  for (const auto& p : named) names.push_back(p.name);
  return names;
}

}  // namespace

TEST_CASE("module names are hierarchical and in registration order", "[module]") {
  Tree tree;
  const std::vector<std::string> expected{"first.w", "first.b", "scale", "blocks.0.w",
                                          "blocks.0.b"};
  CHECK(names_of(tree.named_parameters()) == expected);
  CHECK(tree.parameters().size() == 5);
  // 6 + 3 + 1 + 6 + 3
  CHECK(tree.parameter_count() == 19);
  for (const auto& p : tree.named_parameters()) CHECK(p.tensor.requires_grad());
}

TEST_CASE("module parameters are shared handles, not copies", "[module]") {
  Tree tree;
  tree.parameter("blocks.0.w").value()(1, 2) = 7.0;
  CHECK(tree.second.w.value()(1, 2) == 7.0);
  Tree copy = tree;  // a copied module shares the parameters, as a copied Tensor does
  copy.parameter("scale").value()() = -1.0;
  CHECK(tree.scale.value()() == -1.0);
  CHECK(tree.has_parameter("first.b"));
  CHECK_FALSE(tree.has_parameter("first"));
  require_shape_error([&] { tree.parameter("first.x"); },
                      {"Module::parameter", "first.x", "blocks.0.b"});
}

TEST_CASE("module zero_grad drops every gradient", "[module]") {
  Tree tree;
  Tensor<double> loss = sum(matmul(tree.first.w, tree.second.b + tree.first.b) * tree.scale);
  loss.backward();
  CHECK(tree.first.w.has_grad());
  CHECK(tree.scale.has_grad());
  // d loss / d scale = sum(w @ (b2 + b1)) = 0 for zero biases; d/d b1 = scale * sum of w's rows
  CHECK(tree.first.b.grad()(0) == Approx(4.0));
  tree.zero_grad();
  for (const auto& p : tree.named_parameters()) CHECK_FALSE(p.tensor.has_grad());
}

TEST_CASE("module registration rejects bad and duplicate names", "[module]") {
  struct Bad : Module<float> {
    void add(const std::string& name) { register_parameter(name, Tensor<float>::zeros({1})); }
    void child(const std::string& name, const Module<float>& m) { register_module(name, m); }
  };
  Bad bad;
  bad.add("x");
  require_shape_error([&] { bad.add("x"); }, {"Module::register_parameter", "'x'", "already"});
  require_shape_error([&] { bad.add(""); }, {"Module::register_parameter"});
  require_shape_error([&] { bad.add("a.b"); }, {"Module::register_parameter", "a.b"});
  Bad other;
  other.add("x");
  require_shape_error([&] { bad.child("blocks..0", other); }, {"Module::register_module"});
  bad.child("sub", other);
  CHECK(bad.has_parameter("sub.x"));
  require_shape_error([&] { bad.child("sub", other); }, {"Module::register_module", "sub.x", "already"});
  CHECK(bad.named_parameters().size() == 2);  // a rejected name is not added
  CHECK(bad.parameter("sub.x").defined());
}

TEST_CASE("Transformer parameter names and count match a hand count", "[module]") {
  TransformerConfig c;
  c.vocab = 5;
  c.context = 4;
  c.d_model = 8;
  c.heads = 2;
  c.layers = 1;
  c.mlp_ratio = 2;
  Transformer<float> model(c);
  const std::vector<std::string> expected{
      "tok_emb.weight",         "pos_emb.weight",
      "blocks.0.norm1.weight",  "blocks.0.norm1.bias",
      "blocks.0.attn.Wq",       "blocks.0.attn.Wk",
      "blocks.0.attn.Wv",       "blocks.0.attn.Wo",
      "blocks.0.norm2.weight",  "blocks.0.norm2.bias",
      "blocks.0.mlp.fc.weight", "blocks.0.mlp.fc.bias",
      "blocks.0.mlp.proj.weight", "blocks.0.mlp.proj.bias",
      "norm_f.weight",          "norm_f.bias",
      "head.weight"};
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) names.push_back(p.name);
  CHECK(names == expected);
  // tok 5*8 = 40, pos 4*8 = 32; block: norm1 16, attn 4*64 = 256, norm2 16,
  // fc 8*16 + 16 = 144, proj 16*8 + 8 = 136 -> 568; norm_f 16; head 8*5 = 40.
  CHECK(model.parameter_count() == 40 + 32 + 568 + 16 + 40);
  CHECK(model.parameter("blocks.0.mlp.fc.weight").shape() == Shape{8, 16});
  CHECK(model.parameter("head.weight").shape() == Shape{8, 5});

  c.norm = NormKind::rms_norm;  // no norm biases: a block has 568 - 2 * 8, norm_f 8
  c.layers = 2;
  Transformer<float> rms(c);
  CHECK(rms.parameter_count() == 40 + 32 + 2 * 552 + 8 + 40);
  CHECK_FALSE(rms.has_parameter("norm_f.bias"));
  CHECK(rms.has_parameter("blocks.1.attn.Wo"));
}
