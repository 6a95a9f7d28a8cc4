#pragma once
// Large magnitudes (issue 13 item 5), shared by the f32 interpreter's property test
// (tests/property/large_magnitude_props.cpp) and the Vulkan test (tests/vk/vk_large_magnitude_test.cpp):
// the ops whose correctness depends on magnitude, on inputs log-uniform up to |x| = 1e4 plus the exact
// places where the formulas change behaviour, and their gradient graphs. The error bound each output
// element is held to lives in large_magnitude_bounds.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"
#include "tensorgrad/ir/ops/ids/indexing.h"
#include "tensorgrad/ir/ops/ids/losses.h"
#include "tensorgrad/ir/ops/ids/softmax.h"

namespace tg::testing::large {

inline const std::vector<OpId>& magnitude_ops() {
  static const std::vector<OpId> ops = {op::Exp,     op::Sigmoid,    op::Tanh,          op::Gelu,        op::Silu,
                                        op::Softmax, op::LogSoftmax, op::SoftmaxCausal, op::CrossEntropy};
  return ops;
}

inline bool is_unary(OpId op) {
  return op == op::Exp || op == op::Sigmoid || op == op::Tanh || op == op::Gelu || op == op::Silu;
}

// Magnitudes where the formulas change behaviour: f32 exp overflows past ln(FLT_MAX) = 88.7228 and
// goes subnormal below ln(FLT_MIN) = -87.34 and to 0 near -103.97; f64 exp overflows past 709.78 and
// underflows below -745.13; 1 - sigmoid and 1 - tanh round to 0 in f32 from about 17 and 9; the
// Vulkan tanh switches formulas at 0.25; tiny values and zero. Both signs of each.
inline const std::vector<double>& extreme_values() {
  static const std::vector<double> values = [] {
    std::vector<double> v;
    for (double m : {0.0,      1e-30,   static_cast<double>(std::numeric_limits<float>::min()),
                     1e-7,     0.2499,  0.25,
                     0.2501,   1.0,     9.0,
                     17.0,     20.0,    44.0,
                     87.33,    88.0,    88.7,
                     88.72283, 88.7229, 89.0,
                     103.0,    104.0,   709.78,
                     710.0,    745.2,   1e4}) {
      v.push_back(static_cast<float>(m));
      v.push_back(-static_cast<float>(m));
    }
    return v;
  }();
  return values;
}

inline double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

// One value: a fifth of the time an extreme, else log-uniform magnitude in [1e-6, 1e4] of either sign.
inline double draw_value(SampleRng& rng) {
  const auto& ex = extreme_values();
  if (rng.coin(0.2)) return ex[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(ex.size()) - 1))];
  const double magnitude = std::pow(10.0, rng.uniform(-6, 4));
  return f32(rng.coin() ? magnitude : -magnitude);
}

// How one softmax row (or cross-entropy row) is filled.
enum class RowPattern : std::uint8_t {
  mixed,      // independent draw_value()s
  dominant,   // small logits and one huge one (+-1e4, 1e3 or 100)
  equal,      // every logit the same huge value
  clustered,  // a huge centre +- a few units (only the max subtraction keeps exp finite)
  tied,       // two logits at 1e4, the rest at -1e4
};

inline void fill_row(SampleRng& rng, std::vector<double>& x, const std::vector<std::size_t>& row, RowPattern p) {
  if (row.empty()) return;
  const auto pick = [&] {
    return row[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(row.size()) - 1))];
  };
  const double centre = (rng.coin() ? 1.0 : -1.0) * (rng.coin() ? 1e4 : 3000.5);
  switch (p) {
    case RowPattern::mixed:
      for (std::size_t i : row) x[i] = draw_value(rng);
      break;
    case RowPattern::dominant: {
      for (std::size_t i : row) x[i] = f32(rng.uniform(-3, 3));
      const double big[] = {1e4, -1e4, 1e3, 100.0};
      x[pick()] = big[rng.uniform_int(0, 3)];
      break;
    }
    case RowPattern::equal:
      for (std::size_t i : row) x[i] = f32(centre);
      break;
    case RowPattern::clustered:
      for (std::size_t i : row) x[i] = f32(centre + rng.uniform(-5, 5));
      break;
    case RowPattern::tied:
      for (std::size_t i : row) x[i] = -1e4;
      x[pick()] = 1e4;
      x[pick()] = 1e4;
      break;
  }
}

