#include "nn/optim.hpp"

#include <cmath>

#include "platform/simd.hpp"

#include "autograd/tape.hpp"

namespace tapegrad {

namespace {

template <class T>
void check_params(const char* op, const std::vector<Tensor<T>>& params) {
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!params[i].defined()) fail(op, "parameter {} is an undefined tensor", i);
}

// One AdamW update of element(s) w, m, v from gradient g: the same formula for a SIMD batch
// and for a scalar (the tail). Written out with xsimd because the plain loop stays scalar:
// std::sqrt may set errno, which keeps the compiler from vectorising it.
template <class T>
struct AdamWUpdate {
  T decay, b1, b2, one_b1, one_b2, step_size, bc2_sqrt, eps;

  template <class V>
  void operator()(V& w, V& m, V& v, const V& g) const {
    using std::sqrt;
    using xsimd::sqrt;
    w = w * V(decay);
    m = V(b1) * m + V(one_b1) * g;
    v = V(b2) * v + V(one_b2) * g * g;
    w = w - V(step_size) * (m / (sqrt(v) / V(bc2_sqrt) + V(eps)));
  }
};

void check_rate(const char* op, const char* name, double value, bool below_one = false) {
  if (!(value >= 0.0) || !std::isfinite(value) || (below_one && !(value < 1.0)))
    fail(op, "{} must be {}, got {}", name, below_one ? "in [0, 1)" : "finite and >= 0", value);
}

}  // namespace

template <class T>
SGD<T>::SGD(std::vector<Tensor<T>> params, SGDOptions options)
    : params_(std::move(params)), options_(options), buffers_(params_.size()),
      started_(params_.size(), false) {
  check_params("SGD", params_);
  check_rate("SGD", "lr", options.lr);
  check_rate("SGD", "momentum", options.momentum);
  check_rate("SGD", "weight_decay", options.weight_decay);
}

template <class T>
void SGD<T>::step() {
  NoGradGuard guard;
  const T lr = static_cast<T>(options_.lr), mu = static_cast<T>(options_.momentum),
          wd = static_cast<T>(options_.weight_decay);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor<T>& p = params_[i];
    if (!p.has_grad()) continue;
    T* w = p.value().data();
    const T* g = p.grad().data();
    const std::size_t n = p.size();
    if (mu == T(0)) {
      for (std::size_t j = 0; j < n; ++j) w[j] -= lr * (g[j] + wd * w[j]);
      continue;
    }
    Array<T>& buf = buffers_[i];
    const bool first = !started_[i];
    if (first) buf = Array<T>::from_shape(p.shape());
    started_[i] = true;
    T* b = buf.data();
    for (std::size_t j = 0; j < n; ++j) {
      const T d = g[j] + wd * w[j];
      b[j] = first ? d : mu * b[j] + d;
      w[j] -= lr * b[j];
    }
  }
}

template <class T>
void SGD<T>::zero_grad() {
  for (Tensor<T>& p : params_) p.zero_grad();
}

template <class T>
AdamW<T>::AdamW(std::vector<Tensor<T>> params, AdamWOptions options)
    : params_(std::move(params)), options_(options), state_(params_.size()) {
  check_params("AdamW", params_);
  check_rate("AdamW", "lr", options.lr);
  check_rate("AdamW", "beta1", options.beta1, true);
  check_rate("AdamW", "beta2", options.beta2, true);
  check_rate("AdamW", "weight_decay", options.weight_decay);
  if (!(options.eps > 0.0)) fail("AdamW", "eps must be positive, got {}", options.eps);
}

