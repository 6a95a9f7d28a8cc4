// The reduce family: forward values in both compute types against plain loops written here
// (sum/mean/max/min over axis sets, argmax/argmin), the large blocked paths, thread-count
// independence, shape and dtype errors, and, for every op the registry lists in the family, the
// OpDef parts, f32 against the oracle and the grad rules against finite differences.
#include "tensorgrad/ir/ops/ids/reduce.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/op_family.h"
#include "support/test_values.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Shape;
using tg::Tensor;

constexpr std::string_view kFamily = "reduce";

constexpr ComputeType kBothComputeTypes[] = {ComputeType::f64, ComputeType::f32};

using tg::testing::test_values;

// check_coverage (NaN sentinels) must be off where a NaN result is expected.
HostTensor run(const HostTensor& input, const std::function<Tensor(const Tensor&)>& build, ComputeType compute,
               bool check_coverage = true) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  b.output("y", build(b.input("x", input.type)));
  const tg::Graph g = b.take();
  return tg::interpret(g, {{"x", input}}, {.compute = compute, .check_coverage = check_coverage}).outputs.at("y");
}

enum class Reduction { sum, mean, max, min };

Tensor apply(Reduction r, const Tensor& x, tg::Axes axes, bool keep_dims) {
  switch (r) {
    case Reduction::sum:
      return tg::sum(x, axes, {.keep_dims = keep_dims});
    case Reduction::mean:
      return tg::mean(x, axes, {.keep_dims = keep_dims});
    case Reduction::max:
      return tg::max(x, axes, {.keep_dims = keep_dims});
    case Reduction::min:
      return tg::min(x, axes, {.keep_dims = keep_dims});
  }
  return x;
}

struct Expected {
  std::vector<double> values;
  std::vector<double> magnitude;  // sum of |x| over each slice, to scale the f32 tolerance
};

// Plain loop over every input element: drop the reduced coordinates to find its output element.
Expected reference_reduce(Reduction r, const Shape& shape, const std::vector<float>& x,
                          const std::vector<bool>& reduced) {
  std::int64_t out_size = 1, count = 1;
  for (std::size_t a = 0; a < shape.size(); ++a) (reduced[a] ? count : out_size) *= shape[a];
  const double init = r == Reduction::max ? -INFINITY : r == Reduction::min ? INFINITY : 0.0;
  Expected e{std::vector<double>(static_cast<std::size_t>(out_size), init),
             std::vector<double>(static_cast<std::size_t>(out_size), 0.0)};
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::int64_t rest = static_cast<std::int64_t>(i), out = 0, scale = 1;
    for (std::size_t a = shape.size(); a-- > 0;) {
      const std::int64_t coord = rest % shape[a];
      rest /= shape[a];
      if (!reduced[a]) {
        out += coord * scale;
        scale *= shape[a];
      }
    }
    const double v = x[i];
    double& acc = e.values[static_cast<std::size_t>(out)];
    if (r == Reduction::max)
      acc = std::max(acc, v);
    else if (r == Reduction::min)
      acc = std::min(acc, v);
    else
      acc += v;
    e.magnitude[static_cast<std::size_t>(out)] += std::fabs(v);
  }
  if (r == Reduction::mean) {
    for (std::size_t o = 0; o < e.values.size(); ++o) {
      e.values[o] /= static_cast<double>(count);
      e.magnitude[o] /= static_cast<double>(count);
    }
  }
  return e;
}