// One graph: input "x" (and "t", the targets of cross_entropy), output "y" = op(x) (times 2 when
// `times_two`, a fusable chain on Vulkan).
struct Case {
  OpId op = op::Exp;
  std::string label;
  Graph forward;
  TensorMap inputs;
  std::int64_t axis = -1;  // softmax / log_softmax, normalized
  Reduction reduction = Reduction::none;
  bool times_two = false;
};

inline Graph build_forward(const Case& c, const Shape& shape) {
  GraphBuilder b(std::string(op_name(c.op)) + "_large");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, shape});
  Tensor y = x;
  switch (c.op) {
    case op::Exp:
      y = exp(x);
      break;
    case op::Sigmoid:
      y = sigmoid(x);
      break;
    case op::Tanh:
      y = tanh(x);
      break;
    case op::Gelu:
      y = gelu(x);
      break;
    case op::Silu:
      y = silu(x);
      break;
    case op::Softmax:
      y = softmax(x, c.axis);
      break;
    case op::LogSoftmax:
      y = log_softmax(x, c.axis);
      break;
    case op::SoftmaxCausal:
      y = softmax_causal(x);
      break;
    case op::CrossEntropy: {
      const Tensor t = b.input("t", {DType::i32, Shape(shape.begin(), shape.end() - 1)});
      y = cross_entropy(x, t, {.reduction = c.reduction});
      break;
    }
    default:
      throw std::logic_error("not a large-magnitude op");
  }
  if (c.times_two) y = y * 2.0;
  b.output("y", y);
  return b.take();
}

// The rows the op normalizes over (element indices of x), and the elements it masks (causal).
struct Rows {
  std::vector<std::vector<std::size_t>> visible;
  std::vector<std::size_t> masked;
};

inline Rows rows_of(const Case& c) {
  const Shape& shape = c.inputs.at("x").type.shape;
  Rows rows;
  if (c.op == op::Softmax || c.op == op::LogSoftmax) {
    std::int64_t outer = 1, inner = 1;
    const auto axis = static_cast<std::size_t>(c.axis);
    for (std::size_t a = 0; a < axis; ++a) outer *= shape[a];
    for (std::size_t a = axis + 1; a < shape.size(); ++a) inner *= shape[a];
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t j = 0; j < inner; ++j) {
        std::vector<std::size_t> row;
        for (std::int64_t a = 0; a < shape[axis]; ++a)
          row.push_back(static_cast<std::size_t>((o * shape[axis] + a) * inner + j));
        rows.visible.push_back(std::move(row));
      }
    return rows;
  }
  const std::int64_t len = shape.empty() ? 1 : shape.back();
  const std::int64_t count = len == 0 ? 0 : num_elements(shape) / len;
  for (std::int64_t r = 0; r < count; ++r) {
    const std::int64_t visible = c.op == op::SoftmaxCausal ? r % len + 1 : len;
    std::vector<std::size_t> row;
    for (std::int64_t a = 0; a < len; ++a) {
      const auto i = static_cast<std::size_t>(r * len + a);
      if (a < visible) {
        row.push_back(i);
      } else {
        rows.masked.push_back(i);
      }
    }
    rows.visible.push_back(std::move(row));
  }
  return rows;
}

// A case of `op` on `shape`; row ops fill each row with a random pattern (or `pattern` for all).
inline Case make_case(OpId op, Shape shape, SampleRng& rng, std::int64_t axis = -1,
                      const RowPattern* pattern = nullptr) {
  Case c;
  c.op = op;
  c.axis = axis < 0 ? static_cast<std::int64_t>(shape.size()) + axis : axis;
  const TensorType x_type{DType::f32, shape};
  std::vector<double> x(static_cast<std::size_t>(x_type.size()));
  c.inputs.emplace("x", HostTensor::of(x_type, x));
  const Rows rows = rows_of(c);
  if (is_unary(op)) {
    for (double& v : x) v = draw_value(rng);
  } else {
    for (const auto& row : rows.visible) {
      const auto p = pattern ? *pattern : static_cast<RowPattern>(rng.uniform_int(0, 4));
      fill_row(rng, x, row, p);
    }
    for (std::size_t i : rows.masked) x[i] = draw_value(rng);  // must not matter
  }
  c.inputs.at("x") = HostTensor::of(c.inputs.at("x").type, x);
  if (op == op::CrossEntropy) {
    constexpr Reduction kReductions[] = {Reduction::none, Reduction::mean, Reduction::sum};
    c.reduction = kReductions[rng.uniform_int(0, 2)];
    std::vector<double> targets;
    for (const auto& row : rows.visible) {
      // Half the targets at the row's (first) maximum, half anywhere.
      std::size_t at = 0;
      if (rng.coin()) {
        for (std::size_t k = 1; k < row.size(); ++k)
          if (x[row[k]] > x[row[at]]) at = k;
      } else {
        at = static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(row.size()) - 1));
      }
      targets.push_back(static_cast<double>(at));
    }
    c.inputs.emplace("t", HostTensor::of({DType::i32, Shape(shape.begin(), shape.end() - 1)}, targets));
  }
  c.forward = build_forward(c, shape);
  static const char* const kReductionNames[] = {"none", "mean", "sum"};
  c.label = std::string(op_name(op)) + " " + shape_to_string(shape);
  if (op == op::Softmax || op == op::LogSoftmax) c.label += " axis " + std::to_string(c.axis);
  if (op == op::CrossEntropy) c.label += std::string(" ") + kReductionNames[static_cast<int>(c.reduction)];
  return c;
}

