// The attention workloads in libtorch: multi-head and grouped-query attention (forward,
// or forward and backward) and long-context causal attention.
#include "shared.hpp"

#include <unistd.h>

#include <cmath>
#include <limits>

namespace torch_reference {

// Multi-head attention as the textbook composition a PyTorch user writes by hand (the
// semantics tapegrad's multi_head_attention has): project, split heads with reshape +
// transpose, scaled scores, -inf where the causal mask forbids, softmax, weights @ V,
// merge heads, project through Wo. `blocked` is ~causal_mask(T), built once per shape as
// a PyTorch module keeps it in a buffer (so libtorch is not charged for rebuilding it).
torch::Tensor mha(const torch::Tensor& x, const torch::Tensor& Wq, const torch::Tensor& Wk,
                  const torch::Tensor& Wv, const torch::Tensor& Wo, int64_t heads,
                  const torch::Tensor& blocked) {
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2), dh = D / heads;
  auto split = [&](const torch::Tensor& p) { return p.reshape({B, T, heads, dh}).transpose(1, 2); };
  const torch::Tensor q = split(torch::matmul(x, Wq));
  const torch::Tensor k = split(torch::matmul(x, Wk));
  const torch::Tensor v = split(torch::matmul(x, Wv));
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(dh));
  scores = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
  const torch::Tensor w = torch::softmax(scores, -1);
  const torch::Tensor o = torch::matmul(w, v).transpose(1, 2).reshape({B, T, D});
  return torch::matmul(o, Wo);
}

// Grouped-query attention as a PyTorch 1.13 user writes it (no enable_gqa there): project
// k, v to kv heads, repeat_interleave them to `heads` along the head axis (query head h
// reads kv head h / (heads/kv_heads)), then the composition above. q (B, heads, T, dh),
// k and v (B, kv_heads, T, dh) -> merged (B, T, heads*dh), before the output projection.
torch::Tensor gqa_heads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& blocked) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), dh = q.size(3), group = H / k.size(1);
  const torch::Tensor kk = k.repeat_interleave(group, 1), vv = v.repeat_interleave(group, 1);
  torch::Tensor scores = torch::matmul(q, kk.transpose(-2, -1)) / std::sqrt(double(dh));
  scores = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), vv).transpose(1, 2).reshape({B, T, H * dh});
}

torch::Tensor gqa(const torch::Tensor& x, const torch::Tensor& Wq, const torch::Tensor& Wk,
                  const torch::Tensor& Wv, const torch::Tensor& Wo, int64_t heads,
                  const torch::Tensor& blocked) {
  const int64_t B = x.size(0), T = x.size(1), dh = x.size(2) / heads;
  auto split = [&](const torch::Tensor& p) { return p.reshape({B, T, -1, dh}).transpose(1, 2); };
  return torch::matmul(gqa_heads(split(torch::matmul(x, Wq)), split(torch::matmul(x, Wk)),
                                 split(torch::matmul(x, Wv)), blocked),
                       Wo);
}

torch::Tensor blocked_mask(int64_t T) {
  return torch::ones({T, T}, torch::kBool).tril().logical_not();
}

template <class R>
struct MhaTensors {
  torch::Tensor x, Wq, Wk, Wv, Wo, blocked;
  int64_t heads;
  bool grouped;
  MhaTensors(const MhaInputs& in, const MhaShape& s, bool rg)
      : x(tensor_of<R>(in.x, {int64_t(s.B), int64_t(s.T), int64_t(s.D)}, rg)),
        Wq(tensor_of<R>(in.Wq, {int64_t(s.D), int64_t(s.D)}, rg)),
        Wk(tensor_of<R>(in.Wk, {int64_t(s.D), int64_t(s.kv_width())}, rg)),
        Wv(tensor_of<R>(in.Wv, {int64_t(s.D), int64_t(s.kv_width())}, rg)),
        Wo(tensor_of<R>(in.Wo, {int64_t(s.D), int64_t(s.D)}, rg)),
        blocked(blocked_mask(int64_t(s.T))),
        heads(int64_t(s.H)),
        grouped(s.KV != 0) {}
  // MHA shapes run the textbook composition mha(), GQA shapes (KV set) the repeat_interleave one
  torch::Tensor forward() const {
    return grouped ? gqa(x, Wq, Wk, Wv, Wo, heads, blocked) : mha(x, Wq, Wk, Wv, Wo, heads, blocked);
  }
  void zero_grad() {  // set_to_none, as optimizer.zero_grad() does by default in 2.x
    for (torch::Tensor* t : {&x, &Wq, &Wk, &Wv, &Wo}) t->mutable_grad() = torch::Tensor();
  }
};

template <class R>
void check_mha_at(const MhaShape& s, bool with_backward, Result& r) {
  const MhaInputs in = bench::make_mha_inputs(s);
  std::function<std::vector<R>(const MhaInputs&)> fwd = [&](const MhaInputs& i) {
    torch::NoGradGuard no_grad;
    return values<R>(MhaTensors<R>(i, s, false).forward());
  };
  std::function<std::vector<std::vector<R>>(const MhaInputs&)> bwd;
  if (with_backward)
    bwd = [&](const MhaInputs& i) {
      MhaTensors<R> t(i, s, true);
      t.forward().backward(tensor_of<R>(i.G, {int64_t(s.B), int64_t(s.T), int64_t(s.D)}, false));
      return std::vector<std::vector<R>>{values<R>(t.x.grad()), values<R>(t.Wq.grad()),
                                         values<R>(t.Wk.grad()), values<R>(t.Wv.grad()),
                                         values<R>(t.Wo.grad())};
    };
  bench::check_mha<R>(s, in, fwd, bwd, r);
}

