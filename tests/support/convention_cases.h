#pragma once
// The documented behaviour at kinks, ties and domain edges (docs/ops.md) as one table of cases,
// run on every backend: the interpreters in tests/unit/conventions_test.cpp, Vulkan in
// tests/vk/vk_conventions_test.cpp. Every expected value is written down from the convention the
// docs state (not taken from a run), and inputs sit exactly on the kink or tie, so the values are
// exact numbers (0, 1, 0.5, inf) and compare bit for bit; where the convention fixes the sign of a
// zero, that is compared too.
//
// A case with an f32 result y also has loss = sum(y * w) and is differentiated with respect to its
// f32 inputs, so the cotangent reaching y is exactly w and the graph's "grad.<input>" outputs are
// the gradients the rules give at the kink.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "support/library.h"

namespace tg::conventions {

struct Want {
  std::string output;  // "y", or "grad." + an input's name
  std::vector<double> values;
  bool zero_signs = false;  // a zero must also have the sign written here
};

struct Case {
  std::string id;  // op_situation, usable as a gtest parameter name
  Graph graph;     // "y"; for an f32 y also "loss" and the gradients
  TensorMap inputs;
  std::vector<Want> wants;
};

using Inputs = std::vector<std::pair<std::string, HostTensor>>;  // in the order the body takes them
using Body = std::function<Tensor(const std::vector<Tensor>&)>;

inline Case make_case(std::string id, const Inputs& inputs, const Body& body, const std::vector<double>& w,
                      std::vector<Want> wants) {
  GraphBuilder b("convention");
  std::vector<std::string> wrt;
  bool differentiable = false;
  TensorType y_type;
  {
    TracingScope scope(b);
    std::vector<Tensor> xs;
    for (const auto& [name, value] : inputs) {
      xs.push_back(b.input(name, value.type));
      if (value.type.dtype == DType::f32) wrt.push_back(name);
    }
    const Tensor y = body(xs);
    y_type = y.type();  // a copy: the type lives in the graph, which moves as nodes are added
    b.output("y", y);
    differentiable = y_type.dtype == DType::f32;
    if (differentiable) b.output("loss", sum(y * b.input("w", y_type)));
  }
  Case c{std::move(id), b.take(), {}, std::move(wants)};
  if (differentiable) c.graph = differentiate(c.graph, {.loss = "loss", .wrt = wrt});
  for (const auto& [name, value] : inputs) c.inputs.emplace(name, value);
  if (differentiable) c.inputs.emplace("w", HostTensor::of(y_type, w));
  return c;
}

inline HostTensor f32(Shape shape, const std::vector<float>& values) {
  return HostTensor::f32(std::move(shape), values);
}

// Rows of length `length` whose extremum (1 for max, -1 for min) sits at two positions: p and
// p + length/2 with p = row % (length/2), 0.25 (or -0.25) elsewhere. Lengths are picked for the
// kernels' launch paths (one invocation, 32-lane segments, a 256-lane group, a split row); with
// `across` the reduced axis is the first one, so the row is strided. Each row's w is 2, so each
// tied element gets exactly 1.
inline void add_long_row_cases(std::vector<Case>& cases, std::int64_t length, std::int64_t rows, bool across) {
  const std::int64_t half = length / 2;
  const auto at = [&](std::int64_t r, std::int64_t k) { return across ? k * rows + r : r * length + k; };
  std::vector<float> x(static_cast<std::size_t>(length * rows), 0.25f);
  std::vector<double> grad(x.size(), 0.0);
  std::vector<double> argmax_want, argmin_want;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t p = r % half;
    for (const std::int64_t k : {p, p + half}) {
      x[static_cast<std::size_t>(at(r, k))] = 1.f;
      grad[static_cast<std::size_t>(at(r, k))] = 1.0;
    }
    argmax_want.push_back(static_cast<double>(p));  // the first of the two maxima
    argmin_want.push_back(p == 0 ? 1.0 : 0.0);      // the first of the many 0.25s
  }
  std::vector<float> neg_x(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) neg_x[i] = -x[i];
  const Shape shape = across ? Shape{length, rows} : Shape{rows, length};
  const std::int64_t axis = across ? 0 : 1;
  const std::string tag = std::to_string(length) + (across ? "_strided" : "_contiguous");
  const std::vector<double> w(static_cast<std::size_t>(rows), 2.0);
  cases.push_back(make_case("max_two_way_tie_" + tag, {{"x", f32(shape, x)}},
                            [&](const auto& v) { return max(v[0], axis); }, w,
                            {{"y", std::vector<double>(static_cast<std::size_t>(rows), 1.0)}, {"grad.x", grad}}));
  cases.push_back(make_case("min_two_way_tie_" + tag, {{"x", f32(shape, neg_x)}},
                            [&](const auto& v) { return min(v[0], axis); }, w,
                            {{"y", std::vector<double>(static_cast<std::size_t>(rows), -1.0)}, {"grad.x", grad}}));
  cases.push_back(make_case("argmax_first_of_ties_" + tag, {{"x", f32(shape, x)}},
                            [&](const auto& v) { return argmax(v[0], axis); }, {}, {{"y", argmax_want}}));
  cases.push_back(make_case("argmin_first_of_ties_" + tag, {{"x", f32(shape, x)}},
                            [&](const auto& v) { return argmin(v[0], axis); }, {}, {{"y", argmin_want}}));
}

