#include "autograd/gradcheck.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"

namespace tapegrad {

std::string GradcheckResult::to_string() const {
  std::string out;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const InputCheck& c = inputs[i];
    out += fmt::format("input {} {}: {} elements, max abs error {:.3e}, max rel error {:.3e}, {}\n",
                       i, shape_str(c.shape), c.checked, c.max_abs_error, c.max_rel_error,
                       c.passed ? "pass" : "FAIL");
  }
  // float's 7 digits leave a central difference with step 1e-6 about one digit, so a
  // correct backward fails there at a relative error of a few percent
  if (!passed && in_float)
    out += "hint: finite differences need float64: check the gradient with double tensors "
           "(float32 keeps too few digits; GradcheckOptions::for_float() is only a loose "
           "spot check)\n";
  return out;
}

namespace {
// L = sum(y * R), accumulated in double.
template <class T>
double projected(const Tensor<T>& y, const std::vector<double>& R) {
  if (y.size() != R.size())
    fail("gradcheck", "the function's output changed size between calls ({} vs {})", y.size(),
         R.size());
  double total = 0.0;
  const T* p = y.data();
  for (std::size_t i = 0; i < R.size(); ++i) total += static_cast<double>(p[i]) * R[i];
  return total;
}
}  // namespace

template <class T>
GradcheckResult gradcheck(const TensorFunction<T>& f, const std::vector<Tensor<T>>& inputs,
                          GradcheckOptions opt) {
  Generator gen(opt.seed);
  Tape<T>::active().clear();
  for (Tensor<T> x : inputs) x.zero_grad();  // handles share the tensor

  // Analytic: one backward pass of L = sum(y * R).
  Tensor<T> y = f(inputs);
  std::vector<double> R(y.size());
  for (double& r : R) r = gen.normal();
  Array<T> seed = Array<T>::from_shape(y.shape());
  std::copy(R.begin(), R.end(), seed.begin());
  bool any = false;
  for (const Tensor<T>& x : inputs) any = any || x.requires_grad();
  if (!any) fail("gradcheck", "no input requires grad");
  if (y.requires_grad()) y.backward(seed);
  Tape<T>::active().clear();

  GradcheckResult result;
  result.in_float = std::is_same<T, float>::value;
  NoGradGuard no_grad;
  for (const Tensor<T>& input : inputs) {
    InputCheck check;
    check.shape = input.shape();
    if (!input.requires_grad()) {
      result.inputs.push_back(check);
      continue;
    }
    Tensor<T> x = input;  // same handle: perturbing x perturbs what f sees
    const std::size_t n = x.size();
    std::vector<std::size_t> elements(n);
    std::iota(elements.begin(), elements.end(), 0);
    if (opt.max_elements != 0 && opt.max_elements < n) {
      std::shuffle(elements.begin(), elements.end(), gen.engine());
      elements.resize(opt.max_elements);
    }
    std::vector<double> analytic, numeric;
    for (std::size_t e : elements) {
      T* p = x.value().data() + e;
      const T original = *p;
      *p = static_cast<T>(original + opt.eps);
      const double plus = projected(f(inputs), R);
      *p = static_cast<T>(original - opt.eps);
      const double minus = projected(f(inputs), R);
      *p = original;
      // the step actually taken in T, not the requested one
      const double step = static_cast<double>(static_cast<T>(original + opt.eps)) -
                          static_cast<double>(static_cast<T>(original - opt.eps));
      numeric.push_back((plus - minus) / step);
      analytic.push_back(input.has_grad() ? static_cast<double>(input.grad().data()[e]) : 0.0);
    }
    double max_numeric = 0.0;
    for (double v : numeric) max_numeric = std::max(max_numeric, std::abs(v));
    for (std::size_t k = 0; k < numeric.size(); ++k) {
      const double err = std::abs(analytic[k] - numeric[k]);
      if (!(err <= opt.atol + opt.rtol * std::abs(numeric[k]))) check.passed = false;
      check.max_abs_error = std::max(check.max_abs_error, std::isnan(err) ? INFINITY : err);
    }
    check.max_rel_error = max_numeric > 0 ? check.max_abs_error / max_numeric : check.max_abs_error;
    check.checked = elements.size();
    result.passed = result.passed && check.passed;
    result.inputs.push_back(check);
  }
  for (Tensor<T> x : inputs) x.zero_grad();  // handles share the tensor
  return result;
}

template GradcheckResult gradcheck(const TensorFunction<float>&,
                                   const std::vector<Tensor<float>>&, GradcheckOptions);
template GradcheckResult gradcheck(const TensorFunction<double>&,
                                   const std::vector<Tensor<double>>&, GradcheckOptions);

}  // namespace tapegrad
