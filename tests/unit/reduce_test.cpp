// The reduction and softmax families: forward values in both compute types against plain loops
// written here (sum/mean/max/min over axis sets, argmax/argmin, softmax/log_softmax), the large
// blocked paths, thread-count independence, shape and dtype errors, and the OpDef parts.
#include "tensorgrad/ir/ops/ids/reduce.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/softmax.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Shape;
using tg::Tensor;

constexpr ComputeType kBothComputeTypes[] = {ComputeType::f64, ComputeType::f32};

// Deterministic values in [-2, 2], distinct with overwhelming probability (max/min see no ties).
std::vector<float> test_values(std::int64_t n, std::uint64_t seed = 1) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<double>(s >> 11) / 9007199254740992.0 * 4.0 - 2.0);
  }
  return v;
}

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
    ASSERT_EQ(y.values.size(), e.values.size());
    for (std::size_t o = 0; o < e.values.size(); ++o) {
      if (r == Reduction::max || r == Reduction::min) {
        EXPECT_EQ(y.values[o], e.values[o]) << "element " << o;  // the result is one of the inputs
      } else {
        const double rel = compute == ComputeType::f64 ? 1e-13 : 2e-6 * std::sqrt(static_cast<double>(x.size()));
        EXPECT_NEAR(y.values[o], e.values[o], rel * (e.magnitude[o] + 1e-30)) << "element " << o;
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
  EXPECT_TRUE(std::isnan(y.values[0]));
  EXPECT_EQ(y.values[1], 6.0);
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
  EXPECT_THROW(tg::softmax(x, 2), tg::ShapeError);
  EXPECT_THROW(tg::log_softmax(i), tg::ShapeError);
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
  EXPECT_NE(rule_of(op::Softmax, {{"axis", std::int64_t{-1}}}).find("out of range"), std::string::npos);
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
          EXPECT_EQ(y.values, reference_arg(is_max, shape, x, normalized)) << "axis " << axis;
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
    EXPECT_EQ(hi.values, std::vector<double>{3});  // the first of two 7s
    const HostTensor lo = run(
        x, [](const Tensor& t) { return tg::argmin(t, std::nullopt, {.keep_dims = true}); }, compute);
    EXPECT_EQ(lo.type, (tg::TensorType{DType::i32, {1, 1}}));
    EXPECT_EQ(lo.values, std::vector<double>{4});
  }
  const HostTensor ties = HostTensor::f32({2, 3}, {1, 1, 0, 0, 0, 0});
  EXPECT_EQ(run(
                ties, [](const Tensor& t) { return tg::argmax(t, 1); }, ComputeType::f32)
                .values,
            (std::vector<double>{0, 0}));
  EXPECT_EQ(run(
                ties, [](const Tensor& t) { return tg::argmin(t, 0); }, ComputeType::f32)
                .values,
            (std::vector<double>{1, 1, 0}));
}

// Stable softmax by plain loops in long double: subtracting the max changes nothing mathematically.
std::vector<double> reference_softmax(bool log, const Shape& shape, const std::vector<float>& x, std::size_t axis) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t a = 0; a < axis; ++a) outer *= shape[a];
  for (std::size_t a = axis + 1; a < shape.size(); ++a) inner *= shape[a];
  const std::int64_t len = shape[axis];
  std::vector<double> out(x.size());
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t j = 0; j < inner; ++j) {
      const auto at = [&](std::int64_t k) { return static_cast<std::size_t>((o * len + k) * inner + j); };
      long double m = -INFINITY, s = 0;
      for (std::int64_t k = 0; k < len; ++k) m = std::max<long double>(m, x[at(k)]);
      for (std::int64_t k = 0; k < len; ++k) s += std::exp(static_cast<long double>(x[at(k)]) - m);
      for (std::int64_t k = 0; k < len; ++k) {
        const long double shifted = static_cast<long double>(x[at(k)]) - m;
        out[at(k)] = static_cast<double>(log ? shifted - std::log(s) : std::exp(shifted) / s);
      }
    }
  }
  return out;
}

TEST(Softmax, MatchesLoopsOverFirstAndLastAxis) {
  const Shape shape{5, 3, 260};
  auto x = test_values(tg::num_elements(shape), 11);
  // Values near 1000 would overflow exp without the max subtraction.
  for (std::size_t i = 0; i < x.size(); i += 3) x[i] += 1000.f;
  for (bool log : {false, true}) {
    for (std::int64_t axis : {0, 2, -1, 1}) {
      const auto normalized = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
      const auto expected = reference_softmax(log, shape, x, normalized);
      for (ComputeType compute : kBothComputeTypes) {
        const HostTensor y = run(
            HostTensor::f32(shape, x),
            [&](const Tensor& t) { return log ? tg::log_softmax(t, axis) : tg::softmax(t, axis); }, compute);
        ASSERT_EQ(y.type, (tg::TensorType{DType::f32, shape}));
        const double rel = compute == ComputeType::f64 ? 1e-12 : 2e-5;
        for (std::size_t i = 0; i < expected.size(); ++i) {
          ASSERT_TRUE(std::isfinite(y.values[i])) << "element " << i;
          // log_softmax values near 0 and large negative ones both need an absolute floor.
          EXPECT_NEAR(y.values[i], expected[i], rel * (std::fabs(expected[i]) + (log ? 1.0 : 1e-3)))
              << (log ? "log_softmax" : "softmax") << " axis " << axis << " element " << i;
        }
      }
    }
  }
}

