#pragma once
// The error each output of a large-magnitude case (large_magnitude.h) may carry against the f64
// oracle, and the comparison. Bounds are relative to the output element itself, never to the
// input's magnitude: allowed(i) = eps_f32 * (rel(i) * |want(i)| + abs(i)) + a floor of a few
// subnormal steps. rel comes from counting the roundings of the f32 formula and the formula's
// conditioning (how far a rounding of an intermediate moves the result); abs only where the
// formula subtracts terms that cancel, as a multiple of those terms' size. Overflow: the oracle
// rounded to f32 is the answer, so a result past FLT_MAX must be the infinity of its sign.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/large_magnitude.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"
#include "tensorgrad/ir/ops/ids/losses.h"
#include "tensorgrad/ir/ops/ids/softmax.h"

namespace tg::testing::large {

constexpr double kEps = std::numeric_limits<float>::epsilon();
constexpr double kDenormMin = std::numeric_limits<float>::denorm_min();
constexpr double kFloatMin = std::numeric_limits<float>::min();

// Budgets in units of eps_f32 relative to the element (one rounding is at most 0.5).
// exp of an exact input: the interpreter's expf is within 1 ulp; the Vulkan ew_exp reduces x to
// |r| <= ln2/2 exactly enough (Cody-Waite) that the driver's exp(r) and the rounding of the oracle
// decide: 3.
constexpr double kExp = 3;
// sigmoid: exp(-|x|), 1 + e, one division (e / (1 + e) for x < 0), each rounded once: exp's + 2.
constexpr double kSigmoid = kExp + 2;
// tanh: the interpreter's tanhf is within 2 ulp; Vulkan's odd polynomial below 0.25 is within
// 1 ulp and (1 - t) / (1 + t) from t = exp(-2|x|) above amplifies t's error by t / (1 - t) <= 1.6.
constexpr double kTanh = 2 * kExp + 3;

// Summing n positive terms: the suite's reduction class (sqrt(n) growth, src/ir/ops/registry.cpp).
inline double sum_budget(std::size_t n) {
  return tolerance_ulps(ToleranceClass::reduction, static_cast<std::int64_t>(n));
}

struct Allowed {
  std::vector<double> bound;  // absolute, per element
  // Elements where the infinity of the oracle's sign is accepted too: a gradient formed from a
  // forward value that itself overflows f32 (w exp(x) for x past 88.72: the f32 exp(x) is
  // correctly inf, and no rule that reuses it gets back the finite product).
  std::vector<char> overflow_ok;
};

inline long double sigmoid_ld(long double x) {
  return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
}

// gelu's inner argument v = 2u = 2 sqrt(2/pi) (x + 0.044715 x^3): sigmoid(v) = (1 + tanh(u)) / 2.
inline long double gelu_v(long double x) { return 2 * 0.7978845608028654L * (x + 0.044715L * x * x * x); }

// Per-row sums the bounds of the row ops need, in long double from the f32 inputs.
struct RowStats {
  long double max = 0, sum = 0;
};
inline RowStats row_stats(const std::vector<double>& x, const std::vector<std::size_t>& row) {
  RowStats s;
  s.max = -std::numeric_limits<long double>::infinity();
  for (std::size_t i : row) s.max = std::max<long double>(s.max, x[i]);
  for (std::size_t i : row) s.sum += std::exp(static_cast<long double>(x[i]) - s.max);
  return s;
}

// Softmax's relative budget for element i of a row of n: exp's own; |x_i - m|, because x_i - m is
// rounded to f32 (an absolute error of at most |x_i - m| eps/2, which exp turns into that relative
// error; Vulkan's built-in exp(d) = exp2(d log2 e) adds as much again through the product); the
// sum of n positive terms; the division.
inline double softmax_rel(long double d, std::size_t n) {
  return kExp + 2 * std::fabs(static_cast<double>(d)) + sum_budget(n) + 1;
}

// log_softmax and cross_entropy: (x - m) - log(S) adds two non-positive terms (nothing cancels), so
// the rounding of x - m costs 1 relative; log(S) carries S's relative error as an absolute one
// (d log S = dS / S, and S >= 1, so a term of about 1 that no formula without log1p avoids), plus
// log's own: 1 ulp in the interpreter, 2^-21 = 4 eps absolute on [0.5, 2] and 3 ulp elsewhere in
// the Vulkan spec.
inline double log_sum_abs(long double sum, std::size_t n) {
  return sum_budget(n) + 4 + 3 * std::log(static_cast<double>(sum));
}

// The forward bound of c's output "y" (f64 oracle values `want`).
inline Allowed forward_allowed(const Case& c, const std::vector<double>& want, double tiny_unit = kDenormMin) {
  const auto x = c.inputs.at("x").to_f64();
  Allowed a;
  a.bound.assign(want.size(), 0);
  if (is_unary(c.op)) {
    for (std::size_t i = 0; i < want.size(); ++i) {
      double rel = 0;
      switch (c.op) {
        case op::Exp:
          rel = kExp;
          break;
        case op::Sigmoid:
          rel = kSigmoid;
          break;
        case op::Tanh:
          rel = kTanh;
          break;
        case op::Silu:
          rel = kSigmoid + 1;
          break;  // times x
        // x sigmoid(v): v carries up to 7 roundings (5 operations, 2 rounded constants; x + k x^3
        // adds terms of one sign), 3.5 eps relative, and sigmoid's relative sensitivity to its
        // argument is |v| (1 - sigmoid(v)) <= |v|: the formula's conditioning, not a fault.
        case op::Gelu:
          rel = kSigmoid + 2 + 3.5 * std::fabs(static_cast<double>(gelu_v(x[i])));
          break;
        default:
          break;
      }
      // A subnormal result is off by its rounding (a step of tiny_unit), and a product x s with s
      // subnormal by s's times |x|.
      const bool product = c.op == op::Silu || c.op == op::Gelu;
      a.bound[i] = kEps * rel * std::fabs(want[i]) + (product ? 2 + 2 * std::fabs(x[i]) : 2) * tiny_unit;
    }
  } else if (c.op == op::CrossEntropy) {
    const auto t = c.inputs.at("t").to_f64();
    const Rows rows = rows_of(c);
    double abs_total = 0;
    for (std::size_t r = 0; r < rows.visible.size(); ++r) {
      const RowStats s = row_stats(x, rows.visible[r]);
      const double abs = log_sum_abs(s.sum, rows.visible[r].size());
      abs_total += abs;
      if (c.reduction == Reduction::none) a.bound[r] = kEps * (2 * std::fabs(want[r]) + abs);
      (void)t;
    }
    if (c.reduction != Reduction::none) {
      // The row losses are non-negative: their sum's rounding is the reduction class over rows.
      const double rows_n = static_cast<double>(rows.visible.size());
      const double abs = c.reduction == Reduction::mean ? abs_total / rows_n : abs_total;
      a.bound[0] = kEps * ((3 + sum_budget(rows.visible.size())) * std::fabs(want[0]) + abs);
    }
  } else {
    const Rows rows = rows_of(c);
    for (const auto& row : rows.visible) {
      const RowStats s = row_stats(x, row);
      for (std::size_t i : row) {
        const long double d = x[i] - s.max;
        const double b = c.op == op::LogSoftmax ? kEps * (2 * std::fabs(want[i]) + log_sum_abs(s.sum, row.size()))
                                                : kEps * softmax_rel(d, row.size()) * std::fabs(want[i]);
        a.bound[i] = b + 4 * tiny_unit;
      }
    }
    for (std::size_t i : rows.masked) a.bound[i] = 0;
  }
  if (c.times_two)
    for (double& b : a.bound) b *= 2;
  return a;
}

// The bound of "grad.x" in the gradient graph of loss = sum(y * w). `y` and `grad` are the f64
// oracle's values of the forward output and the gradient.
inline Allowed gradient_allowed(const Case& c, const TensorMap& inputs, const std::vector<double>& y,
                                const std::vector<double>& grad, double tiny_unit = kDenormMin) {
  const auto x = inputs.at("x").to_f64();
  const auto w = inputs.at("w").to_f64();
  Allowed a;
  a.bound.assign(grad.size(), 0);
  a.overflow_ok.assign(grad.size(), 0);
  if (is_unary(c.op)) {
    for (std::size_t i = 0; i < grad.size(); ++i) {
      const long double xi = x[i];
      double scale = std::fabs(grad[i]);  // the size of the terms the rule adds (where they cancel)
      double rel = 0;
      double tiny = 2;  // steps of tiny_unit the products may carry (see forward_allowed)
      switch (c.op) {
        case op::Exp:  // w * exp(x)
          rel = kExp + 1;
          if (std::isinf(static_cast<float>(std::exp(xi)))) a.overflow_ok[i] = 1;
          break;
        // w * s(x) * s(-x): two sigmoids, two products.
        case op::Sigmoid:
          rel = 2 * kSigmoid + 2;
          break;
        // w * 4 s(2x) s(-2x) (2x exact): two sigmoids, three products.
        case op::Tanh:
          rel = 2 * kSigmoid + 3;
          tiny = 8;
          break;
        // w * s(x) (1 + x s(-x)): the sum cancels near x = -1.28, where silu' = 0; the bound is
        // relative to the terms' size.
        case op::Silu:
          scale = std::fabs(w[i]) * static_cast<double>(sigmoid_ld(xi) * (1 + std::fabs(xi * sigmoid_ld(-xi))));
          rel = 2 * kSigmoid + 3;
          tiny = 2 + 2 * std::fabs(x[i]);
          break;
        // w * s(v) (1 + 2x s(-v) v'/2): v's rounding (3.5 eps relative, see forward_allowed) reaches
        // each sigmoid scaled by |v|; v' = 2c(1 + 3k x^2) is 4 roundings; the sum cancels near
        // x = -0.75, where gelu' = 0, so the bound is relative to the terms' size.
        case op::Gelu: {
          const long double v = gelu_v(xi);
          const long double dv = 2 * 0.7978845608028654L * (1 + 3 * 0.044715L * xi * xi);
          const long double inner = std::fabs(xi * sigmoid_ld(-v) * dv);
          scale = std::fabs(w[i]) * static_cast<double>(sigmoid_ld(v) * (1 + inner));
          rel = 2 * kSigmoid + 8 + 7 * std::fabs(static_cast<double>(v));
          tiny = 4 * static_cast<double>(1 + inner);
          break;
        }
        default:
          break;
      }
      a.bound[i] = kEps * rel * scale + tiny * tiny_unit;
    }
    return a;
  }
  const Rows rows = rows_of(c);
  if (c.op == op::CrossEntropy) {
    // grad = (softmax(x) - onehot(t)) * c, c the row's cotangent (w, or w / N for a mean).
    const auto t = inputs.at("t").to_f64();
    const double n_rows = static_cast<double>(rows.visible.size());
    for (std::size_t r = 0; r < rows.visible.size(); ++r) {
      const auto& row = rows.visible[r];
      const RowStats s = row_stats(x, row);
      const double cot =
          c.reduction == Reduction::none ? w[r] : (c.reduction == Reduction::mean ? w[0] / n_rows : w[0]);
      for (std::size_t k = 0; k < row.size(); ++k) {
        const std::size_t i = row[k];
        const long double d = x[i] - s.max;
        const double p = static_cast<double>(std::exp(d) / s.sum);
        const double target = static_cast<double>(k) == t[r] ? 1.0 : 0.0;
        // p's softmax bound; p - 1 at the target cancels when p ~ 1 (an absolute eps of 1).
        a.bound[i] = kEps * ((softmax_rel(d, row.size()) + 1) * p * std::fabs(cot) + 3 * std::fabs(grad[i]) +
                             target * std::fabs(cot)) +
                     4 * tiny_unit;
      }
    }
    return a;
  }
  for (const auto& row : rows.visible) {
    const RowStats s = row_stats(x, row);
    const double n_budget = sum_budget(row.size());
    if (c.op == op::LogSoftmax) {
      // grad = w - exp(y) sum(w): exp(y) carries y's absolute bound as a relative one, the sum of w
      // the reduction class; the difference cancels where exp(y) sum(w) ~ w.
      double w_sum = 0, w_abs = 0;
      for (std::size_t i : row) {
        w_sum += w[i];
        w_abs += std::fabs(w[i]);
      }
      const double y_abs = log_sum_abs(s.sum, row.size());
      for (std::size_t i : row) {
        const double p = std::exp(y[i]);
        const double rel_y = 2 * std::fabs(y[i]) + y_abs;  // y's bound in eps, absolute
        a.bound[i] = kEps * (2 * std::fabs(grad[i]) + 2 * std::fabs(w[i]) + p * std::fabs(w_sum) * (rel_y + kExp + 1) +
                             p * n_budget * w_abs) +
                     4 * tiny_unit;
      }
      continue;
    }
    // softmax and softmax_causal: grad = y (w - sum(w y)). Each y_j carries its softmax bound B_j,
    // which reaches the sum as B_j |w_j y_j|; the sum's own rounding is the reduction class; the
    // difference cancels (sum(w y) is a weighted mean of w), so its terms' size counts.
    double dot_err = 0;
    for (std::size_t j : row) dot_err += (softmax_rel(x[j] - s.max, row.size()) + n_budget) * std::fabs(w[j] * y[j]);
    for (std::size_t i : row) {
      const double b_i = softmax_rel(x[i] - s.max, row.size());
      a.bound[i] =
          kEps * ((b_i + 2) * std::fabs(grad[i]) + std::fabs(y[i]) * (std::fabs(w[i]) + dot_err)) + 4 * tiny_unit;
    }
  }
  for (std::size_t i : rows.masked) a.bound[i] = 0;
  return a;
}

// The outcome of comparing one output: the first failures, and the largest error / bound seen.
struct Comparison {
  std::optional<std::string> failure;
  double worst = 0;  // max over elements of |got - want| / allowed (0 where both are equal)
};

inline std::string fmt(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

// `floor` is added to every bound: where a device flushes subnormals to zero, a multiple of FLT_MIN.
inline Comparison compare(const std::string& what, const std::vector<double>& x, const std::vector<double>& want,
                          const std::vector<double>& got, const Allowed& allowed, double floor = 0) {
  Comparison out;
  int bad = 0;
  std::string text;
  const double huge = std::ldexp(1.0, 128);  // one f32 ulp past FLT_MAX: where infinity sits
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double w = want[i], g = got[i];
    const double rounded = static_cast<double>(static_cast<float>(w));
    bool ok = false;
    double ratio = 0;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);  // NaN only where the oracle gives NaN
    } else if (std::isinf(rounded) && std::fabs(w) > huge) {
      ok = g == rounded;  // past FLT_MAX by more than an ulp: the infinity of its sign, exactly
    } else {
      // Infinity counts as 2^128 (the overflow threshold's side), so a correctly rounded result
      // just past FLT_MAX is one ulp from FLT_MAX.
      const double gv = std::isinf(g) ? std::copysign(huge, g) : g;
      const double wv = std::clamp(w, -huge, huge);
      const double err = std::fabs(gv - wv);
      const double bound = allowed.bound[i] + floor;
      ratio = err == 0 ? 0 : (bound > 0 ? err / bound : std::numeric_limits<double>::infinity());
      ok = err <= bound;
    }
    if (!ok && i < allowed.overflow_ok.size() && allowed.overflow_ok[i] && std::isinf(g) &&
        std::signbit(g) == std::signbit(w)) {
      ok = true;
      ratio = 0;
    }
    out.worst = std::max(out.worst, ok ? ratio : std::numeric_limits<double>::infinity());
    if (!ok && ++bad <= 5) {
      text += "  " + what + "[" + std::to_string(i) + "] at x = " + (i < x.size() ? fmt(x[i]) : std::string("-")) +
              ": got " + fmt(g) + ", f64 oracle " + fmt(w) + " (allowed error " + fmt(allowed.bound[i] + floor) + ")\n";
    }
  }
  if (bad > 0) out.failure = std::to_string(bad) + " elements of " + what + " off:\n" + text;
  return out;
}

}  // namespace tg::testing::large
