#pragma once
// One-op graphs fed adversarial placements (adversarial_values.h), each with its expected outputs
// from a plain serial loop in long double (integers exactly): the check is independent of every
// kernel, the f64 oracle's included, so a split bug the oracle shares with the f32 interpreter (one
// template) still fails. Used by tests/unit/adversarial_reductions_test.cpp (both interpreters) and
// tests/vk/vk_adversarial_test.cpp (Vulkan).
//
// Allowed error per output: units * eps(result dtype) * scale; units 0 means exact (max, min, the
// arg-reductions, and every sum of an integer pattern, which f32 holds exactly below 2^24).
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/adversarial_values.h"
#include "support/library.h"
#include "tensorgrad/ir/ops/ids/image.h"
#include "tensorgrad/ir/ops/ids/indexing.h"
#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/ir/ops/ids/losses.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "tensorgrad/ir/ops/ids/reduce.h"
#include "tensorgrad/ir/ops/ids/softmax.h"

namespace tg::testing {

using Real = long double;

struct ExpectedOutput {
  std::vector<Real> values;
  Real scale = 0;
  Real units = 0;  // 0: exact
};

struct AdversarialCase {
  std::string name;
  Graph graph;
  TensorMap inputs;
  std::map<std::string, ExpectedOutput> expected;
};

inline std::string describe_case(const std::string& op, const Shape& shape, Pattern p, std::int64_t position) {
  std::ostringstream s;
  s << op << " " << shape_to_string(shape) << " " << pattern_name(p) << " at " << position;
  return s.str();
}

// Empty when every output is within its allowed error (NaN never is); otherwise the first miss.
// `eps`: the unit of rounding of the backend's arithmetic (f32's, or f64's for the oracle).
inline std::string check_outputs(const AdversarialCase& c, const TensorMap& got, Real eps) {
  for (const auto& [name, want] : c.expected) {
    const HostTensor& g = got.at(name);
    if (g.size() != want.values.size()) return name + ": " + std::to_string(g.size()) + " elements";
    const Real allowed = want.units * eps * want.scale;
    for (std::size_t i = 0; i < want.values.size(); ++i) {
      const Real v = static_cast<Real>(g.at(i));
      const Real diff = std::fabs(v - want.values[i]);
      if (!(diff <= allowed)) {
        std::ostringstream s;
        s.precision(17);
        s << c.name << ": output " << name << "[" << i << "] is " << static_cast<double>(v)
          << ", the serial loop gives " << static_cast<double>(want.values[i]) << " (allowed error "
          << static_cast<double>(allowed) << ")";
        return s.str();
      }
    }
  }
  return "";
}

// A one-input graph: x of `shape` through build (outputs by name).
inline Graph one_input_graph(const Shape& shape, const std::function<void(GraphBuilder&, const Tensor&)>& build) {
  GraphBuilder b("adversarial");
  TracingScope scope(b);
  build(b, b.input("x", {DType::f32, shape}));
  return b.take();
}

// sum, mean, max, min, argmax, argmin of x over `axis`, against serial loops over each slice.
inline AdversarialCase reduce_case(const Shape& shape, std::size_t axis, Pattern p, std::int64_t position) {
  AdversarialCase c;
  c.name = describe_case("reduce", shape, p, position);
  const SliceLayout l = slice_layout(shape, axis);
  const std::vector<float> x = adversarial_values(l, p, position);
  const auto a = static_cast<std::int64_t>(axis);
  c.graph = one_input_graph(shape, [&](GraphBuilder& b, const Tensor& t) {
    b.output("sum", sum(t, Axes(a)));
    b.output("mean", mean(t, Axes(a)));
    b.output("max", max(t, Axes(a)));
    b.output("min", min(t, Axes(a)));
    b.output("argmax", argmax(t, a));
    b.output("argmin", argmin(t, a));
  });
  c.inputs.emplace("x", HostTensor::f32(shape, x));
  ExpectedOutput s, m, hi, lo, ahi, alo;
  Real largest_abs_sum = 0;
  for (std::int64_t o = 0; o < l.outer; ++o) {
    for (std::int64_t i = 0; i < l.inner; ++i) {
      Real total = 0, abs_total = 0;
      std::int64_t best = 0, worst = 0;
      for (std::int64_t k = 0; k < l.length; ++k) {
        const float v = x[static_cast<std::size_t>(l.index(o, k, i))];
        total += v;
        abs_total += std::fabs(Real(v));
        if (v > x[static_cast<std::size_t>(l.index(o, best, i))]) best = k;
        if (v < x[static_cast<std::size_t>(l.index(o, worst, i))]) worst = k;
      }
      largest_abs_sum = std::max(largest_abs_sum, abs_total);
      s.values.push_back(total);
      m.values.push_back(total / Real(l.length));
      hi.values.push_back(x[static_cast<std::size_t>(l.index(o, best, i))]);
      lo.values.push_back(x[static_cast<std::size_t>(l.index(o, worst, i))]);
      ahi.values.push_back(Real(best));
      alo.values.push_back(Real(worst));
    }
  }
  // The tree sums' error: about (8 + log2 n) roundings of the sum of magnitudes; 64 is far above.
  if (!integer_pattern(p)) s = {s.values, largest_abs_sum, 64};
  m = {m.values, largest_abs_sum / Real(l.length), 64};
  c.expected = {{"sum", s}, {"mean", m}, {"max", hi}, {"min", lo}, {"argmax", ahi}, {"argmin", alo}};
  return c;
}

// softmax and log_softmax along `axis`.
inline AdversarialCase softmax_case(const Shape& shape, std::size_t axis, Pattern p, std::int64_t position) {
  AdversarialCase c;
  c.name = describe_case("softmax", shape, p, position);
  const SliceLayout l = slice_layout(shape, axis);
  const std::vector<float> x = adversarial_values(l, p, position);
  const auto a = static_cast<std::int64_t>(axis);
  c.graph = one_input_graph(shape, [&](GraphBuilder& b, const Tensor& t) {
    b.output("softmax", softmax(t, a));
    b.output("log_softmax", log_softmax(t, a));
  });
  c.inputs.emplace("x", HostTensor::f32(shape, x));
  ExpectedOutput sm, lsm;
  sm.values.resize(x.size());
  lsm.values.resize(x.size());
  Real largest = 1;
  for (std::int64_t o = 0; o < l.outer; ++o) {
    for (std::int64_t i = 0; i < l.inner; ++i) {
      const auto at = [&](std::int64_t k) { return static_cast<std::size_t>(l.index(o, k, i)); };
      Real m = -std::numeric_limits<Real>::infinity(), total = 0;
      for (std::int64_t k = 0; k < l.length; ++k) m = std::max(m, Real(x[at(k)]));
      for (std::int64_t k = 0; k < l.length; ++k) total += std::exp(Real(x[at(k)]) - m);
      for (std::int64_t k = 0; k < l.length; ++k) {
        sm.values[at(k)] = std::exp(Real(x[at(k)]) - m) / total;
        lsm.values[at(k)] = (Real(x[at(k)]) - m) - std::log(total);
        largest = std::max(largest, std::fabs(lsm.values[at(k)]));
      }
    }
  }
  // A row's sum is taken in index order (n roundings) and exp is a few units off in f32.
  const Real units = 16 + Real(l.length);
  c.expected = {{"softmax", {sm.values, 1, units}}, {"log_softmax", {lsm.values, largest, units}}};
  return c;
}

// cross_entropy and nll_loss of x [N, C] with targets t_n = (n * 7 + 3) % C, every reduction.
// along_rows: the decisive row is `position` (its target logit -d and the next class +d, so both
// losses of that row are large); else every row's decisive class is `position` (targets avoid it).
inline AdversarialCase loss_case(std::int64_t rows, std::int64_t classes, bool along_rows, Pattern p,
                                 std::int64_t position) {
  AdversarialCase c;
  const Shape shape{rows, classes};
  c.name = describe_case(along_rows ? "losses (rows)" : "losses (classes)", shape, p, position);
  std::vector<std::int32_t> t(static_cast<std::size_t>(rows));
  for (std::int64_t n = 0; n < rows; ++n) {
    const std::int64_t base = (n * 7 + 3) % classes;
    t[static_cast<std::size_t>(n)] =
        static_cast<std::int32_t>(!along_rows && classes > 1 && base == position ? (base + 1) % classes : base);
  }
  std::vector<float> x;
  if (along_rows) {
    x = background_values(rows * classes, integer_pattern(p), 3);
    if (p != Pattern::small_integers) {
      const float d = p == Pattern::huge_among_small ? kHugeValue : kExtremumValue;
      const std::int64_t target = t[static_cast<std::size_t>(position)];
      x[static_cast<std::size_t>(position * classes + target)] = -d;
      if (classes > 1) x[static_cast<std::size_t>(position * classes + (target + 1) % classes)] = d;
    }
  } else {
    x = adversarial_values(slice_layout(shape, 1), p, position);
  }
  c.graph = one_input_graph(shape, [&](GraphBuilder& b, const Tensor& logits) {
    const Tensor targets = b.input("t", {DType::i32, {rows}});
    b.output("ce_none", cross_entropy(logits, targets, {.reduction = Reduction::none}));
    b.output("ce_sum", cross_entropy(logits, targets, {.reduction = Reduction::sum}));
    b.output("ce_mean", cross_entropy(logits, targets, {.reduction = Reduction::mean}));
    b.output("nll_sum", nll_loss(logits, targets, {.reduction = Reduction::sum}));
    b.output("nll_mean", nll_loss(logits, targets, {.reduction = Reduction::mean}));
  });
  c.inputs.emplace("x", HostTensor::f32(shape, x));
  c.inputs.emplace("t", HostTensor::i32({rows}, t));
  ExpectedOutput ce;
  Real ce_total = 0, ce_abs = 0, nll_total = 0, nll_abs = 0;
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* row = x.data() + n * classes;
    Real m = -std::numeric_limits<Real>::infinity(), total = 0;
    for (std::int64_t j = 0; j < classes; ++j) m = std::max(m, Real(row[j]));
    for (std::int64_t j = 0; j < classes; ++j) total += std::exp(Real(row[j]) - m);
    const Real target_logit = row[t[static_cast<std::size_t>(n)]];
    const Real loss = std::log(total) + (m - target_logit);
    ce.values.push_back(loss);
    ce_total += loss;
    ce_abs += std::fabs(loss) + 1;
    nll_total -= target_logit;
    nll_abs += std::fabs(target_logit);
  }
  // A row's classes, and the interpreter's blocks of 4096 per-position losses, add in index order.
  const Real ce_units = 64 + Real(classes) + Real(rows);
  const Real r = Real(rows);
  c.expected = {
      {"ce_none", {ce.values, std::max<Real>(1, *std::max_element(ce.values.begin(), ce.values.end())), ce_units}},
      {"ce_sum", {{ce_total}, ce_abs, ce_units}},
      {"ce_mean", {{ce_total / r}, ce_abs / r, ce_units}},
      // Integer log-probs: the sum is exact; blocks of 4096 positions add in order.
      {"nll_sum", {{nll_total}, nll_abs, integer_pattern(p) ? Real(0) : Real(64)}},
      {"nll_mean", {{nll_total / r}, nll_abs / r, 64}}};
  return c;
}