// The table. Comments give the rule each expected value comes from.
inline std::vector<Case> convention_cases() {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr double dnan = std::numeric_limits<double>::quiet_NaN();
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<Case> cases;
  const auto add = [&cases](std::string id, const Inputs& inputs, const Body& body, const std::vector<double>& w,
                            std::vector<Want> wants) {
    cases.push_back(make_case(std::move(id), inputs, body, w, std::move(wants)));
  };

  // minimum/maximum: a tie gives input a (its bits: the sign of a zero follows a) and a's gradient
  // is the whole cotangent wherever b does not strictly win; NaN in either input gives NaN, and then
  // b does not strictly win either, so the cotangent goes to a.
  add("minimum_tie_goes_to_a", {{"a", f32({5}, {1, 2, -0.f, 0, 3})}, {"b", f32({5}, {1, 1, 0, -0.f, 4})}},
      [](const auto& v) { return minimum(v[0], v[1]); }, {1, 2, 3, 4, 5},
      {{"y", {1, 1, -0.0, 0, 3}, true}, {"grad.a", {1, 0, 3, 4, 5}}, {"grad.b", {0, 2, 0, 0, 0}}});
  add("maximum_tie_goes_to_a", {{"a", f32({5}, {1, 2, -0.f, 0, 3})}, {"b", f32({5}, {1, 3, 0, -0.f, 2})}},
      [](const auto& v) { return maximum(v[0], v[1]); }, {1, 2, 3, 4, 5},
      {{"y", {1, 3, -0.0, 0, 3}, true}, {"grad.a", {1, 0, 3, 4, 5}}, {"grad.b", {0, 2, 0, 0, 0}}});
  // Broadcast operands [2,1] and [1,3]: the gradients are the tie rule's, summed back to each shape.
  add("minimum_tie_between_broadcast_operands", {{"a", f32({2, 1}, {1, 2})}, {"b", f32({1, 3}, {1, 2, 3})}},
      [](const auto& v) { return minimum(v[0], v[1]); }, {1, 2, 3, 4, 5, 6},
      {{"y", {1, 1, 1, 1, 2, 2}}, {"grad.a", {1 + 2 + 3, 5 + 6}}, {"grad.b", {4, 0, 0}}});
  add("maximum_tie_between_broadcast_operands", {{"a", f32({2, 1}, {1, 2})}, {"b", f32({1, 3}, {1, 2, 0})}},
      [](const auto& v) { return maximum(v[0], v[1]); }, {1, 2, 3, 4, 5, 6},
      {{"y", {1, 2, 1, 2, 2, 2}}, {"grad.a", {1 + 3, 4 + 5 + 6}}, {"grad.b", {0, 2, 0}}});
  const Inputs nan_pair = {{"a", f32({3}, {nan, 1, nan})}, {"b", f32({3}, {1, nan, nan})}};
  add("minimum_nan_gives_nan_and_a_the_gradient", nan_pair, [](const auto& v) { return minimum(v[0], v[1]); },
      {1, 2, 3}, {{"y", {dnan, dnan, dnan}}, {"grad.a", {1, 2, 3}}, {"grad.b", {0, 0, 0}}});
  add("maximum_nan_gives_nan_and_a_the_gradient", nan_pair, [](const auto& v) { return maximum(v[0], v[1]); },
      {1, 2, 3}, {{"y", {dnan, dnan, dnan}}, {"grad.a", {1, 2, 3}}, {"grad.b", {0, 0, 0}}});

  // abs: |-0| is +0; the gradient where(x < 0, -g, g) takes slope +1 at both zeros and at NaN.
  add("abs_slope_one_at_zero", {{"x", f32({5}, {0, -0.f, -2, 3, nan})}}, [](const auto& v) { return abs(v[0]); },
      {1, 2, 3, 4, 5}, {{"y", {0, 0, 2, 3, dnan}, true}, {"grad.x", {1, 2, -3, 4, 5}}});
  // relu: max(x, 0) with the tie to x, so relu(-0) is -0 (and relu(-1) the constant +0); the
  // gradient where(x > 0, g, 0) is 0 at both zeros and at NaN.
  add("relu_slope_zero_at_zero", {{"x", f32({5}, {0, -0.f, -1, 2, nan})}}, [](const auto& v) { return relu(v[0]); },
      {1, 2, 3, 4, 5}, {{"y", {0, -0.0, 0, 2, dnan}, true}, {"grad.x", {0, 0, 0, 4, 0}}});

  // clamp: min(max(x, lo), hi); the gradient is g strictly inside (lo, hi) and 0 on the bounds and
  // at NaN. An x equal to a bound is returned itself (the ties of max and min go to x), so a -0
  // stays -0 at lo = 0; outside, the result is the bound.
  add("clamp_zero_gradient_on_the_bounds", {{"x", f32({6}, {-1, 1, 0.5, -2, 2, nan})}},
      [](const auto& v) { return clamp(v[0], -1.0, 1.0); }, {1, 2, 3, 4, 5, 6},
      {{"y", {-1, 1, 0.5, -1, 1, dnan}}, {"grad.x", {0, 0, 3, 0, 0, 0}}});
  add("clamp_signed_zero_at_lo", {{"x", f32({4}, {-0.f, 0, -1, 1})}}, [](const auto& v) { return clamp(v[0], 0, 1); },
      {1, 2, 3, 4}, {{"y", {-0.0, 0, 0, 1}, true}, {"grad.x", {0, 0, 0, 0}}});
  add("clamp_signed_zero_at_hi", {{"x", f32({4}, {0, -0.f, 1, -1})}},
      [](const auto& v) { return clamp(v[0], -1, -0.0); }, {1, 2, 3, 4},
      {{"y", {0, -0.0, -0.0, -1}, true}, {"grad.x", {0, 0, 0, 0}}});
  add("clamp_lo_equal_to_hi", {{"x", f32({3}, {0, 1, 2})}}, [](const auto& v) { return clamp(v[0], 1, 1); }, {1, 2, 3},
      {{"y", {1, 1, 1}}, {"grad.x", {0, 0, 0}}});

  // max/min reductions: the cotangent is shared evenly among the elements equal to the extremum
  // (w / ties each); a NaN makes the result NaN and, since nothing equals NaN, the whole slice's
  // gradient 0/0 = NaN.
  add("max_tie_across_rows", {{"x", f32({3, 2}, {1, 5, 3, 5, 3, 2})}}, [](const auto& v) { return max(v[0], 0); },
      {2, 4}, {{"y", {3, 5}}, {"grad.x", {0, 2, 1, 2, 1, 0}}});
  add("min_three_way_tie", {{"x", f32({2, 3}, {1, 1, 1, 2, 0, 2})}}, [](const auto& v) { return min(v[0], 1); }, {3, 5},
      {{"y", {1, 0}}, {"grad.x", {1, 1, 1, 0, 5, 0}}});
  add("max_all_axes_keep_dims", {{"x", f32({2, 2}, {4, 1, 2, 4})}},
      [](const auto& v) { return max(v[0], Axes::all(), {.keep_dims = true}); }, {1},
      {{"y", {4}}, {"grad.x", {0.5, 0, 0, 0.5}}});
  // Axes {0, 2} of x[i, j, k]: slice j = 0 holds 7 twice, slice j = 1 is four 3s.
  add("max_ties_over_two_axes", {{"x", f32({2, 2, 2}, {7, 1, 3, 3, 2, 7, 3, 3})}},
      [](const auto& v) {
        return max(v[0], {0, 2});
      },
      {2, 4}, {{"y", {7, 3}}, {"grad.x", {1, 0, 1, 1, 0, 1, 1, 1}}});
  add("min_ties_over_two_axes", {{"x", f32({2, 2, 2}, {-7, -1, -3, -3, -2, -7, -3, -3})}},
      [](const auto& v) {
        return min(v[0], {0, 2});
      },
      {2, 4}, {{"y", {-7, -3}}, {"grad.x", {1, 0, 1, 1, 0, 1, 1, 1}}});
  add("max_nan_slice", {{"x", f32({2, 3}, {1, nan, 3, 1, 2, 2})}}, [](const auto& v) { return max(v[0], 1); }, {1, 2},
      {{"y", {dnan, 2}}, {"grad.x", {dnan, dnan, dnan, 0, 1, 1}}});
  add("min_nan_slice", {{"x", f32({2, 3}, {1, nan, -3, 1, 0, 0})}}, [](const auto& v) { return min(v[0], 1); }, {1, 2},
      {{"y", {dnan, 0}}, {"grad.x", {dnan, dnan, dnan, 0, 1, 1}}});
  // -0 and +0 are equal, so they tie and share (which zero the result is, is not specified).
  add("max_signed_zeros_tie", {{"x", f32({2, 2}, {-0.f, 0, 0, -0.f})}}, [](const auto& v) { return max(v[0], 1); },
      {2, 4}, {{"y", {0, 0}}, {"grad.x", {1, 1, 2, 2}}});
  for (const bool across : {false, true}) {
    add_long_row_cases(cases, 5, 3, across);
    add_long_row_cases(cases, 40, 130, across);
    add_long_row_cases(cases, 300, 1, across);
    add_long_row_cases(cases, 40000, 2, across);
  }

  // argmax/argmin: the first index wins a tie (-0 and +0 included) and the first NaN wins over all.
  add("argmax_first_of_ties", {{"x", f32({2, 3}, {1, 3, 3, 2, 2, 1})}}, [](const auto& v) { return argmax(v[0], 1); },
      {}, {{"y", {1, 0}}});
  add("argmin_first_of_ties", {{"x", f32({2, 3}, {1, 3, 1, 2, 2, 2})}}, [](const auto& v) { return argmin(v[0], 1); },
      {}, {{"y", {0, 0}}});
  add("argmax_ties_across_rows", {{"x", f32({3, 2}, {1, 5, 3, 5, 3, 2})}},
      [](const auto& v) { return argmax(v[0], 0, {.keep_dims = true}); }, {}, {{"y", {1, 0}}});
  add("argmin_ties_across_rows", {{"x", f32({3, 2}, {1, 5, 1, 2, 3, 2})}},
      [](const auto& v) { return argmin(v[0], 0); }, {}, {{"y", {0, 1}}});
  add("argmax_flat_first_of_ties", {{"x", f32({2, 2}, {1, 5, 5, 2})}}, [](const auto& v) { return argmax(v[0]); }, {},
      {{"y", {1}}});
  add("argmin_flat_first_of_ties", {{"x", f32({2, 2}, {2, 1, 1, 5})}},
      [](const auto& v) { return argmin(v[0], std::nullopt, {.keep_dims = true}); }, {}, {{"y", {1}}});
  add("argmax_first_nan", {{"x", f32({4}, {1, nan, 3, nan})}}, [](const auto& v) { return argmax(v[0], 0); }, {},
      {{"y", {1}}});
  add("argmin_first_nan", {{"x", f32({4}, {1, nan, 0, nan})}}, [](const auto& v) { return argmin(v[0], 0); }, {},
      {{"y", {1}}});
  add("argmax_signed_zeros_tie", {{"x", f32({2}, {-0.f, 0})}}, [](const auto& v) { return argmax(v[0], 0); }, {},
      {{"y", {0}}});
  add("argmin_signed_zeros_tie", {{"x", f32({2}, {0, -0.f})}}, [](const auto& v) { return argmin(v[0], 0); }, {},
      {{"y", {0}}});
  // argmax has no gradient, but gathering at it routes the cotangent to the first tied index only
  // (PyTorch's max(dim) convention), unlike max's even share.
  add("take_along_axis_at_argmax_first_tie", {{"x", f32({2, 3}, {1, 3, 3, 2, 2, 1})}},
      [](const auto& v) { return take_along_axis(v[0], argmax(v[0], 1, {.keep_dims = true}), 1); }, {1, 2},
      {{"y", {3, 2}}, {"grad.x", {0, 1, 0, 2, 0, 0}}});

  // max_pool2d: each window's cotangent goes to its first maximum in row-major window order, or to
  // its first NaN; overlapping windows add.
  add("max_pool2d_ties_in_overlapping_windows", {{"x", f32({1, 1, 3, 3}, {1, 1, 2, 1, 1, 2, 0, 0, 0})}},
      [](const auto& v) { return max_pool2d(v[0], 2, {.stride = 1}); }, {1, 2, 3, 4},
      {{"y", {1, 2, 1, 2}}, {"grad.x", {1, 0, 2, 3, 0, 4, 0, 0, 0}}});
  add("max_pool2d_all_equal", {{"x", f32({1, 1, 2, 3}, {1, 1, 1, 1, 1, 1})}},
      [](const auto& v) { return max_pool2d(v[0], 2, {.stride = 1}); }, {1, 2},
      {{"y", {1, 1}}, {"grad.x", {1, 2, 0, 0, 0, 0}}});
  add("max_pool2d_first_nan", {{"x", f32({1, 1, 2, 2}, {nan, 1, nan, 2})}},
      [](const auto& v) { return max_pool2d(v[0], 2); }, {1}, {{"y", {dnan}}, {"grad.x", {1, 0, 0, 0}}});

  // Domain edges: sqrt'(0) = g / (2 * 0), rsqrt'(0) = -g inf^3 / 2, log'(0) = g / 0; x / 0 is
  // +-inf by the signs, 0 / 0 NaN; div's gradients g / b and -(g / b) out follow IEEE.
  add("sqrt_at_zero", {{"x", f32({1}, {0})}}, [](const auto& v) { return sqrt(v[0]); }, {1},
      {{"y", {0}, true}, {"grad.x", {inf}}});
  add("rsqrt_at_zero", {{"x", f32({1}, {0})}}, [](const auto& v) { return rsqrt(v[0]); }, {1},
      {{"y", {inf}}, {"grad.x", {-inf}}});
  add("log_at_zero", {{"x", f32({1}, {0})}}, [](const auto& v) { return log(v[0]); }, {1},
      {{"y", {-inf}}, {"grad.x", {inf}}});
  add("div_by_zero", {{"a", f32({4}, {1, -1, 0, 1})}, {"b", f32({4}, {0, 0, 0, -0.f})}},
      [](const auto& v) { return v[0] / v[1]; }, {1, 1, 1, 1},
      {{"y", {inf, -inf, dnan, -inf}}, {"grad.a", {inf, inf, inf, -inf}}, {"grad.b", {-inf, inf, dnan, -inf}}});

  // where with a broadcast condition [2,1], branch [1,3] and a 0-d branch: each branch's gradient
  // is the cotangent where it was picked, summed back to its shape.
  add("where_broadcast_branches",
      {{"c", HostTensor::of({DType::boolean, {2, 1}}, {1, 0})}, {"a", f32({1, 3}, {1, 2, 3})}, {"b", f32({}, {9})}},
      [](const auto& v) { return where(v[0], v[1], v[2]); }, {1, 2, 3, 4, 5, 6},
      {{"y", {1, 2, 3, 9, 9, 9}}, {"grad.a", {1, 2, 3}}, {"grad.b", {4 + 5 + 6}}});
  return cases;
}