void check_reduction(Reduction r, const Shape& shape, tg::Axes axes, bool keep_dims, const Shape& expected_shape) {
  const auto x = test_values(tg::num_elements(shape), static_cast<std::uint64_t>(tg::num_elements(shape)) + 7);
  std::vector<bool> reduced(shape.size(), !axes.list().has_value());
  if (axes.list()) {
    for (auto a : *axes.list()) reduced[static_cast<std::size_t>(a < 0 ? a + std::ssize(shape) : a)] = true;
  }
  const Expected e = reference_reduce(r, shape, x, reduced);
  for (ComputeType compute : kBothComputeTypes) {
    const HostTensor y = run(
        HostTensor::f32(shape, x), [&](const Tensor& t) { return apply(r, t, axes, keep_dims); }, compute);
    ASSERT_EQ(y.type, (tg::TensorType{DType::f32, expected_shape}));
    ASSERT_EQ(y.size(), e.values.size());
    for (std::size_t o = 0; o < e.values.size(); ++o) {
      if (r == Reduction::max || r == Reduction::min) {
        EXPECT_EQ(y.at(o), e.values[o]) << "element " << o;  // the result is one of the inputs
      } else {
        const double rel = compute == ComputeType::f64 ? 1e-13 : 2e-6 * std::sqrt(static_cast<double>(x.size()));
        EXPECT_NEAR(y.at(o), e.values[o], rel * (e.magnitude[o] + 1e-30)) << "element " << o;
      }
    }
  }
}

constexpr Reduction kAllReductions[] = {Reduction::sum, Reduction::mean, Reduction::max, Reduction::min};

TEST(Reduce, SingleAxes) {
  for (Reduction r : kAllReductions) {
    check_reduction(r, {3, 4, 5}, 0, false, {4, 5});
    check_reduction(r, {3, 4, 5}, 1, false, {3, 5});
    check_reduction(r, {3, 4, 5}, 2, false, {3, 4});
    check_reduction(r, {3, 4, 5}, -1, false, {3, 4});
    check_reduction(r, {3, 4, 5}, -3, true, {1, 4, 5});
    check_reduction(r, {7}, 0, false, {});
  }
}

TEST(Reduce, SeveralAxes) {
  for (Reduction r : kAllReductions) {
    check_reduction(r, {3, 4, 5}, {0, 2}, false, {4});
    check_reduction(r, {3, 4, 5}, {2, 0}, true, {1, 4, 1});
    check_reduction(r, {3, 4, 5}, {-1, -2}, false, {3});
    check_reduction(r, {2, 3, 4, 5}, {0, 2}, false, {3, 5});
    check_reduction(r, {2, 1, 3, 4}, {1, 3}, true, {2, 1, 3, 1});
  }
}

TEST(Reduce, AllAxes) {
  for (Reduction r : kAllReductions) {
    check_reduction(r, {3, 4, 5}, tg::Axes::all(), false, {});
    check_reduction(r, {3, 4, 5}, tg::Axes::all(), true, {1, 1, 1});
    check_reduction(r, {3, 4, 5}, {0, 1, 2}, false, {});
    check_reduction(r, {}, tg::Axes::all(), false, {});
  }
}

// Long slices take the tiled and blocked paths: many outputs along a wide inner axis, a reduction
// over the leading axis (strided rows), and huge slices split into fixed blocks.
TEST(Reduce, LargeShapesTakeEveryPath) {
  for (Reduction r : kAllReductions) {
    check_reduction(r, {300, 301}, 0, false, {301});
    check_reduction(r, {5, 600, 3}, 1, false, {5, 3});
    check_reduction(r, {3, 40000}, 1, false, {3});
    check_reduction(r, {100003}, tg::Axes::all(), false, {});
  }
}

// Results must not depend on how many threads TBB gives the kernels.
TEST(Reduce, SameBitsForAnyThreadCount) {
  const Shape shape{200003};
  const HostTensor x = HostTensor::f32(shape, test_values(shape[0], 3));
  const auto build = [](const Tensor& t) { return tg::sum(t); };
  const HostTensor parallel = run(x, build, ComputeType::f32);
  HostTensor serial;
  {
    tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
    serial = run(x, build, ComputeType::f32);
  }
  EXPECT_EQ(parallel, serial);
}

TEST(Reduce, MaxPropagatesNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const HostTensor x = HostTensor::f32({2, 3}, {1, nan, 3, 4, 5, 6});
  const HostTensor y = run(
      x, [](const Tensor& t) { return tg::max(t, 1); }, ComputeType::f64, false);
  EXPECT_TRUE(std::isnan(y.at(0)));
  EXPECT_EQ(y.at(1), 6.0);
}

