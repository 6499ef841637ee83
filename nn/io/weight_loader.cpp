#include "nn/io/weight_loader.hpp"

#include <set>

#include <fmt/format.h>

#include "autograd/errors.hpp"
#include "nn/io/checkpoint_error.hpp"
#include "nn/io/finite_weights.hpp"  // nonfinite_value

namespace tapegrad {

// Named, not anonymous: the library compiles in unity batches.
namespace weight_loader_parts {

[[noreturn]] void refuse(const WeightSource& source, const std::string& why) {
  fail_with<CheckpointError>(source.op(), "{}", why);
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  return "(" + fmt::format("{}", fmt::join(shape, ", ")) + ")";
}

}  // namespace weight_loader_parts

long double HeldTensor::elements() const {
  long double n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

void check_counts(const WeightSource& source, const WantedCounts& wanted) {
  long double scalars = 0, tensors = 0;
  for (const std::string& name : source.names()) {
    scalars += source.find(name)->elements();
    tensors += 1;
  }
  // A damaged or hostile config must not make us allocate a giant model: it is built only
  // if it is no bigger than what the source holds, or small anyway.
  if (wanted.scalars > scalars && wanted.scalars > kScalarsAlwaysChecked)
    weight_loader_parts::refuse(source, source.too_few_scalars(wanted.scalars, scalars));
  // Tiny layers keep the scalars few while the tensors are many (16385 layers of d_model 4
  // took minutes to build: found by fuzz/fuzz_checkpoint), and each is listed and built.
  if (wanted.tensors > tensors + wanted.tolerated_shortfall &&
      wanted.tensors > wanted.tensors_always_checked)
    weight_loader_parts::refuse(source, source.too_few_tensors(wanted.tensors, tensors));
}

void check_names(const WeightSource& source, const std::vector<WantedTensor>& wanted, bool to_double) {
  std::set<std::string> expected;
  for (const WantedTensor& t : wanted) expected.insert(t.name);
  for (const std::string& name : source.names())
    if (!expected.count(name) && !source.ignored(name))
      weight_loader_parts::refuse(source, source.unexpected(name));
  for (const WantedTensor& t : wanted) {
    const HeldTensor* held = source.find(t.name);
    if (!held) weight_loader_parts::refuse(source, source.missing(t.name, t.shape));
    if (held->shape != t.shape)
      weight_loader_parts::refuse(source, source.wrong_shape(t.name, held->shape, t.shape));
    if (!source.converts(held->dtype, to_double))
      weight_loader_parts::refuse(source, source.wrong_dtype(t.name, held->dtype, to_double));
  }
}

template <class T>
void read_weights(const WeightSource& source, const std::vector<LoadTarget<T>>& targets,
                  bool check_finite) {
  std::vector<T> values;  // one tensor at a time, in the source's layout, where it differs
  for (const LoadTarget<T>& t : targets) {
    std::size_t n = 1;
    for (std::size_t d : t.shape) n *= d;
    T* into = t.direct;
    if (!into) {
      values.resize(n);
      into = values.data();
    }
    source.read(t.name, into);
    if (check_finite) {
      const std::string why =
          nonfinite_value(t.name, weight_loader_parts::shape_text(t.shape), into, n);
      if (!why.empty()) weight_loader_parts::refuse(source, source.nonfinite(t.name, why));
    }
    if (!t.direct) t.load(into);
  }
}

template void read_weights(const WeightSource&, const std::vector<LoadTarget<float>>&, bool);
template void read_weights(const WeightSource&, const std::vector<LoadTarget<double>>&, bool);

}  // namespace tapegrad
