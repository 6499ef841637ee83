#include "examples/saturation/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "autograd/tensor.hpp"
#include "ops/attention.hpp"
#include "ops/elementwise.hpp"
#include "ops/matmul.hpp"
#include "ops/softmax.hpp"

namespace tapegrad::saturation {
namespace {

// splitmix64: a well-mixed seed per (Tk, d_k), so a configuration draws the same numbers
// whichever other configurations run with it (--quick measures a subset of the full run).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(mid), v.end());
  double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  double lo = *std::max_element(v.begin(), v.begin() + std::ptrdiff_t(mid));
  return (lo + hi) / 2;
}

// Euclidean norm of each contiguous row of `width` elements, accumulated in double.
template <class T>
std::vector<double> row_norms(const T* p, std::size_t rows, std::size_t width) {
  std::vector<double> out(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    double s = 0;
    for (std::size_t j = 0; j < width; ++j) s += double(p[r * width + j]) * double(p[r * width + j]);
    out[r] = std::sqrt(s);
  }
  return out;
}

template <class T>
double max_abs_diff(const Array<T>& a, const Array<T>& b) {
  double m = 0;
  const T* pa = a.data();
  const T* pb = b.data();
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(pa[i]) - double(pb[i])));
  return m;
}

template <class T>
double max_abs(const Array<T>& a) {
  double m = 0;
  for (T x : a) m = std::max(m, std::abs(double(x)));
  return m;
}

// The raw per-row material of a set of rows, so figures can be computed on any subset.
struct RowData {
  double sum = 0, sum_sq = 0, count = 0;  // of the scores
  std::vector<double> max_weight, entropy, grad_scores, grad_q;
  double sdpa_weights_diff = 0, sdpa_grad_q_rel_diff = 0;

  void append(const RowData& o) {
    sum += o.sum;
    sum_sq += o.sum_sq;
    count += o.count;
    for (auto [dst, src] : {std::pair{&max_weight, &o.max_weight}, {&entropy, &o.entropy},
                            {&grad_scores, &o.grad_scores}, {&grad_q, &o.grad_q}})
      dst->insert(dst->end(), src->begin(), src->end());
    sdpa_weights_diff = std::max(sdpa_weights_diff, o.sdpa_weights_diff);
    sdpa_grad_q_rel_diff = std::max(sdpa_grad_q_rel_diff, o.sdpa_grad_q_rel_diff);
  }
};

struct Figures {
  double score_std, max_weight, entropy, frac_saturated, grad_scores, grad_q;
  double rms_scores, rms_q;
};

double rms(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? std::nan("") : std::sqrt(s / double(v.size()));
}

Figures figures(const RowData& d) {
  Figures f{};
  double mean = d.sum / d.count;
  f.score_std = std::sqrt(std::max(0.0, d.sum_sq / d.count - mean * mean));
  double n = double(d.max_weight.size());
  std::size_t saturated = 0;
  for (double m : d.max_weight) {
    f.max_weight += m / n;
    if (m > 0.99) ++saturated;
  }
  for (double h : d.entropy) f.entropy += h / n;
  f.frac_saturated = double(saturated) / n;
  f.grad_scores = median(d.grad_scores);
  f.grad_q = median(d.grad_q);
  f.rms_scores = rms(d.grad_scores);
  f.rms_q = rms(d.grad_q);
  return f;
}

