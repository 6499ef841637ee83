// No silent wrong gradient. Each misuse below used to return a missing or wrong
// gradient and raise nothing; each must now either give the right gradient or throw
// GraphError naming what went wrong (docs/RELIABILITY.md, "The graph").
#include <exception>
#include <thread>
#include <utility>

#include "helpers.hpp"
#include "nn/optim.hpp"

using namespace tapegrad;
using namespace tapegrad::test;
using Catch::Contains;

namespace {

Tensor<double> vec(std::initializer_list<double> v, bool requires_grad = true) {
  return Tensor<double>(Array<double>(v), requires_grad);
}

// The message of what f throws, or "" when it throws nothing (so a CHECK can show both).
template <class F>
std::string graph_error(F f) {
  try {
    f();
  } catch (const GraphError& e) {
    return e.what();
  }
  return "";
}

// Runs f on a new thread and hands back the message of the GraphError it threw, or "".
template <class F>
std::string graph_error_on_thread(F f) {
  std::string message = "(no exception)";
  std::thread worker([&] {
    try {
      message = graph_error(f);
    } catch (const std::exception& e) {
      message = std::string("another exception: ") + e.what();
    }
  });
  worker.join();
  return message;
}

}  // namespace

TEST_CASE("graph: a second backward through a freed graph throws and changes nothing", "[graph]") {
  Tensor<double> x = vec({1.0, 2.0});
  Tensor<double> loss = sum(x * x);
  loss.backward();
  REQUIRE(x.grad()(1) == Approx(4.0));
  const std::string message = graph_error([&] { loss.backward(); });
  CHECK_THAT(message, Contains("backward") && Contains("made by sum") &&
                          Contains("a second time") && Contains("retain_graph") &&
                          Contains("detach()"));
  CHECK(x.grad()(1) == Approx(4.0));  // the failed call moved no gradient
}

TEST_CASE("graph: two independent losses each give their gradient, in either order", "[graph]") {
  const bool a_first = GENERATE(true, false);
  Tensor<double> a = vec({1.0, 2.0}), b = vec({3.0});
  Tensor<double> la = sum(a * a * 3.0);  // dla/da = 6a
  const std::size_t nodes_a = Tape<double>::active().size();
  Tensor<double> lb = sum(exp(b));       // dlb/db = exp(b)
  const std::size_t nodes_b = Tape<double>::active().size() - nodes_a;
  (a_first ? la : lb).backward();
  // only the walked graph's nodes are released; the other stays for its own backward
  CHECK(Tape<double>::active().size() == (a_first ? nodes_b : nodes_a));
  (a_first ? lb : la).backward();
  CHECK(Tape<double>::active().size() == 0);
  REQUIRE(a.has_grad());
  REQUIRE(b.has_grad());
  CHECK(a.grad()(1) == Approx(12.0));
  CHECK(b.grad()(0) == Approx(std::exp(3.0)));
}

TEST_CASE("graph: a new graph on an intermediate whose history was freed throws, naming its op", "[graph]") {
  Tensor<double> x = vec({1.0, 2.0}), W = vec({3.0, -1.0});
  Tensor<double> h = x * W;
  sum(h).backward();
  Tensor<double> again = sum(h * h);
  CHECK(again.requires_grad());
  const std::string message = graph_error([&] { again.backward(); });
  CHECK_THAT(message, Contains("an input of mul") && Contains("shape (2)") &&
                          Contains("made by mul") && Contains("retain_graph") &&
                          Contains("detach()"));
  // W kept the first backward's gradient, x's value: nothing was added by the failed one
  CHECK(W.grad()(0) == Approx(1.0));
  Tape<double>::active().clear();
}

TEST_CASE("graph: a freed intermediate detached is a constant", "[graph]") {
  Tensor<double> x = vec({1.0, 2.0}), W = vec({3.0, -1.0});
  Tensor<double> h = x * W;
  sum(h).backward();
  W.zero_grad();
  Tensor<double> c = h.detach();
  sum(c * W).backward();  // d/dW = h = (3, -2)
  CHECK(W.grad()(0) == Approx(3.0));
  CHECK(W.grad()(1) == Approx(-2.0));
}