// sum_to_shape of x [length, width] to [1, width] (leading) or of [width, length] to [width, 1].
inline AdversarialCase sum_to_shape_case(std::int64_t length, std::int64_t width, bool leading, Pattern p,
                                         std::int64_t position) {
  AdversarialCase c;
  const Shape shape = leading ? Shape{length, width} : Shape{width, length};
  const Shape target = leading ? Shape{1, width} : Shape{width, 1};
  c.name = describe_case("sum_to_shape", shape, p, position);
  const SliceLayout l = slice_layout(shape, leading ? 0 : 1);
  const std::vector<float> x = adversarial_values(l, p, position);
  c.graph = one_input_graph(shape, [&](GraphBuilder& b, const Tensor& t) { b.output("y", sum_to_shape(t, target)); });
  c.inputs.emplace("x", HostTensor::f32(shape, x));
  ExpectedOutput y;
  for (std::int64_t o = 0; o < l.outer; ++o) {
    for (std::int64_t i = 0; i < l.inner; ++i) {
      Real total = 0, abs_total = 0;
      for (std::int64_t k = 0; k < l.length; ++k) {
        total += x[static_cast<std::size_t>(l.index(o, k, i))];
        abs_total += std::fabs(Real(x[static_cast<std::size_t>(l.index(o, k, i))]));
      }
      y.values.push_back(total);
      y.scale = std::max(y.scale, abs_total);
    }
  }
  y.units = integer_pattern(p) ? 0 : 64;
  c.expected = {{"y", y}};
  return c;
}

