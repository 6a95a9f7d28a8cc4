// The elementwise_binary family: forward values in both compute types against <cmath> with
// broadcasting and scalar operands, comparisons and where, shape and dtype errors, and, for every op
// the registry lists in the family (no test edit for a new op), the OpDef parts, valid samples, f32
// against the f64 oracle, and the grad rule against central finite differences.
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "support/elementwise_run.h"
#include "support/library.h"
#include "support/op_family.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Tensor;
using tg::test::expect_values;
using tg::test::kBothComputeTypes;
using tg::test::NamedInput;
using tg::test::run;
using tg::test::tolerance;

constexpr std::string_view kFamily = "elementwise_binary";

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> reference;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return tg::add(a, b); }, std::plus<double>()},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, std::minus<double>()},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, std::multiplies<double>()},
      {"div", [](const Tensor& a, const Tensor& b) { return tg::div(a, b); }, std::divides<double>()},
      {"minimum", [](const Tensor& a, const Tensor& b) { return tg::minimum(a, b); },
       [](double a, double b) { return std::fmin(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return tg::maximum(a, b); },
       [](double a, double b) { return std::fmax(a, b); }},
  };
}

// Each case's expectation is computed from explicit broadcast coordinates (row i, column j).
TEST(ElementwiseBinary, ForwardValuesWithBroadcasting) {
  const std::vector<float> a23 = {-1.5f, 0.25f, 2.0f, 0.75f, -0.5f, 1.25f};
  const std::vector<float> b23 = {0.5f, -2.0f, 1.5f, 0.75f, 3.0f, -0.25f};
  const std::vector<float> b3 = {0.5f, -2.0f, 1.5f};
  const std::vector<float> a21 = {-1.5f, 0.75f};
  for (const auto& c : binary_cases()) {
    std::vector<double> same, row, outer;
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) {
        same.push_back(c.reference(a23[i * 3 + j], b23[i * 3 + j]));
        row.push_back(c.reference(a23[i * 3 + j], b3[j]));
        outer.push_back(c.reference(a21[i], b3[j]));
      }
    }
    for (ComputeType compute : kBothComputeTypes) {
      SCOPED_TRACE(std::string(c.name) + (compute == ComputeType::f64 ? " f64" : " f32"));
      const auto op = [&](auto& x) { return c.op(x[0], x[1]); };
      const HostTensor y1 =
          run({{"a", HostTensor::f32({2, 3}, a23)}, {"b", HostTensor::f32({2, 3}, b23)}}, op, compute);
      expect_values(y1, same, compute);
      const HostTensor y2 = run({{"a", HostTensor::f32({2, 3}, a23)}, {"b", HostTensor::f32({3}, b3)}}, op, compute);
      EXPECT_EQ(y2.type.shape, (tg::Shape{2, 3}));
      expect_values(y2, row, compute);
      const HostTensor y3 = run({{"a", HostTensor::f32({2, 1}, a21)}, {"b", HostTensor::f32({1, 3}, b3)}}, op, compute);
      EXPECT_EQ(y3.type.shape, (tg::Shape{2, 3}));
      expect_values(y3, outer, compute);
    }
  }
}

TEST(ElementwiseBinary, ScalarOperandsOnEitherSide) {
  const std::vector<float> x = {-1.5f, 0.25f, 2.0f, 0.75f};
  const HostTensor in = HostTensor::f32({2, 2}, x);
  for (ComputeType compute : kBothComputeTypes) {
    const HostTensor times = run(
        {{"x", in}}, [](auto& v) { return v[0] * 2.f; }, compute);
    const HostTensor minus = run(
        {{"x", in}}, [](auto& v) { return 2.f - v[0]; }, compute);
    const HostTensor plus = run(
        {{"x", in}}, [](auto& v) { return tg::add(1.0, v[0]); }, compute);
    const HostTensor over = run(
        {{"x", in}}, [](auto& v) { return 3 / v[0]; }, compute);
    const HostTensor floor = run(
        {{"x", in}}, [](auto& v) { return tg::maximum(v[0], 0.5); }, compute);
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(times.at(i), x[i] * 2.0);
      EXPECT_EQ(minus.at(i), 2.0 - x[i]);
      EXPECT_EQ(plus.at(i), 1.0 + x[i]);
      EXPECT_NEAR(over.at(i), 3.0 / x[i], tolerance(compute, 3.0 / x[i]));
      EXPECT_EQ(floor.at(i), std::fmax(x[i], 0.5));
    }
    EXPECT_EQ(times.type.shape, (tg::Shape{2, 2}));
  }
}