// The table's ids, in order (gtest parameter names).
inline std::vector<std::string> convention_case_ids() {
  std::vector<std::string> ids;
  for (const Case& c : convention_cases()) ids.push_back(c.id);
  return ids;
}

// Compares one backend's outputs with the case's wants: equal values (NaN matching NaN), and equal
// signs of zero where the want says so.
inline void expect_conventions(const TensorMap& got, const Case& c, const std::string& backend) {
  for (const Want& want : c.wants) {
    const auto it = got.find(want.output);
    ASSERT_NE(it, got.end()) << c.id << " on " << backend << ": no output " << want.output;
    const auto values = it->second.to_f64();
    ASSERT_EQ(values.size(), want.values.size()) << c.id << " on " << backend << ": " << want.output;
    int failures = 0;
    for (std::size_t i = 0; i < values.size() && failures < 8; ++i) {
      const double w = want.values[i];
      const double v = values[i];
      const bool same =
          std::isnan(w) ? std::isnan(v) : v == w && (!want.zero_signs || w != 0 || std::signbit(v) == std::signbit(w));
      EXPECT_TRUE(same) << c.id << " on " << backend << ": " << want.output << "[" << i << "] is " << v
                        << (v == 0 && std::signbit(v) ? " (-0)" : "") << ", want " << w
                        << (w == 0 && std::signbit(w) ? " (-0)" : "");
      failures += same ? 0 : 1;
    }
  }
}

}  // namespace tg::conventions
