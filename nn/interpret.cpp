#include "nn/interpret.hpp"

#include <cmath>
#include <string>

#include "autograd/tape.hpp"  // NoGradGuard

namespace tapegrad {

namespace {

// x (B, T, heads, dh) with head `head`'s slice rewritten by `write(slice, B*T rows)`.
template <class T, class Write>
Tensor<T> with_head_slice(const Tensor<T>& x, std::size_t head, const char* op, Write write) {
  if (x.dim() != 4 || head >= x.shape()[2])
    fail(op, "head {} of an activation {}: expected (B, T, heads, dh) with head < heads", head,
         x.shape_string());
  Array<T> a = x.value();
  const std::size_t heads = a.shape()[2], dh = a.shape()[3], rows = a.size() / (heads * dh);
  write(a.data() + head * dh, rows, heads * dh, dh);
  return Tensor<T>(std::move(a));
}

void check_same_shape(const char* op, const Indices& a, const Indices& b,
                      const char* a_name = "clean tokens", const char* b_name = "corrupted tokens") {
  if (a.shape() != b.shape())
    fail(op, "{} {} and {} {} must have one shape", a_name,
         shape_str(Shape(a.shape().begin(), a.shape().end())), b_name,
         shape_str(Shape(b.shape().begin(), b.shape().end())));
}

}  // namespace

template <class T>
HookFn<T> zero_head(std::size_t head) {
  return [head](const Tensor<T>& z, const std::string&) {
    return with_head_slice(z, head, "zero_head", [](T* first, std::size_t rows, std::size_t stride, std::size_t dh) {
      for (std::size_t r = 0; r < rows; ++r) std::fill_n(first + r * stride, dh, T(0));
    });
  };
}

template <class T>
HookFn<T> mean_head(std::size_t head) {
  return [head](const Tensor<T>& z, const std::string&) {
    return with_head_slice(z, head, "mean_head", [](T* first, std::size_t rows, std::size_t stride, std::size_t dh) {
      for (std::size_t e = 0; e < dh; ++e) {
        double sum = 0;
        for (std::size_t r = 0; r < rows; ++r) sum += first[r * stride + e];
        for (std::size_t r = 0; r < rows; ++r) first[r * stride + e] = T(sum / double(rows));
      }
    });
  };
}

// resid_pre (B, T, D) of the corrupted run with row p of every sequence from the clean cache.
template <class T>
std::vector<std::vector<double>> patch_residual_by_position(Transformer<T>& model,
                                                            const Indices& clean,
                                                            const Indices& corrupted,
                                                            const LogitMetric<T>& metric) {
  check_same_shape("patch_residual_by_position", clean, corrupted);
  NoGradGuard no_grad;
  const std::size_t layers = model.blocks().size(), B = clean.shape()[0], Tn = clean.shape()[1];
  const std::vector<std::string> names = block_points(layers, "resid_pre");
  const CachedRun<T> run = run_with_cache(model, clean, names);
  std::vector<std::vector<double>> out(layers, std::vector<double>(Tn));
  for (std::size_t l = 0; l < layers; ++l)
    for (std::size_t p = 0; p < Tn; ++p) {
      Hooks<T> hooks;
      hooks.add(names[l], [&, p](const Tensor<T>& x, const std::string& name) {
        Array<T> a = x.value();
        const Array<T>& from = run.cache[name].value();
        const std::size_t D = a.shape()[2];
        for (std::size_t b = 0; b < B; ++b)
          std::copy_n(from.data() + (b * Tn + p) * D, D, a.data() + (b * Tn + p) * D);
        return Tensor<T>(std::move(a));
      });
      out[l][p] = metric(model.run_with_hooks(corrupted, hooks));
    }
  return out;
}

template <class T>
std::vector<std::vector<double>> patch_heads(Transformer<T>& model, const Indices& clean,
                                             const Indices& corrupted,
                                             const LogitMetric<T>& metric) {
  check_same_shape("patch_heads", clean, corrupted);
  NoGradGuard no_grad;
  const std::size_t layers = model.blocks().size(), heads = model.config().heads;
  const std::vector<std::string> names = block_points(layers, "attn.z");
  const CachedRun<T> run = run_with_cache(model, clean, names);
  std::vector<std::vector<double>> out(layers, std::vector<double>(heads));
  for (std::size_t l = 0; l < layers; ++l)
    for (std::size_t h = 0; h < heads; ++h) {
      Hooks<T> hooks;
      hooks.add(names[l], [&, h](const Tensor<T>& z, const std::string& name) {
        const Array<T>& from = run.cache[name].value();
        return with_head_slice(z, h, "patch_heads", [&](T* first, std::size_t rows, std::size_t stride, std::size_t dh) {
          for (std::size_t r = 0; r < rows; ++r)
            std::copy_n(from.data() + h * dh + r * stride, dh, first + r * stride);
        });
      });
      out[l][h] = metric(model.run_with_hooks(corrupted, hooks));
    }
  return out;
}

namespace {

// The final norm's gain and the unembedding of a model, read as numbers: column(y)[d] is
// W_U[d, y] (the head, or the tied token embedding's row y).
template <class T>
struct Readout {
  const Transformer<T>& model;
  Tensor<T> gain = model.parameter("norm_f.weight");
  bool tied = !model.has_parameter("head.weight");
  Tensor<T> unembed = model.parameter(tied ? "tok_emb.weight" : "head.weight");

