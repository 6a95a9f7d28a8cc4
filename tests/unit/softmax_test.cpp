// The softmax family: softmax and log_softmax against plain loops in long double over every axis,
// in both compute types and for values that would overflow exp without the max subtraction; axis and
// dtype errors; and, for every op the registry lists in the family, the OpDef parts, f32 against
// the oracle and the grad rules against finite differences.
#include "tensorgrad/ir/ops/ids/softmax.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "interp/kernels/softmax_rows_f32.h"
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

constexpr std::string_view kFamily = "softmax";

constexpr ComputeType kBothComputeTypes[] = {ComputeType::f64, ComputeType::f32};

using tg::testing::test_values;

HostTensor run(const HostTensor& input, const std::function<Tensor(const Tensor&)>& build, ComputeType compute) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  b.output("y", build(b.input("x", input.type)));
  const tg::Graph g = b.take();
  return tg::interpret(g, {{"x", input}}, {.compute = compute, .check_coverage = true}).outputs.at("y");
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
          ASSERT_TRUE(std::isfinite(y.at(i))) << "element " << i;
          // log_softmax values near 0 and large negative ones both need an absolute floor.
          EXPECT_NEAR(y.at(i), expected[i], rel * (std::fabs(expected[i]) + (log ? 1.0 : 1e-3)))
              << (log ? "log_softmax" : "softmax") << " axis " << axis << " element " << i;
        }
      }
    }
  }
}

// The f32 last-axis kernel (softmax_rows_f32.h) works in 8-lane blocks plus a tail: every block
// remainder, and exps down into the subnormals (a row spread over [-110, 0] after the max) and
// past them (flushed to 0, as expf does).
TEST(Softmax, F32RowKernelMatchesLoopsAtEveryBlockRemainder) {
  for (const std::int64_t length : {1, 7, 8, 9, 17, 4099}) {
    const Shape shape{3, length};
    auto x = test_values(tg::num_elements(shape), 5);
    for (std::int64_t j = 0; j < length; ++j) {
      x[static_cast<std::size_t>(length + j)] = -110.0F * static_cast<float>(j) / static_cast<float>(length);
      x[static_cast<std::size_t>(2 * length + j)] += 1000.0F;
    }
    for (bool log : {false, true}) {
      const auto expected = reference_softmax(log, shape, x, 1);
      const HostTensor y = run(
          HostTensor::f32(shape, x), [&](const Tensor& t) { return log ? tg::log_softmax(t) : tg::softmax(t); },
          ComputeType::f32);
      for (std::size_t i = 0; i < expected.size(); ++i) {
        // Within a few f32 ulps, or 2 subnormal steps (1.4e-45 each) for the tiniest softmax values.
        const double allowed = log ? 4e-6 * (std::fabs(expected[i]) + 1.0) : 4e-6 * std::fabs(expected[i]) + 3e-45;
        EXPECT_NEAR(y.at(i), expected[i], allowed)
            << (log ? "log_softmax" : "softmax") << " length " << length << " element " << i;
      }
    }
  }
}

// The AVX2 and the baseline (SSE2) builds of the row kernel give the same bits, so results do not
// depend on the CPU; on a CPU without AVX2 both calls run the baseline.
TEST(Softmax, F32RowKernelGivesTheSameBitsWithAndWithoutAvx2) {
  // 4099 and 100003: rows of many leaves, so the sum's tree has several levels and a partial leaf.
  for (const std::int64_t length : {1, 7, 8, 9, 4099, 100003}) {
    auto x = test_values(3 * length, 9);
    for (std::int64_t j = 0; j < length; ++j) x[static_cast<std::size_t>(length + j)] *= 60.0F;
    for (const bool log : {false, true}) {
      std::vector<float> dispatched(x.size()), baseline(x.size());
      tg::interp::softmax_rows_f32(x.data(), dispatched.data(), 0, 3, length, log);
      tg::interp::softmax_rows_f32_baseline(x.data(), baseline.data(), 0, 3, length, log);
      EXPECT_EQ(std::memcmp(dispatched.data(), baseline.data(), x.size() * sizeof(float)), 0)
          << (log ? "log_softmax" : "softmax") << " length " << length;
    }
  }
}

// NaN and infinities come out of the f32 row kernel as they come out of the oracle.
// A row of 2^24 terms: the row sum's relative error stays within the pairwise tree's bound. Each
// lane adds 8 terms in a leaf (7 roundings), the tree over 2^24 / 64 leaves has 18 levels, the 8
// lanes are combined in 3 and the tail in 1: 29 roundings of 2^-24, 1.7e-6, plus 2 ulp (2.4e-7) of
// exp in each term, so 2e-6 in all. Summing the lanes in sequence as before (2^21 terms each) was
// off by 3.2e-4 on the mixed row and 1.6e-2 on the constant one. softmax gives 1 / sum for the
// max element (exp(0) is exactly 1), log_softmax -log(sum).
TEST(Softmax, F32RowKernelSumsALongRowWithinThePairwiseBound) {
  constexpr double kAllowedRelative = 2e-6;
  const std::int64_t length = std::int64_t{1} << 24;
  std::vector<float> x(static_cast<std::size_t>(length)), y(x.size());
  for (const bool mixed : {false, true}) {
    for (std::int64_t j = 0; j < length; ++j) {
      // Mixed: 1024 values spread over [-2, 0) by a multiplicative hash of j; else all -1.
      const auto spread = static_cast<float>((static_cast<std::uint64_t>(j) * 2654435761U) % 1024);
      x[static_cast<std::size_t>(j)] = mixed ? -spread / 512.0F : -1.0F;
    }
    x[0] = 0.0F;
    double exact = 0;  // f64 sum of exp of every element: off by about 1e-9 relative
    for (const float v : x) exact += std::exp(static_cast<double>(v));
    tg::interp::softmax_rows_f32(x.data(), y.data(), 0, 1, length, false);
    const double sum = 1.0 / static_cast<double>(y[0]);
    // y[0] itself is rounded to f32: half an ulp (6e-8) of it on top of the sum's error.
    EXPECT_LE(std::fabs(sum / exact - 1.0), kAllowedRelative + 6e-8) << (mixed ? "mixed" : "constant") << " row";
    tg::interp::softmax_rows_f32(x.data(), y.data(), 0, 1, length, true);
    // log(sum) is about 16, rounded to f32 with half an ulp of 4.8e-7.
    EXPECT_LE(std::fabs(-static_cast<double>(y[0]) - std::log(exact)), kAllowedRelative + 4.8e-7)
        << (mixed ? "mixed" : "constant") << " row, log_softmax";
  }
}

