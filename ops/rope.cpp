#include "ops/rope.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "autograd/errors.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/kernels/rope.hpp"

namespace tapegrad {

// ---- names ------------------------------------------------------------------------------

std::string to_string(RopeStyle style) {
  return style == RopeStyle::half ? "half" : "interleaved";
}

std::string to_string(RopeScaling scaling) {
  switch (scaling) {
    case RopeScaling::none: return "none";
    case RopeScaling::linear: return "linear";
    case RopeScaling::ntk: return "ntk";
    case RopeScaling::llama3: return "llama3";
    case RopeScaling::yarn: return "yarn";
  }
  return "unknown";
}

RopeStyle parse_rope_style(const std::string& name) {
  for (RopeStyle s : {RopeStyle::half, RopeStyle::interleaved})
    if (name == to_string(s)) return s;
  fail("parse_rope_style", "unknown RoPE style \"{}\" (expected half or interleaved)", name);
}

RopeScaling parse_rope_scaling(const std::string& name) {
  for (RopeScaling s : {RopeScaling::none, RopeScaling::linear, RopeScaling::ntk,
                        RopeScaling::llama3, RopeScaling::yarn})
    if (name == to_string(s)) return s;
  fail("parse_rope_scaling",
       "unknown RoPE scaling \"{}\" (expected none, linear, ntk, llama3 or yarn)", name);
}

// ---- the specification --------------------------------------------------------------------

namespace {
bool positive_finite(double v) { return v > 0 && std::isfinite(v); }  // false for NaN

void check_scaling_fields(const char* op, std::size_t head_dim, const RopeSpec& s) {
  const std::string name = to_string(s.scaling);
  if (s.scaling == RopeScaling::none) return;
  if (!positive_finite(s.factor))
    fail(op, "factor={} must be positive and finite for {} scaling", s.factor, name);
  if (s.scaling == RopeScaling::ntk && head_dim == 2)
    fail(op, "ntk scaling needs head_dim > 2 (theta * factor^(head_dim / (head_dim - 2)) "
             "with head_dim=2)");
  if ((s.scaling == RopeScaling::llama3 || s.scaling == RopeScaling::yarn) &&
      s.original_context == 0)
    fail(op, "original_context=0: {} scaling needs the original context length "
             "(original_max_position_embeddings)", name);
  if (s.scaling == RopeScaling::llama3 &&
      !(positive_finite(s.low_freq_factor) && std::isfinite(s.high_freq_factor) &&
        s.high_freq_factor > s.low_freq_factor))
    fail(op, "llama3 scaling needs 0 < low_freq_factor < high_freq_factor, both finite "
             "(low_freq_factor={}, high_freq_factor={})", s.low_freq_factor, s.high_freq_factor);
  if (s.scaling == RopeScaling::yarn) {
    if (!positive_finite(s.beta_fast) || !positive_finite(s.beta_slow))
      fail(op, "yarn scaling needs positive finite betas (beta_fast={}, beta_slow={})",
           s.beta_fast, s.beta_slow);
    if (s.theta == 1.0)  // the correction range divides by ln(theta)
      fail(op, "theta=1 is not usable with yarn scaling (its correction range divides by "
               "ln(theta))");
  }
}
}  // namespace

void check_rope_spec(const char* op, std::size_t head_dim, const RopeSpec& spec) {
  if (head_dim == 0 || head_dim % 2 != 0)
    fail(op, "head_dim={} must be even and positive (RoPE rotates pairs)", head_dim);
  if (!positive_finite(spec.theta)) fail(op, "theta={} must be positive and finite", spec.theta);
  check_scaling_fields(op, head_dim, spec);
}

// ---- frequencies (Hugging Face modeling_rope_utils, in double) -----------------------------

namespace {
std::vector<double> default_inv_freq(std::size_t head_dim, double theta) {
  std::vector<double> inv(head_dim / 2);
  for (std::size_t i = 0; i < inv.size(); ++i)
    inv[i] = 1.0 / std::pow(theta, double(2 * i) / double(head_dim));
  return inv;
}

// Wavelengths above original_context / low_freq_factor are interpolated (divided by factor),
// those below original_context / high_freq_factor kept, the band between blended smoothly.
void llama3_scale(std::vector<double>& inv, const RopeSpec& s) {
  const double L = double(s.original_context);
  const double low_wavelen = L / s.low_freq_factor, high_wavelen = L / s.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2 * M_PI / f;
    const double scaled = wavelen > low_wavelen ? f / s.factor : f;
    const double smooth = (L / wavelen - s.low_freq_factor) /
                          (s.high_freq_factor - s.low_freq_factor);
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    f = medium ? (1 - smooth) * scaled / s.factor + smooth * scaled : scaled;
  }
}

// YaRN: dimensions that turn fewer than beta_slow times over the original context are
// interpolated, those turning more than beta_fast times extrapolated, with a linear ramp of
// dimension index between. Returns the attention factor on cos and sin.
double yarn_scale(std::vector<double>& inv, std::size_t head_dim, const RopeSpec& s) {
  const double D = double(head_dim);
  auto correction_dim = [&](double rotations) {
    return D * std::log(double(s.original_context) / (rotations * 2 * M_PI)) /
           (2 * std::log(s.theta));
  };
  const double low = std::max(std::floor(correction_dim(s.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(s.beta_slow)), D - 1);
  if (low == high) high += 0.001;  // as HF: a one-point ramp would divide by zero
  for (std::size_t j = 0; j < inv.size(); ++j) {
    const double ramp = std::clamp((double(j) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1 - ramp;
    inv[j] = inv[j] / s.factor * (1 - extrapolation) + inv[j] * extrapolation;
  }
  return s.factor > 1 ? 0.1 * std::log(s.factor) + 1 : 1.0;
}
}  // namespace

RopeFrequencies rope_frequencies(std::size_t head_dim, const RopeSpec& spec) {
  check_rope_spec("rope_frequencies", head_dim, spec);
  RopeFrequencies out;
  const double D = double(head_dim);
  const double theta = spec.scaling == RopeScaling::ntk
                           ? spec.theta * std::pow(spec.factor, D / (D - 2))
                           : spec.theta;
  out.inv_freq = default_inv_freq(head_dim, theta);
  if (spec.scaling == RopeScaling::linear)
    for (double& f : out.inv_freq) f /= spec.factor;
  if (spec.scaling == RopeScaling::llama3) llama3_scale(out.inv_freq, spec);
  if (spec.scaling == RopeScaling::yarn)
    out.attention_factor = yarn_scale(out.inv_freq, head_dim, spec);
  return out;
}

// ---- the op -------------------------------------------------------------------------------

namespace {
// cos and sin of (offset + t) * inv_freq[i], times the attention factor: (length, head_dim/2)
struct RopeTable {
  std::vector<double> cos, sin;
};
std::shared_ptr<const RopeTable> rope_table(std::size_t length, std::size_t head_dim,
                                            std::size_t offset, const RopeSpec& spec) {
  const RopeFrequencies f = rope_frequencies(head_dim, spec);
  const std::size_t h = head_dim / 2;
  auto table = std::make_shared<RopeTable>();
  table->cos.resize(length * h);
  table->sin.resize(length * h);
  for (std::size_t t = 0; t < length; ++t)
    for (std::size_t i = 0; i < h; ++i) {
      const double angle = double(offset + t) * f.inv_freq[i];
      table->cos[t * h + i] = f.attention_factor * std::cos(angle);
      table->sin[t * h + i] = f.attention_factor * std::sin(angle);
    }
  return table;
}

// y = rotate(x) per pair at positions offset + t; backward: dx = rotate^T(dy), the rotation
// by minus the angle (the same table, so the same attention factor).
template <class T>
Tensor<T> rope_op(const char* op, const Tensor<T>& x, const kernels::RopeLayout& L,
                  std::size_t offset, const RopeSpec& spec) {
  auto table = rope_table(L.length, L.head_dim, offset, spec);
  Array<T> y = Array<T>::from_shape(x.value().shape());
  kernels::rope_forward(L, table->cos.data(), table->sin.data(), x.value().data(), y.data());
  return record<T>(op, {x}, std::move(y), [L, table](BackwardContext<T>& c) {
    Array<T> dx = Array<T>::from_shape(c.input(0).shape());
    kernels::rope_backward(L, table->cos.data(), table->sin.data(), c.grad().data(),
                           dx.data());
    c.accumulate(0, std::move(dx));
  });
}
}  // namespace

// x (..., T, head_dim) -> (..., T, head_dim)
template <class T>
Tensor<T> rope(const Tensor<T>& x, std::size_t offset, const RopeSpec& spec) {
  const Shape s = x.shape();
  if (s.size() < 2) fail("rope", "x needs rank >= 2 (..., T, head_dim) (x is {})", shape_str(s));
  const std::size_t head_dim = s.back();
  if (head_dim == 0 || head_dim % 2 != 0)
    fail("rope", "head_dim={} must be even and positive (x is {})", head_dim, shape_str(s));
  check_rope_spec("rope", head_dim, spec);
  kernels::RopeLayout L;
  L.length = s[s.size() - 2];
  L.head_dim = head_dim;
  L.outer = x.value().size() / std::max<std::size_t>(L.length * head_dim, 1);
  L.interleaved = spec.style == RopeStyle::interleaved;
  return rope_op("rope", x, L, offset, spec);
}

// x (B, T, heads * head_dim) -> (B, T, heads * head_dim)
template <class T>
Tensor<T> rope_heads(const Tensor<T>& x, std::size_t heads, std::size_t offset,
                     const RopeSpec& spec) {
  const Shape s = x.shape();
  if (s.size() != 3)
    fail("rope_heads", "x must be (B, T, heads * head_dim) (x is {})", shape_str(s));
  if (heads == 0 || s[2] % heads != 0)
    fail("rope_heads", "width {} is not divisible by heads={} (x is {})", s[2], heads,
         shape_str(s));
  const std::size_t head_dim = s[2] / heads;
  if (head_dim == 0 || head_dim % 2 != 0)
    fail("rope_heads", "head_dim={} (width {} / heads={}) must be even and positive (x is {})",
         head_dim, s[2], heads, shape_str(s));
  check_rope_spec("rope_heads", head_dim, spec);
  kernels::RopeLayout L{s[0], s[1], heads, head_dim, spec.style == RopeStyle::interleaved};
  return rope_op("rope_heads", x, L, offset, spec);
}

#define TAPEGRAD_INSTANTIATE(T)                                                       \
  template Tensor<T> rope(const Tensor<T>&, std::size_t, const RopeSpec&);            \
  template Tensor<T> rope_heads(const Tensor<T>&, std::size_t, std::size_t, const RopeSpec&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