TEST(Reduce, RejectsBadAxesAndDtypes) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 3}});
  try {
    tg::sum(x, 2);
    FAIL() << "axis 2 of a rank-2 tensor was accepted";
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), "sum");
    EXPECT_NE(std::string(e.what()).find("axis 2 is out of range for rank 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tg::mean(x, -3), tg::ShapeError);
  EXPECT_THROW(tg::max(x, {1, -1}), tg::ShapeError);  // the same axis twice
  const Tensor i = b.input("i", {DType::i32, {2, 3}});
  try {
    tg::sum(i);
    FAIL() << "sum of i32 was accepted";
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), "sum");
    EXPECT_NE(e.rule().find("f32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tg::argmax(i), tg::ShapeError);
  EXPECT_THROW(tg::argmin(x, 2), tg::ShapeError);
}

// The parser hands shape rules raw attributes: they must refuse what the front-end never emits.
TEST(Reduce, ShapeRulesValidateRawAttributes) {
  const tg::TensorType x{DType::f32, {2, 3}};
  const auto rule_of = [&](OpId op, tg::Attrs attrs) -> std::string {
    try {
      tg::infer_type(op, attrs, {&x, 1});
    } catch (const tg::RuleBroken& broken) {
      return broken.rule;
    }
    return "";
  };
  EXPECT_NE(rule_of(op::Sum, {{"axes", std::vector<std::int64_t>{-1}}, {"keep_dims", false}}).find("out of range"),
            std::string::npos);
  EXPECT_NE(rule_of(op::Max, {{"axes", std::vector<std::int64_t>{1, 0}}, {"keep_dims", false}}).find("sorted"),
            std::string::npos);
  EXPECT_NE(rule_of(op::Argmax, {{"axis", std::int64_t{2}}, {"keep_dims", false}}).find("out of range"),
            std::string::npos);
  EXPECT_EQ(tg::infer_type(op::Mean, {{"axes", std::vector<std::int64_t>{}}, {"keep_dims", false}}, {&x, 1}), x);
}

// Index of the extremum along `axis` by plain loops; the first index wins on ties.
std::vector<double> reference_arg(bool is_max, const Shape& shape, const std::vector<float>& x, std::size_t axis) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t a = 0; a < axis; ++a) outer *= shape[a];
  for (std::size_t a = axis + 1; a < shape.size(); ++a) inner *= shape[a];
  std::vector<double> out;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t j = 0; j < inner; ++j) {
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < shape[axis]; ++k) {
        const float v = x[static_cast<std::size_t>((o * shape[axis] + k) * inner + j)];
        const float b = x[static_cast<std::size_t>((o * shape[axis] + best) * inner + j)];
        if (is_max ? v > b : v < b) best = k;
      }
      out.push_back(static_cast<double>(best));
    }
  }
  return out;
}

TEST(Reduce, ArgmaxArgminAlongAnAxis) {
  const Shape shape{3, 4, 300};
  const auto x = test_values(tg::num_elements(shape), 5);
  for (bool is_max : {true, false}) {
    for (std::int64_t axis : {0, 1, 2, -1}) {
      for (bool keep : {false, true}) {
        const auto normalized = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
        Shape out_shape = shape;
        if (keep) {
          out_shape[normalized] = 1;
        } else {
          out_shape.erase(out_shape.begin() + static_cast<std::ptrdiff_t>(normalized));
        }
        for (ComputeType compute : kBothComputeTypes) {
          const HostTensor y = run(
              HostTensor::f32(shape, x),
              [&](const Tensor& t) {
                return is_max ? tg::argmax(t, axis, {.keep_dims = keep}) : tg::argmin(t, axis, {.keep_dims = keep});
              },
              compute);
          ASSERT_EQ(y.type, (tg::TensorType{DType::i32, out_shape}));
          EXPECT_EQ(y.to_f64(), reference_arg(is_max, shape, x, normalized)) << "axis " << axis;
        }
      }
    }
  }
}

