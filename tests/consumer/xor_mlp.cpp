// A user's first program against the installed package: an XOR MLP trained with AdamW in
// float, saved as a checkpoint and loaded into a double copy (the widening load), whose
// predictions must agree. Exits 0 when XOR is learned and the copy agrees, 1 otherwise.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "tapegrad.hpp"
#include "tapegrad_nn.hpp"

using namespace tapegrad;

extern "C" int consumer_c_answer(void);  // c_part.c

template <class T>
struct XorNet : Module<T> {
  Linear<T> hidden, out;
  explicit XorNet(Generator& gen) : hidden(2, 8, true, gen, 1.0), out(8, 1, true, gen, 1.0) {
    this->register_module("hidden", hidden);
    this->register_module("out", out);
  }
  Tensor<T> operator()(const Tensor<T>& x) const { return sigmoid(out(tanh(hidden(x)))); }
};

int main() {
  if (consumer_c_answer() != 42) return 1;
  set_num_threads(1);
  Generator gen(3);
  XorNet<float> net(gen);
  const Tensor<float> x(Array<float>{{0, 0}, {0, 1}, {1, 0}, {1, 1}});
  Array<float> targets = Array<float>::from_shape({4, 1});  // ({{0}, {1}, ...} is ambiguous)
  const float xor_of[4] = {0, 1, 1, 0};
  std::copy(xor_of, xor_of + 4, targets.begin());
  const Tensor<float> y(targets);
  AdamW<float> opt(net.parameters(), AdamWOptions{0.05, 0.9, 0.999, 1e-8, 0.0});
  float loss = 0;
  for (int step = 0; step < 500; ++step) {
    opt.zero_grad();
    const Tensor<float> err = net(x) - y;
    Tensor<float> l = mean(err * err) * 2.0;  // a double scalar with a float tensor
    l.backward();
    opt.step();
    loss = l.item();
  }
  const std::string path = "/tmp/tapegrad_consumer_" + std::to_string(::getpid()) + ".npz";
  save_parameters(path, net);
  Generator other(99);
  XorNet<double> copy(other);
  load_parameters(path, copy);  // float32 file, double model
  std::remove(path.c_str());

  const Tensor<float> p = net(x);
  const Tensor<double> q = copy(Tensor<double>(Array<double>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}));
  bool ok = loss < 0.02;
  for (std::size_t i = 0; i < 4; ++i) {
    const double want = y.value()(i, 0), got = p.value()(i, 0), twin = q.value()(i, 0);
    ok = ok && std::abs(got - want) < 0.25 && std::abs(twin - got) < 1e-5;
    std::printf("xor(%g, %g) = %.4f (double copy %.4f)\n", double(x.value()(i, 0)),
                double(x.value()(i, 1)), got, twin);
  }
  std::printf("loss %.5f: %s\n", loss, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