// One chunk of groups at one scale: the composition (measured) and the library's
// attention (cross-checked) on the same inputs.
template <class T>
RowData measure(const Array<T>& Qv, const Tensor<T>& K, const Tensor<T>& V, const Array<T>& G,
                std::size_t tk, std::size_t d_k, double scale) {
  // The composition, so that the scores are a tensor on the tape whose gradient we keep.
  // scores (B, Tq, Tk) = Q (B, Tq, d_k) @ K^T (B, d_k, Tk) * scale
  Tensor<T> Q(Qv, true);
  Tensor<T> scores = mul(matmul_nt(Q, K), static_cast<T>(scale));
  scores.retain_grad();
  Tensor<T> weights = softmax(scores, -1);  // (B, Tq, Tk)
  Tensor<T> out = matmul(weights, V);       // (B, Tq, d_v)
  out.backward(G);                          // loss = sum(G * out)

  RowData d;
  const std::size_t rows = Q.size() / d_k;
  for (T x : scores.value()) {
    d.sum += double(x);
    d.sum_sq += double(x) * double(x);
  }
  d.count = double(scores.size());
  // Per-row largest weight and entropy (0 log 0 = 0: exp underflows to exact zeros).
  const T* w = weights.data();
  for (std::size_t r = 0; r < rows; ++r) {
    double m = 0, h = 0;
    for (std::size_t j = 0; j < tk; ++j) {
      double x = double(w[r * tk + j]);
      m = std::max(m, x);
      if (x > 0) h -= x * std::log(x);
    }
    d.max_weight.push_back(m);
    d.entropy.push_back(h);
  }
  d.grad_scores = row_norms(scores.grad().data(), rows, tk);
  d.grad_q = row_norms(Q.grad().data(), rows, d_k);

  // The library's attention on the same inputs.
  Tensor<T> Q2(Qv, true);
  AttentionResult<T> r = scaled_dot_product_attention(Q2, K, V, std::nullopt, scale);
  r.out.backward(G);
  d.sdpa_weights_diff = max_abs_diff(r.weights.value(), weights.value());
  double gq = max_abs(Q.grad());
  d.sdpa_grad_q_rel_diff = gq > 0 ? max_abs_diff(Q2.grad(), Q.grad()) / gq : 0.0;
  return d;
}

double rel_se(double a, double b, double all) {
  return all != 0 ? std::abs(a - b) / 2 / std::abs(all) : 0.0;
}

template <class T>
std::vector<SweepPoint> run_typed(const SweepOptions& o, SweepProgress progress) {
  const std::size_t tq = o.queries_per_group;
  if (tq == 0 || o.d_v == 0 || o.chunk_rows == 0 || o.chunk_rows % tq != 0 ||
      o.rows % o.chunk_rows != 0 || (o.rows / o.chunk_rows) % 2 != 0)
    throw std::invalid_argument(
        "sweep: rows must be an even number of chunks and a chunk a whole number of groups "
        "(rows " + std::to_string(o.rows) + ", chunk_rows " + std::to_string(o.chunk_rows) +
        ", queries_per_group " + std::to_string(tq) + ")");
  const std::size_t B = o.chunk_rows / tq;
  const std::size_t chunks = o.rows / o.chunk_rows;
  std::vector<SweepPoint> points;
  const std::size_t total = o.tks.size() * o.d_ks.size();
  std::size_t done = 0;
  for (std::size_t tk : o.tks) {
    for (std::size_t d_k : o.d_ks) {
      if (tk == 0 || d_k == 0) throw std::invalid_argument("sweep: Tk and d_k must be positive");
      auto start = std::chrono::steady_clock::now();
      const double scales[2] = {1.0 / std::sqrt(double(d_k)), 1.0};
      RowData half[2][2];  // [scaled=0 / unscaled=1][half]
      for (std::size_t c = 0; c < chunks; ++c) {
        Generator gen(mix(o.seed ^ mix((tk * 1000003ULL + d_k) * 1000003ULL + c)));
        Array<T> Q = Tensor<T>::randn({B, tq, d_k}, gen).value();
        Tensor<T> K = Tensor<T>::randn({B, tk, d_k}, gen);
        Tensor<T> V = Tensor<T>::randn({B, tk, o.d_v}, gen);
        Array<T> G = Tensor<T>::randn({B, tq, o.d_v}, gen).value();
        for (int s = 0; s < 2; ++s)
          half[s][c < chunks / 2 ? 0 : 1].append(measure(Q, K, V, G, tk, d_k, scales[s]));
      }
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      for (int s = 0; s < 2; ++s) {
        RowData all = half[s][0];
        all.append(half[s][1]);
        Figures f = figures(all), a = figures(half[s][0]), b = figures(half[s][1]);
        SweepPoint p;
        p.tk = tk;
        p.d_k = d_k;
        p.scaled = s == 0;
        p.scale = scales[s];
        p.theory_std = std::sqrt(double(d_k)) * p.scale;
        p.log_tk = std::log(double(tk));
        p.score_std = f.score_std;
        p.mean_max_weight = f.max_weight;
        p.mean_entropy = f.entropy;
        p.frac_saturated = f.frac_saturated;
        p.median_grad_scores = f.grad_scores;
        p.median_grad_q = f.grad_q;
        p.rms_grad_scores = f.rms_scores;
        p.rms_grad_q = f.rms_q;
        p.sdpa_weights_diff = all.sdpa_weights_diff;
        p.sdpa_grad_q_rel_diff = all.sdpa_grad_q_rel_diff;
        p.se_score_std = rel_se(a.score_std, b.score_std, f.score_std);
        p.se_max_weight = rel_se(a.max_weight, b.max_weight, f.max_weight);
        p.se_entropy = rel_se(a.entropy, b.entropy, f.entropy);
        p.se_grad_scores = rel_se(a.grad_scores, b.grad_scores, f.grad_scores);
        p.se_grad_q = rel_se(a.grad_q, b.grad_q, f.grad_q);
        p.seconds = seconds / 2;
        points.push_back(p);
      }
      ++done;
      if (progress) progress(done, total, points.back());
    }
  }
  return points;
}

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.8g", v);
  return buf;
}

}  // namespace