TEST(ElementwiseBinary, ComparisonsReturnBool) {
  const std::vector<float> a = {1.f, 2.f, 0.f, 2.f, 1.f, 0.f};
  const std::vector<float> b = {1.f, 0.f, 2.f};
  for (ComputeType compute : kBothComputeTypes) {
    const std::vector<NamedInput> in = {{"a", HostTensor::f32({2, 3}, a)}, {"b", HostTensor::f32({3}, b)}};
    const HostTensor lt = run(
        in, [](auto& v) { return tg::less(v[0], v[1]); }, compute);
    const HostTensor gt = run(
        in, [](auto& v) { return tg::greater(v[0], v[1]); }, compute);
    const HostTensor eq = run(
        in, [](auto& v) { return tg::equal(v[0], v[1]); }, compute);
    EXPECT_EQ(lt.type, (tg::TensorType{DType::boolean, {2, 3}}));
    EXPECT_EQ(eq.type, (tg::TensorType{DType::boolean, {2, 3}}));
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(lt.at(i), a[i] < b[i % 3] ? 1.0 : 0.0);
      EXPECT_EQ(gt.at(i), a[i] > b[i % 3] ? 1.0 : 0.0);
      EXPECT_EQ(eq.at(i), a[i] == b[i % 3] ? 1.0 : 0.0);
    }
    const HostTensor scalar_eq = run(
        in, [](auto& v) { return tg::equal(v[0], 2.0); }, compute);
    EXPECT_EQ(scalar_eq.to_f64(), (std::vector<double>{0, 1, 0, 1, 0, 0}));
  }
}

TEST(ElementwiseBinary, WhereSelectsWithBroadcasting) {
  const HostTensor cond = HostTensor::of({DType::boolean, {2, 3}}, {1, 0, 0, 1, 1, 0});
  const std::vector<float> a = {1.5f, -2.f, 3.f, 4.25f, 5.f, -6.f};
  const std::vector<float> b = {10.f, 20.f, 30.f};
  for (ComputeType compute : kBothComputeTypes) {
    const HostTensor y = run(
        {{"c", cond}, {"a", HostTensor::f32({2, 3}, a)}, {"b", HostTensor::f32({3}, b)}},
        [](auto& v) { return tg::where(v[0], v[1], v[2]); }, compute);
    EXPECT_EQ(y.type, (tg::TensorType{DType::f32, {2, 3}}));
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(y.at(i), cond.at(i) ? a[i] : b[i % 3]);
    // Condition [2,1] against a scalar and a row: a 3-way broadcast.
    const HostTensor c21 = HostTensor::of({DType::boolean, {2, 1}}, {0, 1});
    const HostTensor z = run(
        {{"c", c21}, {"b", HostTensor::f32({3}, b)}}, [](auto& v) { return tg::where(v[0], -1.0, v[1]); }, compute);
    EXPECT_EQ(z.to_f64(), (std::vector<double>{10, 20, 30, -1, -1, -1}));
  }
  const HostTensor ints = run(
      {{"c", cond}, {"a", HostTensor::i32({2, 3}, {1, 2, 3, 4, 5, 6})}, {"b", HostTensor::i32({1}, {-7})}},
      [](auto& v) { return tg::where(v[0], v[1], v[2]); }, ComputeType::f32);
  EXPECT_EQ(ints.type, (tg::TensorType{DType::i32, {2, 3}}));
  EXPECT_EQ(ints.to_f64(), (std::vector<double>{1, -7, -7, 4, 5, -7}));
}

TEST(ElementwiseBinary, LargeBroadcastUsesEveryThreadChunk) {
  // Big enough for several parallel chunks; both compute types must write every element.
  const std::int64_t rows = 300;
  const std::int64_t cols = 70;
  std::vector<float> a(static_cast<std::size_t>(rows * cols));
  std::vector<float> b(static_cast<std::size_t>(cols));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) * 0.25f;
  for (std::size_t j = 0; j < b.size(); ++j) b[j] = static_cast<float>(j) - 3.f;
  const HostTensor y = run(
      {{"a", HostTensor::f32({rows, cols}, a)}, {"b", HostTensor::f32({cols}, b)}}, [](auto& v) { return v[0] * v[1]; },
      ComputeType::f32);
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(y.at(i), double(a[i] * b[i % b.size()])) << i;
}

// ---- errors ------------------------------------------------------------------------------------