template <class R>
Result run_mha(const Args& a, const bench::MhaWorkload& w) {
  const MhaShape& s = w.shape;
  Result r;
  Result s1_check;
  if (!a.skip_check) {
    check_mha_at<R>(bench::mha_shape("S1"), w.backward, s1_check);
    check_mha_at<R>(s, w.backward, r);
  }

  const MhaInputs in = bench::make_mha_inputs(s);
  MhaTensors<R> t(in, s, w.backward);
  const torch::Tensor G = tensor_of<R>(in.G, {int64_t(s.B), int64_t(s.T), int64_t(s.D)}, false);
  if (w.backward) {
    r.time_steps(a.warmup, a.repeats, [&] {
      t.zero_grad();
      torch::Tensor y = t.forward();
      y.backward(G);
      g_sink = g_sink + t.x.grad().template data_ptr<R>()[0];
    });
  } else {
    r.time_steps(a.warmup, a.repeats, [&] {
      torch::NoGradGuard no_grad;
      torch::Tensor y = t.forward();
      g_sink = g_sink + y.data_ptr<R>()[0];
    });
  }
  r.add("gflops", bench::mha_flops(s, w.backward) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

template Result run_mha<float>(const Args&, const bench::MhaWorkload&);
template Result run_mha<double>(const Args&, const bench::MhaWorkload&);

// As tapegrad_bench's run_gqa: GQA fwd+bwd (the row's time) and, in the same loop, MHA at
// the same shape through the textbook composition mha() (the mha_fwdbwd workload's step).
Result run_gqa(const Args& a, const bench::MhaWorkload& w) {
  const MhaShape& s = w.shape;
  const MhaShape mha_s = bench::mha_shape(s.name);
  Result r;
  Result s1_check;
  if (!a.skip_check) {
    check_mha_at<float>(bench::gqa_shape("S1"), true, s1_check);
    check_mha_at<float>(s, true, r);
  }
  const MhaInputs in = bench::make_mha_inputs(s), in_mha = bench::make_mha_inputs(mha_s);
  MhaTensors<float> t(in, s, true), t_mha(in_mha, mha_s, true);
  const torch::Tensor G = tensor_of<float>(in.G, {int64_t(s.B), int64_t(s.T), int64_t(s.D)}, false);
  auto step = [&](MhaTensors<float>& tt) {
    tt.zero_grad();
    tt.forward().backward(G);
    g_sink = g_sink + tt.x.grad().data_ptr<float>()[0];
  };
  const auto wall = r.time_parts(a.warmup, a.repeats, {[&] { step(t); }, [&] { step(t_mha); }});
  const double gqa_ms = bench::median(wall[0]), mha_ms = bench::median(wall[1]);
  r.add("gflops", bench::mha_flops(s, true) / (gqa_ms * 1e6));
  r.add("mha_ms", mha_ms);
  r.add("mha_min_ms", *std::min_element(wall[1].begin(), wall[1].end()));
  r.add("mha_over_gqa", mha_ms / gqa_ms);
  return r;
}

// libtorch 1.13 has no flash kernel and no scaled_dot_product_attention: causal attention is
// the composition a 1.13 user writes (the scores and weights materialised as (B, H, T, T)),
// on q, k, v leaves of (B, T, H * dh) as tapegrad's.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               int64_t heads, const torch::Tensor& blocked) {
  const int64_t B = q.size(0), T = q.size(1), dh = q.size(2) / heads;
  auto split = [&](const torch::Tensor& p) { return p.reshape({B, T, heads, dh}).transpose(1, 2); };
  torch::Tensor scores = torch::matmul(split(q), split(k).transpose(-2, -1)) / std::sqrt(double(dh));
  scores = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), split(v)).transpose(1, 2).reshape({B, T, heads * dh});
}

Result run_flash(const Args& a, const bench::FlashShape& s) {
  // forward keeps the scores, the masked scores and the weights, (B, H, T, T) floats each
  const double need = 3.0 * double(s.B * s.H) * double(s.T) * double(s.T) * 4.0;
  const double have = double(sysconf(_SC_PAGE_SIZE)) * double(sysconf(_SC_PHYS_PAGES));
  if (need > 0.75 * have) {
    std::fprintf(stderr, "torch_reference: %s does not fit: its (B, H, T, T) tensors need %.0f GiB, "
                 "the machine has %.0f GiB\n", a.workload.c_str(), need / 1073741824.0, have / 1073741824.0);
    std::exit(5);
  }
  const bench::FlashInputs in = bench::make_flash_inputs(s);
  const std::vector<int64_t> shape = {int64_t(s.B), int64_t(s.T), int64_t(s.width())};
  torch::Tensor q = tensor_of<float>(in.q, shape, true), k = tensor_of<float>(in.k, shape, true),
                v = tensor_of<float>(in.v, shape, true);
  const torch::Tensor dO = tensor_of<float>(in.dO, shape, false), blocked = blocked_mask(int64_t(s.T));
  auto step = [&] {
    for (torch::Tensor* t : {&q, &k, &v}) t->mutable_grad() = torch::Tensor();
    torch::Tensor out = causal_attention(q, k, v, int64_t(s.H), blocked);
    out.backward(dO);
    return out;
  };
  Result r;
  if (!a.skip_check) {
    const torch::Tensor out = step();
    bench::check_flash<float>(s, in, values<float>(out), values<float>(q.grad()), values<float>(k.grad()),
                              values<float>(v.grad()), r);
  }
  r.time_steps(a.warmup, a.repeats, [&] {
    step();
    g_sink = g_sink + q.grad().data_ptr<float>()[0];
  });
  r.add("T", double(s.T));
  r.add("gflops", bench::flash_useful_flops(s) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

}  // namespace torch_reference
