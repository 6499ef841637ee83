// The peers' reference (--dump): each workload's inputs and tapegrad's answer as an npz,
// which the peer programs load and check themselves against.
#include "shared.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "nn/io/npz.hpp"

namespace tapegrad_bench {

// An npz entry of `shape` holding v converted to R.
template <class R, class V>
NpzEntry entry(const std::string& name, const Shape& shape, const V& v) {
  xt::xarray<R> a = xt::xarray<R>::from_shape(shape);
  std::transform(v.begin(), v.end(), a.begin(), [](auto x) { return static_cast<R>(x); });
  return NpzEntry(name, std::move(a));
}

// The inputs of an MHA/GQA workload and tapegrad's output y (and gradients for <y, G>).
template <class R>
std::vector<NpzEntry> mha_reference(const bench::MhaWorkload& w) {
  const MhaShape& s = w.shape;
  const MhaInputs in = bench::make_mha_inputs(s);
  MhaTensors<R> t(in, s, w.backward);
  const Shape xs{s.B, s.T, s.D}, sq{s.D, s.D}, skv{s.D, s.kv_width()};
  std::vector<NpzEntry> e = {entry<R>("x", xs, in.x),   entry<R>("Wq", sq, in.Wq),
                             entry<R>("Wk", skv, in.Wk), entry<R>("Wv", skv, in.Wv),
                             entry<R>("Wo", sq, in.Wo),  entry<R>("G", xs, in.G)};
  Tensor<R> y = forward_of(t, s);
  e.push_back(entry<R>("y", xs, y.value()));
  if (!w.backward) return e;
  y.backward(tensor_of<R>(in.G, xs, false).value());
  e.push_back(entry<R>("dx", xs, t.x.grad()));
  e.push_back(entry<R>("dWq", sq, t.Wq.grad()));
  e.push_back(entry<R>("dWk", skv, t.Wk.grad()));
  e.push_back(entry<R>("dWv", skv, t.Wv.grad()));
  e.push_back(entry<R>("dWo", sq, t.Wo.grad()));
  return e;
}

// The batch (B, T+1), Transformer's initial parameters ("param.<name>", Linear weights (in, out)),
// and the first step's loss and gradients ("grad.<name>") on the whole batch.
// GPT-2 small: the parameters go to their own file, `weights_path`, written once (both GPT-2
// steps start from them) and summed into "param_sum"; each gradient is sampled
// ("grad_sample.<name>", bench::grad_sample_stride), so a reference is 15 MB, not 1 GB.
std::vector<NpzEntry> toygpt_reference(const bench::ToyGptShape& g, const std::string& weights_path) {
  Transformer<float> model(toygpt_config(g));
  const std::vector<std::int64_t> seq = bench::toygpt_tokens(g);
  std::vector<NpzEntry> e = {entry<std::int64_t>("tokens", {g.batch, g.T() + 1}, seq)};
  std::vector<NpzEntry> weights;
  double sum = 0;
  for (const auto& p : model.named_parameters()) {
    (g.hf_gpt2 ? weights : e).push_back(entry<float>("param." + p.name, p.tensor.shape(), p.tensor.value()));
    for (float v : p.tensor.value()) sum += double(v);
  }
  if (g.hf_gpt2) {
    e.push_back(entry<double>("param_sum", {}, std::vector<double>{sum}));
    if (!std::ifstream(weights_path)) save_npz(weights_path, weights);
    weights.clear();
  }
  const auto [tokens, targets] = next_token_batch(seq, g.batch, g.T());
  Tensor<float> loss = model.loss(tokens, targets);
  loss.backward();
  e.push_back(entry<double>("loss", {}, std::vector<double>{double(loss.item())}));
  for (const auto& p : model.named_parameters()) {
    if (!g.hf_gpt2) {
      e.push_back(entry<float>("grad." + p.name, p.tensor.shape(), p.tensor.grad()));
      continue;
    }
    const Array<float>& grad = p.tensor.grad();
    const std::size_t stride = bench::grad_sample_stride(grad.size());
    std::vector<float> sample;
    for (std::size_t i = 0; i < grad.size(); i += stride) sample.push_back(grad.data()[i]);
    e.push_back(entry<float>("grad_sample." + p.name, {sample.size()}, sample));
  }
  return e;
}

// One entry per parameter, "<prefix><name>", for each of the llama weights in `sets`.
void add_llama_weights(std::vector<NpzEntry>& e, const std::vector<bench::LlamaParam>& ps,
                       const std::vector<std::pair<std::string, const bench::LlamaWeights*>>& sets) {
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const Shape shape(ps[i].shape.begin(), ps[i].shape.end());
    for (const auto& [prefix, weights] : sets)
      e.push_back(entry<float>(prefix + ps[i].name, shape, (*weights)[i]));
  }
}

