// The attention workloads: multi-head and grouped-query attention (forward, or forward
// and backward) and long-context flash attention.
#include "shared.hpp"

#include <algorithm>
#include <functional>

namespace tapegrad_bench {

template <class R>
void check_mha_at(const MhaShape& s, bool with_backward, Result& r) {
  const MhaInputs in = bench::make_mha_inputs(s);
  std::function<std::vector<R>(const MhaInputs&)> fwd = [&](const MhaInputs& i) {
    NoGradGuard no_grad;
    return values(forward_of(MhaTensors<R>(i, s, false), s).value());
  };
  std::function<std::vector<std::vector<R>>(const MhaInputs&)> bwd;
  if (with_backward)
    bwd = [&](const MhaInputs& i) {
      MhaTensors<R> t(i, s, true);
      forward_of(t, s).backward(tensor_of<R>(i.G, {s.B, s.T, s.D}, false).value());
      return std::vector<std::vector<R>>{values(t.x.grad()), values(t.Wq.grad()),
                                         values(t.Wk.grad()), values(t.Wv.grad()),
                                         values(t.Wo.grad())};
    };
  bench::check_mha<R>(s, in, fwd, bwd, r);
}

template <class R>
Result run_mha(const Args& a, const bench::MhaWorkload& w) {
  const MhaShape& s = w.shape;
  Result r;
  Result s1_check;  // S1 is always checked too: small, and every code path of the op
  if (!a.skip_check) {
    check_mha_at<R>(bench::mha_shape("S1"), w.backward, s1_check);
    check_mha_at<R>(s, w.backward, r);
  }

  const MhaInputs in = bench::make_mha_inputs(s);
  MhaTensors<R> t(in, s, w.backward);
  const Array<R> G = tensor_of<R>(in.G, {s.B, s.T, s.D}, false).value();
  if (w.backward) {
    r.time_steps(a.warmup, a.repeats, [&] {
      t.zero_grad();
      Tensor<R> y = forward_of(t, s);
      y.backward(G);
      g_sink = g_sink + double(t.x.grad()(0));
    });
  } else {
    r.time_steps(a.warmup, a.repeats, [&] {
      NoGradGuard no_grad;
      Tensor<R> y = forward_of(t, s);
      g_sink = g_sink + double(y.data()[0]);
    });
  }
  r.add("gflops", bench::mha_flops(s, w.backward) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

template Result run_mha<float>(const Args&, const bench::MhaWorkload&);
template Result run_mha<double>(const Args&, const bench::MhaWorkload&);

// GQA fwd+bwd at its shape (kv_heads = heads/4), and in the same loop the same path with
// kv_heads = heads (MHA) on the MHA inputs of that shape, so the saving of sharing K/V heads
// is measured within one process. The row's time is GQA's; the MHA part is extra.
Result run_gqa(const Args& a, const bench::MhaWorkload& w) {
  const MhaShape& s = w.shape;
  const MhaShape mha = bench::mha_shape(s.name);
  Result r;
  Result s1_check;  // at S1 kv_heads = 1 (multi-query): every head reads the one K/V head
  if (!a.skip_check) {
    check_mha_at<float>(bench::gqa_shape("S1"), true, s1_check);
    check_mha_at<float>(s, true, r);
  }
  const MhaInputs in = bench::make_mha_inputs(s), in_mha = bench::make_mha_inputs(mha);
  MhaTensors<float> t(in, s, true), t_mha(in_mha, mha, true);
  const Array<float> G = tensor_of<float>(in.G, {s.B, s.T, s.D}, false).value();
  const AttentionSpec spec = causal_spec_of(s), spec_mha = causal_spec_of(mha);
  auto step = [&](MhaTensors<float>& tt, const AttentionSpec& sp) {
    tt.zero_grad();
    tt.forward(sp).backward(G);
    g_sink = g_sink + double(tt.x.grad()(0));
  };
  const auto wall = r.time_parts(a.warmup, a.repeats, {[&] { step(t, spec); }, [&] { step(t_mha, spec_mha); }});
  const double gqa_ms = bench::median(wall[0]), mha_ms = bench::median(wall[1]);
  r.add("gflops", bench::mha_flops(s, true) / (gqa_ms * 1e6));
  r.add("mha_ms", mha_ms);
  r.add("mha_min_ms", *std::min_element(wall[1].begin(), wall[1].end()));
  r.add("mha_over_gqa", mha_ms / gqa_ms);
  return r;
}

Result run_flash(const Args& a, const bench::FlashShape& s) {
  const bench::FlashInputs in = bench::make_flash_inputs(s);
  FlashTensors t(s, in);
  Result r;
  if (!a.skip_check) {
    const Tensor<float> out = t.step();
    bench::check_flash<float>(s, in, values(out.value()), values(t.q.grad()), values(t.k.grad()),
                              values(t.v.grad()), r);
  }
  r.time_steps(a.warmup, a.repeats, [&] {
    t.step();
    g_sink = g_sink + double(t.q.grad()(0));
  });
  r.add("T", double(s.T));
  r.add("gflops", bench::flash_useful_flops(s) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

}  // namespace tapegrad_bench