TEST(Softmax, F32RowKernelKeepsTheOraclesNanAndInfinityPattern) {
  constexpr float kInf = INFINITY;
  const std::vector<float> rows = {
      1,     NAN,   2,     3,     4,     5,     6,     7,     8,  // a NaN: every element NaN
      -kInf, -kInf, -kInf, -kInf, -kInf, -kInf, -kInf, -kInf, -kInf, 0, kInf, 1, 2, 3, 4, 5, 6, -kInf};
  for (bool log : {false, true}) {
    const auto build = [&](const Tensor& t) { return log ? tg::log_softmax(t) : tg::softmax(t); };
    tg::GraphBuilder b("g");
    tg::TracingScope scope(b);
    b.output("y", build(b.input("x", {DType::f32, {3, 9}})));
    const tg::Graph g = b.take();
    // Without check_coverage: NaN is the expected result here, not an unwritten element.
    const auto on = [&](ComputeType compute) {
      return tg::interpret(g, {{"x", HostTensor::f32({3, 9}, rows)}}, {.compute = compute}).outputs.at("y");
    };
    const HostTensor f32 = on(ComputeType::f32);
    const HostTensor f64 = on(ComputeType::f64);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (std::isnan(f64.at(i))) {
        EXPECT_TRUE(std::isnan(f32.at(i))) << "element " << i << " is " << f32.at(i);
      } else {
        EXPECT_EQ(f32.at(i), f64.at(i)) << "element " << i;
      }
    }
  }
}

TEST(Softmax, RowsSumToOne) {
  const HostTensor x = HostTensor::f32({2, 2}, {1000.f, 1000.f, -1000.f, 0.f});
  const HostTensor y = run(
      x, [](const Tensor& t) { return tg::softmax(t); }, ComputeType::f32);
  EXPECT_EQ(y.to_f64(), (std::vector<double>{0.5, 0.5, 0.0, 1.0}));
}

TEST(Softmax, RejectsBadAxesAndDtypes) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 3}});
  const Tensor i = b.input("i", {DType::i32, {2, 3}});
  EXPECT_THROW(tg::softmax(x, 2), tg::ShapeError);
  EXPECT_THROW(tg::log_softmax(i), tg::ShapeError);
}

// The parser hands shape rules raw attributes: they must refuse what the front-end never emits.
TEST(Softmax, ShapeRuleValidatesRawAttributes) {
  const tg::TensorType x{DType::f32, {2, 3}};
  try {
    tg::infer_type(op::Softmax, {{"axis", std::int64_t{-1}}}, {&x, 1});
    FAIL() << "a raw negative axis was accepted";
  } catch (const tg::RuleBroken& broken) {
    EXPECT_NE(broken.rule.find("out of range"), std::string::npos) << broken.rule;
  }
}

// Facts pinned per op (optional: a new op is checked by the generic tests without joining).
const std::map<OpId, tg::ToleranceClass> kPinnedTolerance = {{op::Softmax, tg::ToleranceClass::reduction},
                                                             {op::LogSoftmax, tg::ToleranceClass::reduction}};

// Every op of the family (from the registry) carries all its OpDef parts, and its samples pass its
// shape rule; the facts pinned per op hold.
TEST(SoftmaxOpDefs, CompleteAndSamplesValid) {
  tg::test::expect_ops_in_family(kPinnedTolerance, kFamily);
  for (OpId op : tg::test::expect_family_defs(kFamily, 42, 200)) {
    const tg::OpDef& def = tg::op_def(op);
    SCOPED_TRACE(std::string(def.name));
    // A softmax normalizes one tensor along an axis.
    EXPECT_EQ(def.arity, 1);
    EXPECT_FALSE(def.attrs.empty());
    tg::SampleRng rng(42);
    const auto from_ints = def.samples(rng, tg::TensorType{DType::i32, {2, 3}});
    if (const auto it = kPinnedTolerance.find(op); it != kPinnedTolerance.end()) {
      EXPECT_TRUE(def.differentiable);
      EXPECT_EQ(def.tolerance, it->second);
      EXPECT_FALSE(from_ints.has_value());
    }
  }
  const tg::TensorType x{DType::f32, {4, 7}};
  EXPECT_EQ(tg::op_def(op::Softmax).reduction_length({{"axis", std::int64_t{1}}}, {&x, 1}), 7);
}

TEST(SoftmaxOpDefs, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 20);
}

// Every differentiable op of the family: its grad rule for a random cotangent g against central
// differences of sum(g * op(x)), all in f64; trial 0 on an f32[3,4] input.
TEST(SoftmaxGrads, GradRulesMatchFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 99, 6, Shape{3, 4},
                                                         {.probes = 12, .exact_cotangent_type = true});
}

}  // namespace
