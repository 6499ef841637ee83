#include "nn/interpret.hpp"

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

std::string point(std::size_t layer, const char* leaf) {
  return "blocks." + std::to_string(layer) + "." + leaf;
}

void check_same_shape(const char* op, const Indices& clean, const Indices& corrupted) {
  if (clean.shape() != corrupted.shape())
    fail(op, "clean tokens {} and corrupted tokens {} must have one shape",
         shape_str(Shape(clean.shape().begin(), clean.shape().end())),
         shape_str(Shape(corrupted.shape().begin(), corrupted.shape().end())));
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
  std::vector<std::string> names;
  for (std::size_t l = 0; l < layers; ++l) names.push_back(point(l, "resid_pre"));
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
  std::vector<std::string> names;
  for (std::size_t l = 0; l < layers; ++l) names.push_back(point(l, "attn.z"));
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

#define TAPEGRAD_INSTANTIATE(T)                                                                \
  template HookFn<T> zero_head<T>(std::size_t);                                               \
  template HookFn<T> mean_head<T>(std::size_t);                                               \
  template std::vector<std::vector<double>> patch_residual_by_position(                      \
      Transformer<T>&, const Indices&, const Indices&, const LogitMetric<T>&);               \
  template std::vector<std::vector<double>> patch_heads(Transformer<T>&, const Indices&,     \
                                                        const Indices&, const LogitMetric<T>&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