TEST_CASE("graph: a graph behind Tape::clear() throws instead of giving no gradient", "[graph]") {
  Tensor<double> x = vec({2.0});
  Tensor<double> loss = sum(tanh(x));
  Tape<double>::active().clear();
  CHECK_THAT(graph_error([&] { loss.backward(); }), Contains("Tape::clear()"));
  CHECK_FALSE(x.has_grad());
}

TEST_CASE("graph: backward on another thread than the one that recorded the graph throws", "[graph][threads]") {
  Tensor<double> x = vec({1.0, 2.0});
  Tensor<double> loss = sum(x * x);
  const std::string message = graph_error_on_thread([&] { loss.backward(); });
  CHECK_THAT(message, Contains("another thread's tape") && Contains("made by sum"));
  CHECK_FALSE(x.has_grad());
  CHECK(Tape<double>::active().size() == 2);  // the nodes are still here, on their own tape
  loss.backward();  // and the thread that recorded them can still use them
  CHECK(x.grad()(1) == Approx(4.0));
}

TEST_CASE("graph: a graph recorded on a thread that has ended throws on backward", "[graph][threads]") {
  Tensor<double> x = vec({1.0, 2.0});
  Tensor<double> loss;
  std::thread([&] { loss = sum(x * x); }).join();
  CHECK_THAT(graph_error([&] { loss.backward(); }), Contains("thread that has ended"));
  CHECK_FALSE(x.has_grad());
}

TEST_CASE("graph: a graph built on another thread's intermediate throws on backward", "[graph][threads]") {
  Tensor<double> x = vec({1.0, 2.0});
  Tensor<double> h = exp(x);  // recorded here
  const std::string message = graph_error_on_thread([&] { sum(h * 2.0).backward(); });
  CHECK_THAT(message, Contains("an input of mul_scalar") && Contains("made by exp") &&
                          Contains("another thread's tape"));
  CHECK_FALSE(x.has_grad());
  Tape<double>::active().clear();
}

TEST_CASE("graph: an input edited in place after it was recorded makes backward throw", "[graph]") {
  // d(x*x)/dx at x = 3 is 6; with the edit the old engine answered 20
  Tensor<double> x = vec({3.0});
  Tensor<double> loss = sum(x * x);
  x.value()(0) = 10.0;
  CHECK_THAT(graph_error([&] { loss.backward(); }),
             Contains("one of the inputs") && Contains("that mul saved for backward") &&
                 Contains("shape (1)") && Contains("modified in place"));
  CHECK(Tape<double>::active().size() == 0);  // the failed sweep left no nodes behind
}

TEST_CASE("graph: matmul names its input edited in place, with the shape", "[graph]") {
  Tensor<float> a = random<float>({2, 3}, 1), w = random<float>({3, 4}, 2);
  Tensor<float> loss = sum(matmul(a, w));
  w.value().fill(0.5f);  // what an optimiser step between forward and backward would do
  CHECK_THAT(graph_error([&] { loss.backward(); }),
             Contains("that matmul saved for backward") && Contains("input 1 of shape (3,4)"));
  Tape<float>::active().clear();
}

TEST_CASE("graph: an output its backward reads, edited in place, makes backward throw", "[graph]") {
  Tensor<double> x = vec({0.5, 1.0});
  Tensor<double> y = exp(x);  // exp's backward reads its output
  Tensor<double> loss = sum(y);
  y.value()(0) = 7.0;
  CHECK_THAT(graph_error([&] { loss.backward(); }),
             Contains("the output (of shape (2)) that exp saved for backward"));
  Tape<double>::active().clear();
}

TEST_CASE("graph: a saved value read through a non-const handle, or edited and restored, is not an edit", "[graph]") {
  Tensor<double> x = vec({3.0});
  Tensor<double> y = exp(x);
  Tensor<double> loss = sum(x * y);
  const double read = x.value()(0) + y.value()(0);  // non-const handles: value() for writing
  CHECK(read > 3.0);
  x.value()(0) = 10.0;
  x.value()(0) = 3.0;  // the value mul saved is back
  loss.backward();     // d(x e^x)/dx = (1 + x) e^x
  CHECK(x.grad()(0) == Approx(4.0 * std::exp(3.0)));
}