// scatter_add of updates [length, width] along axis 0 into [size, width], update a at index a % size.
inline AdversarialCase scatter_add_case(std::int64_t length, std::int64_t width, std::int64_t size, Pattern p,
                                        std::int64_t position) {
  AdversarialCase c;
  const Shape shape{length, width};
  c.name = describe_case("scatter_add", shape, p, position);
  const std::vector<float> u = adversarial_values(slice_layout(shape, 0), p, position);
  std::vector<std::int32_t> idx(u.size());
  for (std::int64_t a = 0; a < length; ++a)
    for (std::int64_t j = 0; j < width; ++j)
      idx[static_cast<std::size_t>(a * width + j)] = static_cast<std::int32_t>(a % size);
  c.graph = one_input_graph(shape, [&](GraphBuilder& b, const Tensor& t) {
    b.output("y", scatter_add(t, b.input("i", {DType::i32, shape}), 0, size));
  });
  c.inputs.emplace("x", HostTensor::f32(shape, u));
  c.inputs.emplace("i", HostTensor::i32(shape, idx));
  ExpectedOutput y;
  y.values.assign(static_cast<std::size_t>(size * width), 0);
  std::vector<Real> abs_total(y.values.size(), 0);
  for (std::int64_t a = 0; a < length; ++a) {
    for (std::int64_t j = 0; j < width; ++j) {
      const auto out = static_cast<std::size_t>((a % size) * width + j);
      y.values[out] += u[static_cast<std::size_t>(a * width + j)];
      abs_total[out] += std::fabs(Real(u[static_cast<std::size_t>(a * width + j)]));
    }
  }
  y.scale = *std::max_element(abs_total.begin(), abs_total.end());
  y.units = integer_pattern(p) ? 0 : 64;
  c.expected = {{"y", y}};
  return c;
}