template <class T>
void AdamW<T>::step() {
  NoGradGuard guard;
  const AdamWOptions& o = options_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor<T>& p = params_[i];
    if (!p.has_grad()) continue;
    State& s = state_[i];
    const std::size_t n = p.size();
    if (s.step == 0) {
      s.m = Array<T>::from_shape(p.shape());
      s.v = Array<T>::from_shape(p.shape());
      s.m.fill(T(0));
      s.v.fill(T(0));
    }
    ++s.step;
    // The scalars in double, as PyTorch computes them in Python floats.
    const double t = static_cast<double>(s.step);
    const T decay = static_cast<T>(1.0 - o.lr * o.weight_decay);
    const T b1 = static_cast<T>(o.beta1), b2 = static_cast<T>(o.beta2);
    const T one_b1 = static_cast<T>(1.0 - o.beta1), one_b2 = static_cast<T>(1.0 - o.beta2);
    const T step_size = static_cast<T>(o.lr / (1.0 - std::pow(o.beta1, t)));
    const T bc2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(o.beta2, t)));
    const T eps = static_cast<T>(o.eps);
    const AdamWUpdate<T> update{decay, b1, b2, one_b1, one_b2, step_size, bc2_sqrt, eps};
    T* w = p.value().data();
    const T* g = p.grad().data();
    T* m = s.m.data();
    T* v = s.v.data();
    using batch = xsimd::batch<T>;
    std::size_t j = 0;
    for (; j + batch::size <= n; j += batch::size) {
      batch wj = batch::load_unaligned(w + j), mj = batch::load_unaligned(m + j),
            vj = batch::load_unaligned(v + j);
      update(wj, mj, vj, batch::load_unaligned(g + j));
      wj.store_unaligned(w + j);
      mj.store_unaligned(m + j);
      vj.store_unaligned(v + j);
    }
    for (; j < n; ++j) update(w[j], m[j], v[j], g[j]);
  }
}

template <class T>
void AdamW<T>::set_state(std::size_t i, State state) {
  if (i >= params_.size()) fail("AdamW::set_state", "parameter {} of {}", i, params_.size());
  if (state.step == 0) {
    state_[i] = State{};
    return;
  }
  const Shape& want = params_[i].shape();
  for (const Array<T>* a : {&state.m, &state.v}) {
    const Shape got(a->shape().begin(), a->shape().end());
    if (got != want)
      fail("AdamW::set_state", "parameter {} has shape {} but its moment has shape {}", i,
           shape_str(want), shape_str(got));
    for (std::size_t j = 0; j < a->size(); ++j)
      if (!std::isfinite(a->data()[j]))
        fail("AdamW::set_state", "parameter {}: moment element {} is {}", i, j, a->data()[j]);
  }
  for (std::size_t j = 0; j < state.v.size(); ++j)
    if (state.v.data()[j] < T(0))
      fail("AdamW::set_state", "parameter {}: second moment element {} is negative ({})", i, j,
           state.v.data()[j]);
  state_[i] = std::move(state);
}

template <class T>
void AdamW<T>::zero_grad() {
  for (Tensor<T>& p : params_) p.zero_grad();
}

template <class T>
double clip_grad_norm(const std::vector<Tensor<T>>& params, double max_norm) {
  if (!(max_norm > 0.0)) fail("clip_grad_norm", "max_norm must be positive, got {}", max_norm);
  check_params("clip_grad_norm", params);
  double squares = 0.0;  // in double: a float sum over millions of squares drifts
  for (const Tensor<T>& p : params) {
    if (!p.has_grad()) continue;
    const T* g = p.grad().data();
    for (std::size_t j = 0, n = p.size(); j < n; ++j)
      squares += static_cast<double>(g[j]) * static_cast<double>(g[j]);
  }
  const double total = std::sqrt(squares);
  if (!std::isfinite(total) || total <= max_norm) return total;
  NoGradGuard guard;
  const T factor = static_cast<T>(max_norm / (total + 1e-6));
  for (Tensor<T> p : params) {
    if (!p.has_grad()) continue;
    T* g = p.grad().data();
    for (std::size_t j = 0, n = p.size(); j < n; ++j) g[j] *= factor;
  }
  return total;
}

template class SGD<float>;
template class SGD<double>;
template class AdamW<float>;
template class AdamW<double>;
template double clip_grad_norm(const std::vector<Tensor<float>>&, double);
template double clip_grad_norm(const std::vector<Tensor<double>>&, double);

}  // namespace tapegrad
