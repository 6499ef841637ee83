// nn/io/weight_loader: the one loading core of npz checkpoints and Hugging Face folders, on a
// source held in memory. The counts refuse a source short of what the configuration
// describes (above their floors, and only by more than the tolerated shortfall); the names
// refuse a tensor neither wanted nor ignored, a missing one, a wrong shape and a dtype the
// source does not convert, each in the source's words; the values go in directly or through
// `load`, and a NaN or Inf is refused naming its element unless allowed.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "nn/io/checkpoint_error.hpp"
#include "nn/io/weight_loader.hpp"

using namespace tapegrad;

namespace {

// Tensors by name with their values; dtype "float" converts, anything else does not.
class MemorySource final : public WeightSource {
 public:
  void add(const std::string& name, std::vector<std::size_t> shape, std::vector<double> values,
           std::string dtype = "float") {
    held_[name] = {std::move(shape), std::move(dtype)};
    values_[name] = std::move(values);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [name, t] : held_) out.push_back(name);
    return out;
  }
  const HeldTensor* find(const std::string& name) const override {
    const auto it = held_.find(name);
    return it == held_.end() ? nullptr : &it->second;
  }
  bool ignored(const std::string& name) const override { return name == "buffer"; }
  bool converts(const std::string& dtype, bool) const override { return dtype == "float"; }
  void read(const std::string& name, float* out) const override { copy(name, out); }
  void read(const std::string& name, double* out) const override { copy(name, out); }
  std::string op() const override { return "memory"; }
  std::string unexpected(const std::string& name) const override { return "unexpected " + name; }
  std::string missing(const std::string& name, const std::vector<std::size_t>& s) const override {
    return fmt::format("missing {} ({})", name, fmt::join(s, ","));
  }
  std::string wrong_shape(const std::string& name, const std::vector<std::size_t>& held,
                          const std::vector<std::size_t>& wanted) const override {
    return fmt::format("shape of {} ({}) not ({})", name, fmt::join(held, ","), fmt::join(wanted, ","));
  }
  std::string wrong_dtype(const std::string& name, const std::string& dtype, bool d) const override {
    return fmt::format("dtype of {} {} into {}", name, dtype, d ? "double" : "float");
  }
  std::string too_few_scalars(long double w, long double h) const override {
    return fmt::format("scalars {:.0f} > {:.0f}", double(w), double(h));
  }
  std::string too_few_tensors(long double w, long double h) const override {
    return fmt::format("tensors {:.0f} > {:.0f}", double(w), double(h));
  }
  std::string nonfinite(const std::string&, const std::string& why) const override {
    return "nonfinite " + why;
  }

 private:
  template <class T>
  void copy(const std::string& name, T* out) const {
    for (double v : values_.at(name)) *out++ = T(v);
  }
  std::map<std::string, HeldTensor> held_;
  std::map<std::string, std::vector<double>> values_;
};

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("weight loader: the counts refuse a source short of the config, past their floors", "[loader]") {
  MemorySource s;
  s.add("a", {2, 3}, std::vector<double>(6));
  s.add("b", {4}, std::vector<double>(4));
  const auto counts = [&](long double scalars, long double tensors, long double tolerated,
                          long double floor) {
    return refusal([&] { check_counts(s, {scalars, tensors, tolerated, floor}); });
  };
  CHECK(counts(10, 2, 0, 0).empty());
  // scalars: refused only above kScalarsAlwaysChecked, where building to name what is
  // missing could take more memory than there is
  CHECK(counts(kScalarsAlwaysChecked, 2, 0, 0).empty());
  CHECK_THAT(counts(kScalarsAlwaysChecked + 1, 2, 0, 0),
             Catch::Contains("memory") && Catch::Contains(fmt::format("scalars {} > 10", (1 << 22) + 1)));
  // tensors: past the floor and the tolerated shortfall
  CHECK_THAT(counts(10, 3, 0, 0), Catch::Contains("tensors 3 > 2"));
  CHECK(counts(10, 3, 0, 3).empty());
  CHECK(counts(10, 4, 2, 0).empty());  // a layer of 3 tensors short is tolerated up to 2
  CHECK_THAT(counts(10, 5, 2, 0), Catch::Contains("tensors 5 > 2"));
  CHECK(counts(10, 1e30L, std::numeric_limits<long double>::infinity(), 0).empty());
}

TEST_CASE("weight loader: the names are checked in the source's words before anything is read", "[loader]") {
  MemorySource s;
  s.add("a", {2, 3}, std::vector<double>(6));
  s.add("b", {4}, std::vector<double>(4));
  s.add("buffer", {1}, {0});
  const std::vector<WantedTensor> wanted = {{"a", {2, 3}}, {"b", {4}}};
  CHECK(refusal([&] { check_names(s, wanted, false); }).empty());
  CHECK_THAT(refusal([&] { check_names(s, {{"a", {2, 3}}}, false); }),
             Catch::Contains("memory") && Catch::Contains("unexpected b"));
  CHECK_THAT(refusal([&] { check_names(s, {{"a", {2, 3}}, {"b", {4}}, {"c", {5, 1}}}, true); }),
             Catch::Contains("missing c (5,1)"));
  CHECK_THAT(refusal([&] { check_names(s, {{"a", {3, 2}}, {"b", {4}}}, false); }),
             Catch::Contains("shape of a (2,3) not (3,2)"));
  s.add("b", {4}, std::vector<double>(4), "int");
  CHECK_THAT(refusal([&] { check_names(s, wanted, true); }), Catch::Contains("dtype of b int into double"));
}

TEST_CASE("weight loader: values go in directly or through load, and a NaN is refused where it is read", "[loader]") {
  MemorySource s;
  s.add("a", {2}, {1.5, -2});
  s.add("b", {3}, {1, 2, 3});
  std::vector<float> a(2), b;
  std::vector<LoadTarget<float>> targets = {
      {"a", {2}, a.data(), {}},
      {"b", {3}, nullptr, [&](const float* v) { b.assign(v, v + 3); }}};
  read_weights(s, targets, true);
  CHECK(a == std::vector<float>{1.5f, -2.0f});
  CHECK(b == std::vector<float>{1, 2, 3});
  s.add("b", {3}, {1, std::nan(""), 3});
  b.clear();
  CHECK_THAT(refusal([&] { read_weights(s, targets, true); }),
             Catch::Contains("nonfinite 'b' (3) holds nan at element 1"));
  CHECK(b.empty());  // refused before `load` took the values
  read_weights(s, targets, false);
  CHECK(std::isnan(b[1]));
}