// A random case: unary ops on up to 300 elements; softmax rows of up to 300 along either axis of a
// rank-2 input; causal [B, T, T] with T up to 40; cross_entropy rows of up to 300 classes.
inline Case random_case(OpId op, std::uint64_t seed) {
  SampleRng rng(seed);
  const auto dim = [&](std::int64_t hi) {
    const std::int64_t edges[] = {1, 2, 31, 32, 33, 257, 300};
    return rng.coin(0.3) ? std::min(hi, edges[rng.uniform_int(0, 6)]) : rng.uniform_int(1, hi);
  };
  if (is_unary(op)) return make_case(op, {dim(300)}, rng);
  if (op == op::SoftmaxCausal) {
    const std::int64_t t = dim(40);
    return make_case(op, {rng.uniform_int(1, 2), t, t}, rng);
  }
  if (op == op::CrossEntropy) return make_case(op, {rng.uniform_int(1, 6), dim(300)}, rng);
  const std::int64_t rows = rng.uniform_int(1, 6);
  const std::int64_t cols = dim(300);
  const bool along_rows = rng.coin();
  return make_case(op, along_rows ? Shape{rows, cols} : Shape{cols, rows}, rng, along_rows ? 1 : 0);
}

// Fixed cases: every extreme value through each unary op; each row pattern on its own, on rows long
// enough for the Vulkan kernels' workgroup (257, 300) and row-segment (130 rows of 40) modes.
inline std::vector<Case> fixed_cases(OpId op) {
  std::vector<Case> cases;
  SampleRng rng(0x1e4);
  if (is_unary(op)) {
    Case c = make_case(op, {static_cast<std::int64_t>(extreme_values().size())}, rng);
    c.inputs.at("x") = HostTensor::of(c.inputs.at("x").type, extreme_values());
    c.label += " extremes";
    cases.push_back(std::move(c));
    return cases;
  }
  for (int p = 0; p <= 4; ++p) {
    const auto pattern = static_cast<RowPattern>(p);
    if (op == op::SoftmaxCausal) {
      cases.push_back(make_case(op, {2, 40, 40}, rng, -1, &pattern));
    } else {
      cases.push_back(make_case(op, {3, 300}, rng, 1, &pattern));
      cases.push_back(make_case(op, {130, 40}, rng, 1, &pattern));
      if (op != op::CrossEntropy) cases.push_back(make_case(op, {257, 2}, rng, 0, &pattern));
    }
    cases.back().label += " pattern " + std::to_string(p);
  }
  return cases;
}

// The gradient graph of loss = sum(y * w): outputs "y" and "grad.x" (and "loss", not compared: with
// infinite y it may be NaN). w is drawn with |w| in [0.25, 1] so no inf * 0 appears.
inline Graph gradient_graph(const Case& c, TensorMap& inputs, std::uint64_t seed) {
  GraphBuilder b(c.forward.name() + "_grad");
  b.mutable_graph() = c.forward;
  const ValueId y_id = *c.forward.find_output("y");
  const TensorType y_type = c.forward.type(y_id);
  {
    TracingScope scope(b);
    const Tensor w = b.input("w", y_type);
    b.output("loss", sum(b.wrap(y_id) * w));
  }
  SampleRng rng(seed);
  std::vector<double> w(static_cast<std::size_t>(y_type.size()));
  for (double& v : w) v = f32((rng.coin() ? 1 : -1) * rng.uniform(0.25, 1));
  inputs = c.inputs;
  inputs.emplace("w", HostTensor::of(y_type, w));
  return differentiate(b.take(), {.loss = "loss", .wrt = {"x"}});
}

}  // namespace tg::testing::large