TEST(Softmax, RowsSumToOne) {
  const HostTensor x = HostTensor::f32({2, 2}, {1000.f, 1000.f, -1000.f, 0.f});
  const HostTensor y = run(
      x, [](const Tensor& t) { return tg::softmax(t); }, ComputeType::f32);
  EXPECT_EQ(y.values, (std::vector<double>{0.5, 0.5, 0.0, 1.0}));
}

// Every op of the two families carries all its OpDef parts, and its samples pass its shape rule.
TEST(ReduceOpDefs, CompleteAndSamplesValid) {
  for (OpId op : {op::Sum, op::Mean, op::Max, op::Min, op::Argmax, op::Argmin, op::Softmax, op::LogSoftmax}) {
    const tg::OpDef& def = tg::op_def(op);
    SCOPED_TRACE(std::string(def.name));
    EXPECT_EQ(def.name, tg::op_name(op));
    EXPECT_EQ(def.arity, 1);
    EXPECT_FALSE(def.attrs.empty());
    EXPECT_NE(def.shape, nullptr);
    EXPECT_NE(def.samples, nullptr);
    const bool index_op = op == op::Argmax || op == op::Argmin;
    EXPECT_EQ(def.differentiable, !index_op);
    EXPECT_EQ(def.grad != nullptr, !index_op);
    const bool exact = index_op || op == op::Max || op == op::Min;
    EXPECT_EQ(def.tolerance, exact ? tg::ToleranceClass::exact : tg::ToleranceClass::reduction);
    tg::SampleRng rng(42);
    for (int i = 0; i < 200; ++i) {
      const auto sample = def.samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      ASSERT_EQ(sample->inputs.size(), 1u);
      ASSERT_EQ(sample->domains.size(), 1u);
      EXPECT_LE(sample->inputs[0].size(), 512);
      EXPECT_NO_THROW(tg::infer_type(op, sample->attrs, sample->inputs)) << sample->attrs.to_string();
      const auto again = def.samples(rng, sample->inputs[0]);
      ASSERT_TRUE(again.has_value());
      EXPECT_EQ(again->inputs[0], sample->inputs[0]);
    }
    EXPECT_FALSE(def.samples(rng, tg::TensorType{DType::i32, {2, 3}}).has_value());
  }
  const tg::TensorType x{DType::f32, {4, 7}};
  EXPECT_EQ(tg::op_def(op::Softmax).reduction_length({{"axis", std::int64_t{1}}}, {&x, 1}), 7);
}

// ---- grad rules ---------------------------------------------------------------------------------

// Builds op(x) for one sample, runs its grad rule for a random cotangent g and compares dx with
// central differences of sum(g * op(x)), all in f64.
void check_grad_against_differences(OpId op, const tg::OpSample& sample, tg::SampleRng& rng) {
  const tg::TensorType& in = sample.inputs[0];
  tg::GraphBuilder b("grad");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", in);
  const Tensor y = b.emit(op, std::vector<Tensor>{x}, sample.attrs, tg::SourceLoc{});
  const Tensor g = b.input("g", y.type());
  const Tensor inputs[] = {x};
  const auto grads = tg::op_def(op).grad(tg::GradArgs{inputs, y, g, sample.attrs});
  ASSERT_EQ(grads.size(), 1u);
  ASSERT_TRUE(grads[0].has_value());
  ASSERT_EQ(grads[0]->type(), in);
  b.output("y", y);
  b.output("dx", *grads[0]);
  const tg::TensorType y_type = y.type();
  const tg::Graph graph = b.take();

  // y's builder was emptied by take(); its type was copied first.
  std::vector<double> g_values(static_cast<std::size_t>(y_type.size()));
  for (auto& v : g_values) v = rng.uniform(-1, 1);
  tg::TensorMap feed{{"x", HostTensor::of(in, sample.domains[0].draw(rng, in.size()))},
                     {"g", HostTensor::of(y_type, g_values)}};
  const HostTensor dx = tg::interpret(graph, feed).outputs.at("dx");
  const auto weighted_output = [&](const tg::TensorMap& values) {
    const HostTensor out = tg::interpret(graph, values).outputs.at("y");
    double total = 0;
    for (std::size_t j = 0; j < out.values.size(); ++j) total += g_values[j] * out.values[j];
    return total;
  };
  constexpr double kStep = 1e-6;
  const std::size_t stride = std::max<std::size_t>(1, dx.values.size() / 12);  // a spread of elements
  for (std::size_t e = 0; e < dx.values.size(); e += stride) {
    tg::TensorMap moved = feed;
    moved.at("x").values[e] += kStep;
    const double up = weighted_output(moved);
    moved.at("x").values[e] -= 2 * kStep;
    const double numeric = (up - weighted_output(moved)) / (2 * kStep);
    EXPECT_NEAR(dx.values[e], numeric, 1e-6 * (1 + std::fabs(numeric))) << "element " << e;
  }
}

TEST(ReduceGrads, GradRulesMatchFiniteDifferences) {
  tg::SampleRng rng(99);
  for (OpId op : {op::Sum, op::Mean, op::Max, op::Min, op::Softmax, op::LogSoftmax}) {
    const tg::OpDef& def = tg::op_def(op);
    for (int trial = 0; trial < 6; ++trial) {
      const auto sample =
          def.samples(rng, trial == 0 ? std::optional(tg::TensorType{DType::f32, {3, 4}}) : std::nullopt);
      ASSERT_TRUE(sample.has_value());
      SCOPED_TRACE(std::string(def.name) + " " + sample->inputs[0].to_string() + " " + sample->attrs.to_string());
      check_grad_against_differences(op, *sample, rng);
    }
  }
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
  EXPECT_EQ(out.at("grad.x").values, (std::vector<double>{0, 0.5, 0.5, 1, 0, 0}));
}

}  // namespace