TEST(ElementwiseBinaryErrors, BroadcastMismatchNamesOpShapesAndCallSite) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 3}});
  const Tensor y = b.input("y", {DType::f32, {4}});
  try {
    tg::add(x, y);
    FAIL() << "add of [2,3] and [4] must throw";
  } catch (const tg::ShapeError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.op(), "add");
    EXPECT_NE(what.find("add"), std::string::npos) << what;
    EXPECT_NE(what.find("[2,3]"), std::string::npos) << what;
    EXPECT_NE(what.find("[4]"), std::string::npos) << what;
    EXPECT_NE(what.find("elementwise_binary_test.cpp"), std::string::npos) << what;
  }
  EXPECT_THROW(x * y, tg::ShapeError);
  EXPECT_THROW(tg::less(x, y), tg::ShapeError);
  const Tensor c = b.input("c", {DType::boolean, {2, 3}});
  EXPECT_THROW(tg::where(c, x, y), tg::ShapeError);
}

TEST(ElementwiseBinaryErrors, DtypesAreChecked) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor i = b.input("i", {DType::i32, {2, 3}});
  const Tensor x = b.input("x", {DType::f32, {2, 3}});
  const Tensor c = b.input("c", {DType::boolean, {2, 3}});
  EXPECT_THROW(tg::add(x, i), tg::ShapeError);
  EXPECT_THROW(tg::equal(i, i), tg::ShapeError);
  EXPECT_THROW(tg::where(x, x, x), tg::ShapeError) << "the condition must be bool";
  EXPECT_THROW(tg::where(c, x, i), tg::ShapeError) << "branches must share a dtype";
  EXPECT_NO_THROW(tg::where(c, i, i));
}

// ---- op definitions and grad rules (every op of the family, from the registry) -----------------

// Facts pinned per op (optional: a new op is checked by the generic tests without joining).
struct Pinned {
  int arity;
  tg::ToleranceClass tolerance;
  bool differentiable;
};

std::map<OpId, Pinned> pinned_defs() {
  using TC = tg::ToleranceClass;
  std::map<OpId, Pinned> out;
  for (OpId id : {op::Add, op::Sub, op::Mul, op::Div, op::Minimum, op::Maximum}) out[id] = {2, TC::elementwise, true};
  for (OpId id : {op::Less, op::Greater, op::Equal}) out[id] = {2, TC::exact, false};
  out[op::Where] = {3, TC::elementwise, true};
  return out;
}

TEST(ElementwiseBinaryDefs, EveryPartIsPresentAndSamplesAreValid) {
  const std::vector<OpId> ops = tg::test::expect_family_defs(kFamily, 42, 20);
  const auto pinned = pinned_defs();
  tg::SampleRng rng(42);
  for (OpId id : ops) {
    const tg::OpDef& def = tg::op_def(id);
    SCOPED_TRACE(std::string(def.name));
    // Every pinned op declines an i32 input 0: the arithmetic ops are f32 only and where's
    // condition is bool.
    const bool takes_i32 = tg::test::expect_samples_honour_a_given_first_input(def, rng);
    if (const auto it = pinned.find(id); it != pinned.end()) {
      EXPECT_EQ(def.arity, it->second.arity);
      EXPECT_EQ(def.tolerance, it->second.tolerance);
      EXPECT_EQ(def.differentiable, it->second.differentiable);
      EXPECT_FALSE(takes_i32);
    }
  }
  tg::test::expect_ops_in_family(pinned, kFamily);
}

TEST(ElementwiseBinaryDefs, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 10);
}

TEST(ElementwiseBinaryGrads, GradRulesMatchFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 2024, 4, tg::Shape{2, 3});
}

TEST(ElementwiseBinaryGrads, MinimumGivesTiesToInputZero) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor a = b.input("a", {DType::f32, {3}});
  const Tensor c = b.input("c", {DType::f32, {3}});
  const Tensor y = tg::minimum(a, c);
  const Tensor g = b.input("g", {DType::f32, {3}});
  const auto grads = tg::op_def(op::Minimum).grad(tg::GradArgs{std::vector<Tensor>{a, c}, y, g, tg::Attrs{}});
  b.output("da", *grads[0]);
  b.output("dc", *grads[1]);
  const auto out = tg::interpret(b.take(), {{"a", HostTensor::f32({3}, {1, 2, 3})},
                                            {"c", HostTensor::f32({3}, {2, 2, 1})},
                                            {"g", HostTensor::f32({3}, {10, 20, 30})}})
                       .outputs;
  EXPECT_EQ(out.at("da").to_f64(), (std::vector<double>{10, 20, 0}));
  EXPECT_EQ(out.at("dc").to_f64(), (std::vector<double>{0, 0, 30}));
}

}  // namespace