std::vector<SweepPoint> run_sweep(const SweepOptions& options, SweepProgress progress) {
  return options.use_double ? run_typed<double>(options, progress)
                            : run_typed<float>(options, progress);
}

const SweepPoint& find_point(const std::vector<SweepPoint>& points, std::size_t tk,
                             std::size_t d_k, bool scaled) {
  for (const SweepPoint& p : points)
    if (p.tk == tk && p.d_k == d_k && p.scaled == scaled) return p;
  throw std::out_of_range("sweep has no point Tk " + std::to_string(tk) + ", d_k " +
                          std::to_string(d_k) + (scaled ? ", scaled" : ", unscaled"));
}

std::string sweep_csv(const std::vector<SweepPoint>& points) {
  std::string s =
      "tk,d_k,scaling,scale,score_std,theory_std,score_std_rel_error,mean_max_weight,"
      "mean_entropy,log_tk,frac_max_weight_gt_0.99,median_grad_scores,median_grad_q,"
      "rms_grad_scores,rms_grad_q,"
      "sdpa_weights_max_abs_diff,sdpa_grad_q_max_rel_diff,se_score_std,se_mean_max_weight,"
      "se_mean_entropy,se_median_grad_scores,se_median_grad_q,seconds\n";
  for (const SweepPoint& p : points) {
    s += std::to_string(p.tk) + "," + std::to_string(p.d_k) + "," +
         (p.scaled ? "scaled" : "unscaled") + "," + fmt(p.scale) + "," + fmt(p.score_std) + "," +
         fmt(p.theory_std) + "," + fmt(p.score_std / p.theory_std - 1) + "," +
         fmt(p.mean_max_weight) + "," + fmt(p.mean_entropy) + "," + fmt(p.log_tk) + "," +
         fmt(p.frac_saturated) + "," + fmt(p.median_grad_scores) + "," + fmt(p.median_grad_q) +
         "," + fmt(p.rms_grad_scores) + "," + fmt(p.rms_grad_q) + "," + fmt(p.sdpa_weights_diff) + "," + fmt(p.sdpa_grad_q_rel_diff) + "," +
         fmt(p.se_score_std) + "," + fmt(p.se_max_weight) + "," + fmt(p.se_entropy) + "," +
         fmt(p.se_grad_scores) + "," + fmt(p.se_grad_q) + "," + fmt(p.seconds) + "\n";
  }
  return s;
}

std::string gradient_ratio_csv(const std::vector<SweepPoint>& points) {
  std::string s =
      "tk,d_k,ratio_grad_scores_unscaled_over_scaled,ratio_grad_q_unscaled_over_scaled,"
      "ratio_rms_grad_scores_unscaled_over_scaled,ratio_rms_grad_q_unscaled_over_scaled\n";
  for (const SweepPoint& p : points) {
    if (!p.scaled) continue;
    const SweepPoint& u = find_point(points, p.tk, p.d_k, false);
    s += std::to_string(p.tk) + "," + std::to_string(p.d_k) + "," +
         fmt(u.median_grad_scores / p.median_grad_scores) + "," +
         fmt(u.median_grad_q / p.median_grad_q) + "," +
         fmt(u.rms_grad_scores / p.rms_grad_scores) + "," + fmt(u.rms_grad_q / p.rms_grad_q) + "\n";
  }
  return s;
}

}  // namespace tapegrad::saturation
