// apps/common/svg_plot: well-formed SVG with the series, ticks, labels and legend.
#ifdef TAPEGRAD_WITH_EXAMPLES  // built only together with the example programs
#include <cmath>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "apps/common/svg_plot.hpp"
#include "test_paths.hpp"

using namespace tapegrad::plot;

namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Every element opened is closed in order (self-closing ones need nothing): a minimal XML
// well-formedness check without a parser dependency.
bool balanced(const std::string& svg, std::string& why) {
  std::vector<std::string> stack;
  std::size_t p = 0;
  while ((p = svg.find('<', p)) != std::string::npos) {
    std::size_t q = svg.find('>', p);
    if (q == std::string::npos) { why = "unterminated tag"; return false; }
    std::string tag = svg.substr(p + 1, q - p - 1);
    p = q + 1;
    if (tag.empty()) { why = "empty tag"; return false; }
    if (tag.back() == '/') continue;
    if (tag[0] == '/') {
      std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name) { why = "mismatched </" + name + ">"; return false; }
      stack.pop_back();
    } else {
      stack.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
  }
  if (!stack.empty()) { why = "unclosed <" + stack.back() + ">"; return false; }
  return true;
}

std::vector<double> path_numbers(const std::string& svg) {
  std::vector<double> out;
  std::regex d_attr("class=\"series\"[^>]* d=\"([^\"]*)\"");
  for (std::sregex_iterator it(svg.begin(), svg.end(), d_attr), end; it != end; ++it) {
    std::string d = (*it)[1];
    std::regex num("[-+0-9.eEnaif]+");
    for (std::sregex_iterator n(d.begin(), d.end(), num); n != std::sregex_iterator(); ++n) {
      out.push_back(std::strtod(n->str().c_str(), nullptr));
      if (n->str().find_first_of("naif") != std::string::npos) out.back() = NAN;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("svg plot: linear ticks are 1-2-5 steps covering the data", "[svg_plot]") {
  double lo = 0.0, hi = 0.93;
  std::vector<Tick> t = axis_ticks(lo, hi, Scale::Linear, 6);
  // range 0.93 / 6 = 0.155 -> step 0.2 -> 0, 0.2, ..., 1
  REQUIRE(t.size() == 6);
  CHECK(t[0].value == 0.0);
  CHECK(t[1].label == "0.2");
  CHECK(t.back().value == Approx(1.0));
  CHECK(lo == 0.0);
  CHECK(hi == Approx(1.0));
  double a = 1.0, b = 600.0;
  std::vector<Tick> s = axis_ticks(a, b, Scale::Linear, 7);
  // 599 / 7 = 85.6 -> step 100 -> 0 .. 600
  CHECK(s.front().value == 0.0);
  CHECK(s.back().label == "600");
  CHECK(s.size() == 7);
}

TEST_CASE("svg plot: log ticks are powers of ten", "[svg_plot]") {
  double lo = 0.003, hi = 2.5;
  std::vector<Tick> t = axis_ticks(lo, hi, Scale::Log);
  CHECK(lo == Approx(0.001));
  CHECK(hi == Approx(10.0));
  std::vector<std::string> labels;
  for (const Tick& k : t) labels.push_back(k.label);
  CHECK(labels == std::vector<std::string>{"0.001", "0.01", "0.1", "1", "10"});
  double lo2 = 0.5, hi2 = 8.0;  // two decades (0.1 to 10): 2 and 5 fill in
  std::vector<Tick> u = axis_ticks(lo2, hi2, Scale::Log);
  std::vector<std::string> l2;
  for (const Tick& k : u) l2.push_back(k.label);
  CHECK(l2 == std::vector<std::string>{"0.1", "0.2", "0.5", "1", "2", "5", "10"});
}

TEST_CASE("svg plot: a two-series plot is well formed with paths ticks labels legend", "[svg_plot]") {
  PlotOptions o;
  o.title = "loss <curve> & more";
  o.x_label = "step";
  o.y_label = "loss";
  o.y_scale = Scale::Log;
  LinePlot p(o);
  Series a{"train", {1, 2, 3, 4}, {2.0, 1.0, 0.5, 0.25}};
  Series b{"eval", {1, 2, 3, 4}, {2.2, 1.3, 0.7, 0.4}};
  b.dashed = true;
  p.add(a).add(b).add_hline(0.3, "target");
  std::string svg = p.to_svg();
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(svg.size() > 20);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  std::string why;
  bool ok = balanced(svg, why);
  INFO(why);
  CHECK(ok);
  CHECK(count(svg, "class=\"series\"") == 3);
  CHECK(count(svg, "class=\"tick\"") >= 6);
  CHECK(svg.find(">step</text>") != std::string::npos);
  CHECK(svg.find(">loss</text>") != std::string::npos);
  CHECK(svg.find("loss &lt;curve&gt; &amp; more") != std::string::npos);  // escaped
  CHECK(svg.find("class=\"legend\"") != std::string::npos);
  CHECK(svg.find(">train</text>") != std::string::npos);
  CHECK(svg.find(">target</text>") != std::string::npos);
  CHECK(svg.find("stroke-dasharray") != std::string::npos);
  std::vector<double> nums = path_numbers(svg);
  CHECK(nums.size() >= 2 * (4 + 4 + 2));
  for (double v : nums) {
    CHECK(std::isfinite(v));
    CHECK(v >= 0.0);   // every point inside the canvas
    CHECK(v <= 760.0);
  }
}

TEST_CASE("svg plot: non-finite and non-positive log points break the line", "[svg_plot]") {
  PlotOptions o;
  o.y_scale = Scale::Log;
  LinePlot p(o);
  double nan = std::numeric_limits<double>::quiet_NaN();
  p.add(Series{"s", {1, 2, 3, 4, 5}, {1.0, 0.5, nan, 0.25, -1.0}});
  std::string svg = p.to_svg();
  for (double v : path_numbers(svg)) CHECK(std::isfinite(v));
  std::smatch m;
  REQUIRE(std::regex_search(svg, m, std::regex("class=\"series\"[^>]* d=\"([^\"]*)\"")));
  std::string d = m[1];
  CHECK(count(d, "M") == 2);  // two pieces: points 1-2 and point 4
  CHECK(count(d, "L") == 1);
  CHECK_THROWS_AS(p.add(Series{"bad", {1, 2}, {1}}), std::invalid_argument);
}

TEST_CASE("svg plot: an empty plot and a constant series still render", "[svg_plot]") {
  std::string why;
  std::string empty = LinePlot().to_svg();
  CHECK(balanced(empty, why));
  LinePlot flat;
  flat.add(Series{"flat", {0, 1, 2}, {3.0, 3.0, 3.0}});
  std::string svg = flat.to_svg();
  CHECK(balanced(svg, why));
  for (double v : path_numbers(svg)) CHECK(std::isfinite(v));
}

TEST_CASE("svg plot: write is atomic and reports an unwritable path", "[svg_plot]") {
  std::string path = std::string(TAPEGRAD_BINARY_DIR) + "/test_svg_plot.svg";
  LinePlot p;
  p.add(Series{"x", {0, 1}, {0, 1}});
  p.write(path);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  char head[5] = {};
  CHECK(std::fread(head, 1, 4, f) == 4);
  std::fclose(f);
  CHECK(std::string(head) == "<svg");
  std::remove(path.c_str());
  CHECK_THROWS_AS(p.write("/nonexistent-dir/x.svg"), std::runtime_error);
}
#endif