// The batch, the timed weights ("train.<name>"), the check weights ("check.<name>") and
// tapegrad's loss and gradients at the check weights on the first two sequences.
std::vector<NpzEntry> llama_reference() {
  const bench::LlamaShape g;
  const std::vector<bench::LlamaParam> ps = bench::llama_parameters(g);
  const bench::LlamaWeights train = bench::llama_train_weights(g, ps), check = bench::llama_check_weights(ps);
  const std::vector<std::int64_t> seq = bench::toygpt_tokens(g);
  std::vector<NpzEntry> e = {entry<std::int64_t>("tokens", {g.batch, g.context + 1}, seq)};
  const auto [loss, grads] = llama_loss_and_grads(g, check, seq, 2);
  e.push_back(entry<double>("check_loss", {}, std::vector<double>{loss}));
  add_llama_weights(e, ps, {{"train.", &train}, {"check.", &check}, {"check_grad.", &grads}});
  return e;
}

// The prompt and its next token (tokens, context of them), the timed weights
// ("train.<name>"), the check weights ("check.<name>") and tapegrad's logits of one cached
// step after the prompt at the check weights ("check_logits", vocab).
std::vector<NpzEntry> decode_reference(std::size_t context) {
  const bench::LlamaShape g = bench::decode_shape(context);
  const std::vector<bench::LlamaParam> ps = bench::llama_parameters(g);
  const bench::LlamaWeights train = bench::llama_train_weights(g, ps), check = bench::llama_check_weights(ps);
  const std::vector<std::int64_t> tokens = bench::decode_tokens(g);
  std::vector<NpzEntry> e = {entry<std::int64_t>("tokens", {g.context}, tokens),
                             entry<double>("check_logits", {g.vocab}, decode_logits(g, check, tokens))};
  add_llama_weights(e, ps, {{"train.", &train}, {"check.", &check}});
  return e;
}

// The batch, the timed weights ("train.<name>", run_moe's initial model), the check weights
// ("check.<name>") and, at those on the first two sequences, tapegrad's training loss
// ("check_loss": LM + aux + z, with each part beside it) and its gradients.
std::vector<NpzEntry> moe_reference() {
  const bench::LlamaShape g;
  const std::vector<std::int64_t> seq = bench::toygpt_tokens(g);
  std::vector<NpzEntry> e = {entry<std::int64_t>("tokens", {g.batch, g.context + 1}, seq)};
  Transformer<float> train(moe_config(g)), check(moe_config(g));
  set_check_weights(check);
  const auto [tokens, targets] = next_token_batch(seq, 2, g.context);
  const TrainingLoss<float> loss = check.training_loss(tokens, targets);
  loss.total.backward();
  const std::pair<const char*, const Tensor<float>*> parts[] = {
      {"check_loss", &loss.total}, {"check_lm_loss", &loss.lm}, {"check_aux_loss", &loss.aux},
      {"check_z_loss", &loss.z}};
  for (const auto& [key, part] : parts)
    e.push_back(entry<double>(key, {}, std::vector<double>{double(part->item())}));
  for (const auto& p : train.named_parameters())
    e.push_back(entry<float>("train." + p.name, p.tensor.shape(), p.tensor.value()));
  for (const auto& p : check.named_parameters()) {
    e.push_back(entry<float>("check." + p.name, p.tensor.shape(), p.tensor.value()));
    e.push_back(entry<float>("check_grad." + p.name, p.tensor.shape(), p.tensor.grad()));
  }
  return e;
}

// q, k, v, dO and tapegrad's flash output and gradients.
std::vector<NpzEntry> flash_reference(const bench::FlashShape& s) {
  const bench::FlashInputs in = bench::make_flash_inputs(s);
  FlashTensors t(s, in);
  const Tensor<float> out = t.step();
  const Shape xs{s.B, s.T, s.width()};
  return {entry<float>("q", xs, in.q),          entry<float>("k", xs, in.k),
          entry<float>("v", xs, in.v),          entry<float>("dO", xs, in.dO),
          entry<float>("out", xs, out.value()), entry<float>("dq", xs, t.q.grad()),
          entry<float>("dk", xs, t.k.grad()),   entry<float>("dv", xs, t.v.grad())};
}

// The reference of a.workload written to a.dump; false for a workload the peers do not run.
bool dump_reference(const Args& a) {
  bench::MhaWorkload w;
  std::vector<NpzEntry> e;
  if (bench::parse_mha(a.workload, w) || bench::parse_gqa(a.workload, w))
    e = w.is_double ? mha_reference<double>(w) : mha_reference<float>(w);
  else if (a.workload == "toygpt_step")
    e = toygpt_reference(bench::ToyGptShape{}, "");
  else if (const bench::ToyGptShape g = bench::parse_gpt2(a.workload); g.batch != 0)
    e = toygpt_reference(g, (std::filesystem::path(a.dump).parent_path() / bench::kGpt2WeightsFile).string());
  else if (a.workload == "llama_step")
    e = llama_reference();
  else if (a.workload == "moe_step")
    e = moe_reference();
  else if (const bench::FlashShape fs = bench::parse_flash(a.workload); fs.T != 0)
    e = flash_reference(fs);
  else if (const std::size_t context = bench::parse_decode(a.workload))
    e = decode_reference(context);
  else
    return false;
  save_npz(a.dump, e);
  return true;
}

}  // namespace tapegrad_bench