TEST_CASE("graph: edits that no backward reads, reads through a const handle, and optimiser steps after backward stay legal", "[graph]") {
  Tensor<double> a = vec({1.0, 2.0}), b = vec({5.0, 6.0});
  Tensor<double> loss = sum(a + b);  // add's backward reads neither input
  a.value()(0) = 9.0;
  Tensor<double> p = vec({3.0});
  Tensor<double> lp = sum(p * p);
  const double read = std::as_const(p).value()(0);  // reading is not an edit
  CHECK(read == 3.0);
  CHECK_NOTHROW(loss.backward());
  CHECK(a.grad()(0) == Approx(1.0));
  CHECK_NOTHROW(lp.backward());
  SGD<double> opt({p}, {0.1});
  opt.step();  // p = 3 - 0.1 * 6
  opt.zero_grad();
  sum(p * p).backward();
  CHECK(p.grad()(0) == Approx(2 * 2.4));
}

TEST_CASE("graph: retain_graph, then an optimiser step, then a second backward throws", "[graph]") {
  Tensor<double> p = vec({3.0});
  Tensor<double> loss = sum(p * p);
  loss.backward(true);
  SGD<double>({p}, {0.1}).step();
  CHECK_THAT(graph_error([&] { loss.backward(); }), Contains("modified in place"));
}

TEST_CASE("graph: a second backward with retain_graph accumulates exactly twice", "[graph]") {
  Tensor<double> x = vec({1.0, -2.0}), w = vec({0.5, 4.0});
  Tensor<double> loss = sum(tanh(x * w) * x);
  loss.backward(true);
  const Array<double> once_x = x.grad(), once_w = w.grad();
  loss.backward();
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(x.grad()(i) == 2 * once_x(i));
    CHECK(w.grad()(i) == 2 * once_w(i));
  }
  CHECK(Tape<double>::active().size() == 0);
}

TEST_CASE("graph: 1,000 steps with no_grad evaluation in between keep the tape and the live tensors flat", "[graph][memory_growth]") {
  Tensor<float> w = random<float>({4, 4}, 3), x = random<float>({2, 4}, 4, false);
  SGD<float> opt({w}, {0.01});
  auto step = [&](int i) {
    opt.zero_grad();
    Tensor<float> loss = sum(tanh(matmul(x, w)));
    {
      Tensor<float> other = sum(w * 2.0f);  // a second graph, dropped without backward
    }
    loss.backward();
    opt.step();
    if (i % 10 == 0) {
      NoGradGuard no_grad;
      Tensor<float> eval = sum(matmul(x, w));
    }
  };
  step(0);
  const long tensors = live_tensors<float>();
  const std::size_t tape = Tape<float>::active().size();
  int differ = 0;
  for (int i = 1; i <= 1000; ++i) {
    step(i);
    differ += live_tensors<float>() != tensors || Tape<float>::active().size() != tape;
  }
  CHECK(tape == 0);
  CHECK(differ == 0);
}

TEST_CASE("graph: a backward that reads the gradient after take_grad() throws, naming its op", "[graph]") {
  // y = x + x with a backward handing the gradient to x twice: once read, once taken.
  // take_grad() may move the gradient away (here it does: y is an intermediate nothing
  // else reads), so a grad() after it would see an empty array, not the gradient.
  const auto twice = [](const Tensor<double>& x, bool take_last) {
    const Tensor<double>& in = x;
    return record<double>("twice", {x}, Array<double>(in.value() * 2.0),
                          [take_last](BackwardContext<double>& c) {
                            if (take_last) {
                              Array<double> read = c.grad();
                              c.accumulate(0, read + c.take_grad());
                            } else {
                              Array<double> taken = c.take_grad();
                              c.accumulate(0, taken + c.grad());
                            }
                          });
  };
  Tensor<double> x = vec({1.0, 2.0});
  Tensor<double> good = sum(twice(x, true) * 3.0);
  good.backward();
  CHECK(x.grad()(0) == 6.0);
  CHECK(x.grad()(1) == 6.0);
  Tensor<double> bad = sum(twice(x, false) * 3.0);
  CHECK_THAT(graph_error([&] { bad.backward(); }),
             Contains("twice") && Contains("after take_grad()"));
  Tape<double>::active().clear();
}