  double column(std::int64_t y, std::size_t d) const {
    return double(tied ? unembed.value()(std::size_t(y), d) : unembed.value()(d, std::size_t(y)));
  }
  // u with <c, u> = c's share of the logit of y, for a component c of the final residual x
  // (D): the norm frozen at x's scale (1/rms, or 1/std under layer_norm) times the gain times
  // W_U[:, y]; under layer_norm minus its mean, the centring moved from c onto u.
  std::vector<double> direction(const T* x, std::int64_t y) const {
    const TransformerConfig& c = model.config();
    const std::size_t D = c.d_model;
    const bool centre = c.norm == NormKind::layer_norm;
    double mean = 0, sq = 0;
    for (std::size_t d = 0; d < D; ++d) mean += double(x[d]) / double(D);
    for (std::size_t d = 0; d < D; ++d) {
      const double v = double(x[d]) - (centre ? mean : 0.0);
      sq += v * v;
    }
    const double scale = 1 / std::sqrt(sq / double(D) + c.norm_eps);
    std::vector<double> u(D);
    double u_mean = 0;
    for (std::size_t d = 0; d < D; ++d) {
      const double g = double(gain.value()(d)) + (c.norm == NormKind::gemma ? 1.0 : 0.0);
      u[d] = scale * g * column(y, d);
      u_mean += u[d] / double(D);
    }
    if (centre)
      for (double& v : u) v -= u_mean;
    return u;
  }
};

template <class T>
double dot(const std::vector<double>& u, const T* x) {
  double s = 0;
  for (std::size_t i = 0; i < u.size(); ++i) s += u[i] * double(x[i]);
  return s;
}

// head h's share: <z[h] @ Wo[h*dh : (h+1)*dh, :], u> for z (heads, dh) of one position
template <class T>
double head_share(const T* z, const Array<T>& Wo, std::size_t h, std::size_t dh,
                  const std::vector<double>& u) {
  double s = 0;
  for (std::size_t e = 0; e < dh; ++e) {
    const T* row = Wo.data() + (h * dh + e) * u.size();
    s += double(z[h * dh + e]) * dot(u, row);
  }
  return s;
}

}  // namespace

// One run cached at embed, pos_embed, every blocks.{l}.attn.z, the last resid_post and
// ln_final.out -> each component's mean share of the target logits (LogitAttribution).
template <class T>
LogitAttribution direct_logit_attribution(Transformer<T>& model, const Indices& tokens,
                                          const Indices& targets, std::int64_t ignore_index) {
  check_same_shape("direct_logit_attribution", tokens, targets, "tokens", "targets");
  NoGradGuard no_grad;
  const TransformerConfig& c = model.config();
  // a head's share passes its block's output norm, which is not linear in it
  if (c.post_norms)
    fail("direct_logit_attribution", "post_norms normalise each attention output before the "
         "residual add: the heads' shares do not add up to the logit in such a model");
  const std::size_t layers = model.blocks().size(), H = c.heads, D = c.d_model;
  const std::size_t Tn = tokens.shape()[1];
  // with embed_norm the stream starts at the normalised embeddings (positions included)
  const char* embedding = c.embed_norm ? "ln_embed.out" : "embed";
  const bool positions = model.has_parameter("pos_emb.weight") && !c.embed_norm;
  std::vector<std::string> names = {embedding, block_point(layers - 1, "resid_post"), "ln_final.out"};
  if (positions) names.push_back("pos_embed");
  for (std::size_t l = 0; l < layers; ++l) names.push_back(block_point(l, "attn.z"));
  const CachedRun<T> run = run_with_cache(model, tokens, names);
  const Readout<T> readout{model};
  // each activation looked up once, not once per position
  const T* resid = run.cache[names[1]].value().data();
  const T* embed = run.cache[embedding].value().data();
  const T* ln_out = run.cache["ln_final.out"].value().data();
  const T* pos = positions ? run.cache["pos_embed"].value().data() : nullptr;
  std::vector<const Array<T>*> z_of;
  for (std::size_t l = 0; l < layers; ++l) z_of.push_back(&run.cache[block_point(l, "attn.z")].value());
  LogitAttribution a;
  a.heads.assign(layers, std::vector<double>(H, 0.0));
  std::size_t counted = 0;
  for (std::size_t n = 0; n < targets.size(); ++n) {
    const std::int64_t y = targets.data()[n];
    if (y == ignore_index) continue;
    if (y < 0 || std::size_t(y) >= c.vocab)
      fail("direct_logit_attribution", "target {} at flat position {} is outside [0, vocab={})",
           y, n, c.vocab);
    ++counted;
    const std::vector<double> u = readout.direction(resid + n * D, y);
    a.embed += dot(u, embed + n * D);
    if (pos) a.embed += dot(u, pos + (n % Tn) * D);
    for (std::size_t l = 0; l < layers; ++l) {
      const MultiHeadAttention<T>& attn = model.blocks()[l].attention();
      const Array<T>& z = *z_of[l];  // before any head mask
      const std::size_t dh = z.shape()[3];
      for (std::size_t h = 0; h < H; ++h)
        if (attn.head_mask().empty() || attn.head_mask()[h])
          a.heads[l][h] += head_share(z.data() + n * H * dh, attn.Wo().value(), h, dh, u);
    }
    // the logit itself, from what the model computed: ln_final.out against W_U[:, y]
    const T* out = ln_out + n * D;
    for (std::size_t d = 0; d < D; ++d) a.logit += double(out[d]) * readout.column(y, d);
  }
  if (counted == 0)
    fail("direct_logit_attribution", "every target is ignore_index ({}): a mean over no "
         "positions", ignore_index);
  a.embed /= double(counted);
  a.logit /= double(counted);
  double heads = 0;
  for (auto& layer : a.heads)
    for (double& v : layer) heads += (v /= double(counted));
  a.rest = a.logit - a.embed - heads;
  return a;
}

#define TAPEGRAD_INSTANTIATE(T)                                                                \
  template HookFn<T> zero_head<T>(std::size_t);                                               \
  template HookFn<T> mean_head<T>(std::size_t);                                               \
  template std::vector<std::vector<double>> patch_residual_by_position(                      \
      Transformer<T>&, const Indices&, const Indices&, const LogitMetric<T>&);               \
  template std::vector<std::vector<double>> patch_heads(Transformer<T>&, const Indices&,     \
                                                        const Indices&, const LogitMetric<T>&); \
  template LogitAttribution direct_logit_attribution(Transformer<T>&, const Indices&,        \
                                                     const Indices&, std::int64_t);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