// Nonzero small integers (a decisive term times zero would decide nothing).
inline std::vector<float> nonzero_integers(std::int64_t n, std::uint64_t seed) {
  std::vector<float> v = adversarial_values({1, n, 1}, Pattern::small_integers, 0, seed);
  for (float& x : v)
    if (x == 0) x = 1;
  return v;
}

// matmul of a [m, k] (the pattern along k in every row) and b [k, n] (nonzero small integers).
inline AdversarialCase matmul_case(std::int64_t m, std::int64_t k, std::int64_t n, Pattern p, std::int64_t position) {
  AdversarialCase c;
  c.name = describe_case("matmul K", Shape{m, k, n}, p, position);
  const std::vector<float> a = adversarial_values(slice_layout({m, k}, 1), p, position);
  const std::vector<float> bv = nonzero_integers(k * n, 7);
  c.graph = one_input_graph({m, k}, [&](GraphBuilder& b, const Tensor& t) {
    b.output("y", matmul(t, b.input("b", {DType::f32, {k, n}})));
  });
  c.inputs.emplace("x", HostTensor::f32({m, k}, a));
  c.inputs.emplace("b", HostTensor::f32({k, n}, bv));
  ExpectedOutput y;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      Real total = 0, abs_total = 0;
      for (std::int64_t q = 0; q < k; ++q) {
        const Real term = Real(a[static_cast<std::size_t>(i * k + q)]) * Real(bv[static_cast<std::size_t>(q * n + j)]);
        total += term;
        abs_total += std::fabs(term);
      }
      y.values.push_back(total);
      y.scale = std::max(y.scale, abs_total);
    }
  }
  y.units = integer_pattern(p) ? 0 : 2 * Real(k) + 16;
  c.expected = {{"y", y}};
  return c;
}

// conv2d (stride 1, no padding) of x [1, channels, size, size] (nonzero small integers) with w
// [2, channels, kernel, kernel], the pattern along each filter's channels * kernel^2 taps.
inline AdversarialCase conv2d_case(std::int64_t channels, std::int64_t kernel, std::int64_t size, Pattern p,
                                   std::int64_t position) {
  AdversarialCase c;
  const std::int64_t taps = channels * kernel * kernel, filters = 2, out = size - kernel + 1;
  const Shape x_shape{1, channels, size, size}, w_shape{filters, channels, kernel, kernel};
  c.name = describe_case("conv2d taps", w_shape, p, position);
  const std::vector<float> x = nonzero_integers(channels * size * size, 11);
  const std::vector<float> w = adversarial_values({filters, taps, 1}, p, position);
  c.graph = one_input_graph(x_shape, [&](GraphBuilder& b, const Tensor& t) {
    b.output("y", conv2d(t, b.input("w", {DType::f32, w_shape})));
  });
  c.inputs.emplace("x", HostTensor::f32(x_shape, x));
  c.inputs.emplace("w", HostTensor::f32(w_shape, w));
  ExpectedOutput y;
  for (std::int64_t f = 0; f < filters; ++f) {
    for (std::int64_t oh = 0; oh < out; ++oh) {
      for (std::int64_t ow = 0; ow < out; ++ow) {
        Real total = 0, abs_total = 0;
        for (std::int64_t ch = 0; ch < channels; ++ch)
          for (std::int64_t kh = 0; kh < kernel; ++kh)
            for (std::int64_t kw = 0; kw < kernel; ++kw) {
              const Real term = Real(x[static_cast<std::size_t>((ch * size + oh + kh) * size + ow + kw)]) *
                                Real(w[static_cast<std::size_t>(((f * channels + ch) * kernel + kh) * kernel + kw)]);
              total += term;
              abs_total += std::fabs(term);
            }
        y.values.push_back(total);
        y.scale = std::max(y.scale, abs_total);
      }
    }
  }
  y.units = integer_pattern(p) ? 0 : 2 * Real(taps) + 16;
  c.expected = {{"y", y}};
  return c;
}

}  // namespace tg::testing