TEST(Reduce, ArgmaxWithoutAxisIsTheFlatIndex) {
  const HostTensor x = HostTensor::f32({2, 3}, {0.5f, -1.f, 2.f, 7.f, -3.f, 7.f});
  for (ComputeType compute : kBothComputeTypes) {
    const HostTensor hi = run(
        x, [](const Tensor& t) { return tg::argmax(t); }, compute);
    EXPECT_EQ(hi.type, (tg::TensorType{DType::i32, {}}));
    EXPECT_EQ(hi.to_f64(), std::vector<double>{3});  // the first of two 7s
    const HostTensor lo = run(
        x, [](const Tensor& t) { return tg::argmin(t, std::nullopt, {.keep_dims = true}); }, compute);
    EXPECT_EQ(lo.type, (tg::TensorType{DType::i32, {1, 1}}));
    EXPECT_EQ(lo.to_f64(), std::vector<double>{4});
  }
  const HostTensor ties = HostTensor::f32({2, 3}, {1, 1, 0, 0, 0, 0});
  EXPECT_EQ(run(
                ties, [](const Tensor& t) { return tg::argmax(t, 1); }, ComputeType::f32)
                .to_f64(),
            (std::vector<double>{0, 0}));
  EXPECT_EQ(run(
                ties, [](const Tensor& t) { return tg::argmin(t, 0); }, ComputeType::f32)
                .to_f64(),
            (std::vector<double>{1, 1, 0}));
}

// Facts pinned per op (optional: a new op is checked by the generic tests without joining).
struct Pinned {
  tg::ToleranceClass tolerance;
  bool differentiable;
};

std::map<OpId, Pinned> pinned_defs() {
  using TC = tg::ToleranceClass;
  return {{op::Sum, {TC::reduction, true}}, {op::Mean, {TC::reduction, true}}, {op::Max, {TC::exact, true}},
          {op::Min, {TC::exact, true}},     {op::Argmax, {TC::exact, false}},  {op::Argmin, {TC::exact, false}}};
}

// Every op of the family (from the registry) carries all its OpDef parts, and its samples pass its
// shape rule; the facts pinned per op hold.
TEST(ReduceOpDefs, CompleteAndSamplesValid) {
  const auto pinned = pinned_defs();
  tg::test::expect_ops_in_family(pinned, kFamily);
  for (OpId op : tg::test::expect_family_defs(kFamily, 42, 200)) {
    const tg::OpDef& def = tg::op_def(op);
    SCOPED_TRACE(std::string(def.name));
    // A reduction takes one tensor and the axes (or axis) it reduces.
    EXPECT_EQ(def.arity, 1);
    EXPECT_FALSE(def.attrs.empty());
    tg::SampleRng rng(42);
    const auto from_ints = def.samples(rng, tg::TensorType{DType::i32, {2, 3}});
    if (const auto it = pinned.find(op); it != pinned.end()) {
      EXPECT_EQ(def.differentiable, it->second.differentiable);
      EXPECT_EQ(def.tolerance, it->second.tolerance);
      EXPECT_FALSE(from_ints.has_value());
    }
  }
}

TEST(ReduceOpDefs, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 20);
}

// ---- grad rules ---------------------------------------------------------------------------------

// Every differentiable op of the family: its grad rule for a random cotangent g against central
// differences of sum(g * op(x)), all in f64; trial 0 on an f32[3,4] input.
TEST(ReduceGrads, GradRulesMatchFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 99, 6, Shape{3, 4},
                                                         {.probes = 12, .exact_cotangent_type = true});
}

// Tied extrema share the cotangent evenly; the others get none.
TEST(ReduceGrads, TiedMaximaShareTheGradient) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 3}});
  b.output("loss", tg::sum(tg::max(x, 1)));
  const tg::Graph grad = tg::differentiate(b.take(), {.wrt = {"x"}});
  const auto out =
      tg::interpret(grad, {{"x", HostTensor::f32({2, 3}, {1, 3, 3, 5, 0, 1})}}, {.compute = ComputeType::f32}).outputs;
  EXPECT_EQ(out.at("grad.x").to_f64(), (std::vector<double>{0, 0.5, 0.5, 1, 0, 0}));
}

}  // namespace
