// The elementwise families: forward values in both compute types against <cmath>, broadcasting and
// scalar operands, shape and dtype errors, the OpDef parts, and every grad rule against central
// finite differences of the forward kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "interp/kernels/broadcast_indexer.h"
#include "support/library.h"
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Tensor;

constexpr ComputeType kBothComputeTypes[] = {ComputeType::f64, ComputeType::f32};

struct NamedInput {
  std::string name;
  HostTensor value;
};
using Build = std::function<Tensor(const std::vector<Tensor>&)>;

// Traces `build` over inputs of the given values' types and runs the graph; returns output "y".
HostTensor run(const std::vector<NamedInput>& inputs, const Build& build, ComputeType compute) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  std::vector<Tensor> xs;
  tg::TensorMap feed;
  for (const auto& in : inputs) {
    xs.push_back(b.input(in.name, in.value.type));
    feed.emplace(in.name, in.value);
  }
  b.output("y", build(xs));
  const tg::Graph g = b.take();
  return tg::interpret(g, feed, {.compute = compute, .check_coverage = true}).outputs.at("y");
}

// f32 mode rounds inputs to float and computes in float: a relative bound of a few dozen ulp.
double tolerance(ComputeType compute, double expected) {
  const double rel = compute == ComputeType::f64 ? 1e-13 : 4e-6;
  return rel * (1.0 + std::fabs(expected));
}

void expect_values(const HostTensor& got, const std::vector<double>& expected, ComputeType compute) {
  ASSERT_EQ(got.values.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(got.values[i], expected[i], tolerance(compute, expected[i])) << "element " << i;
  }
}

const std::vector<float> kSmooth = {-1.7f, -0.6f, -0.05f, 0.3f, 0.9f, 1.8f};
const std::vector<float> kPositive = {0.2f, 0.5f, 1.0f, 1.7f, 2.5f, 3.1f};

double reference_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double reference_gelu(double x) {
  const double pi = std::acos(-1.0);
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> reference;
  const std::vector<float>* inputs;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Tensor& x) { return tg::neg(x); }, [](double x) { return -x; }, &kSmooth},
      {"unary minus", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, &kSmooth},
      {"abs", [](const Tensor& x) { return tg::abs(x); }, [](double x) { return std::fabs(x); }, &kSmooth},
      {"square", [](const Tensor& x) { return tg::square(x); }, [](double x) { return x * x; }, &kSmooth},
      {"sqrt", [](const Tensor& x) { return tg::sqrt(x); }, [](double x) { return std::sqrt(x); }, &kPositive},
      {"rsqrt", [](const Tensor& x) { return tg::rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, &kPositive},
      {"exp", [](const Tensor& x) { return tg::exp(x); }, [](double x) { return std::exp(x); }, &kSmooth},
      {"log", [](const Tensor& x) { return tg::log(x); }, [](double x) { return std::log(x); }, &kPositive},
      {"sin", [](const Tensor& x) { return tg::sin(x); }, [](double x) { return std::sin(x); }, &kSmooth},
      {"cos", [](const Tensor& x) { return tg::cos(x); }, [](double x) { return std::cos(x); }, &kSmooth},
      {"tanh", [](const Tensor& x) { return tg::tanh(x); }, [](double x) { return std::tanh(x); }, &kSmooth},
      {"sigmoid", [](const Tensor& x) { return tg::sigmoid(x); }, reference_sigmoid, &kSmooth},
      {"relu", [](const Tensor& x) { return tg::relu(x); }, [](double x) { return x > 0 ? x : 0.0; }, &kSmooth},
      {"gelu", [](const Tensor& x) { return tg::gelu(x); }, reference_gelu, &kSmooth},
      {"silu", [](const Tensor& x) { return tg::silu(x); }, [](double x) { return x * reference_sigmoid(x); },
       &kSmooth},
      {"clamp", [](const Tensor& x) { return tg::clamp(x, -0.5, 1.25); },
       [](double x) { return std::fmin(std::fmax(x, -0.5), 1.25); }, &kSmooth},
      {"stop_gradient", [](const Tensor& x) { return tg::stop_gradient(x); }, [](double x) { return x; }, &kSmooth},
  };
}

TEST(ElementwiseUnary, ForwardValuesMatchCmath) {
  for (const auto& c : unary_cases()) {
    std::vector<double> expected;
    for (float v : *c.inputs) expected.push_back(c.reference(v));
    for (ComputeType compute : kBothComputeTypes) {
      SCOPED_TRACE(std::string(c.name) + (compute == ComputeType::f64 ? " f64" : " f32"));
      const HostTensor y = run(
          {{"x", HostTensor::f32({2, 3}, *c.inputs)}}, [&](auto& x) { return c.op(x[0]); }, compute);
      EXPECT_EQ(y.type, (tg::TensorType{DType::f32, {2, 3}}));
      expect_values(y, expected, compute);
    }
  }
}

TEST(ElementwiseUnary, SigmoidAndSiluStayFiniteForLargeInputs) {
  const std::vector<float> x = {-200.f, -90.f, 90.f, 200.f};
  std::vector<double> sigmoid_expected, silu_expected;
  for (float v : x) {
    sigmoid_expected.push_back(reference_sigmoid(v));
    silu_expected.push_back(v * reference_sigmoid(v));
  }
  for (ComputeType compute : kBothComputeTypes) {
    const HostTensor s = run(
        {{"x", HostTensor::f32({4}, x)}}, [](auto& v) { return tg::sigmoid(v[0]); }, compute);
    const HostTensor si = run(
        {{"x", HostTensor::f32({4}, x)}}, [](auto& v) { return tg::silu(v[0]); }, compute);
    expect_values(s, sigmoid_expected, compute);
    expect_values(si, silu_expected, compute);
    for (double v : s.values) EXPECT_TRUE(std::isfinite(v));
    for (double v : si.values) EXPECT_TRUE(std::isfinite(v));
  }
}

TEST(ElementwiseUnary, StopGradientKeepsIntegerValues) {
  const HostTensor x = HostTensor::i32({3}, {4, -2, 7});
  const HostTensor y = run(
      {{"x", x}}, [](auto& v) { return tg::stop_gradient(v[0]); }, ComputeType::f32);
  EXPECT_EQ(y, x);
}

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
      EXPECT_EQ(times.values[i], x[i] * 2.0);
      EXPECT_EQ(minus.values[i], 2.0 - x[i]);
      EXPECT_EQ(plus.values[i], 1.0 + x[i]);
      EXPECT_NEAR(over.values[i], 3.0 / x[i], tolerance(compute, 3.0 / x[i]));
      EXPECT_EQ(floor.values[i], std::fmax(x[i], 0.5));
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
      EXPECT_EQ(lt.values[i], a[i] < b[i % 3] ? 1.0 : 0.0);
      EXPECT_EQ(gt.values[i], a[i] > b[i % 3] ? 1.0 : 0.0);
      EXPECT_EQ(eq.values[i], a[i] == b[i % 3] ? 1.0 : 0.0);
    }
    const HostTensor scalar_eq = run(
        in, [](auto& v) { return tg::equal(v[0], 2.0); }, compute);
    EXPECT_EQ(scalar_eq.values, (std::vector<double>{0, 1, 0, 1, 0, 0}));
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
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(y.values[i], cond.values[i] ? a[i] : b[i % 3]);
    // Condition [2,1] against a scalar and a row: a 3-way broadcast.
    const HostTensor c21 = HostTensor::of({DType::boolean, {2, 1}}, {0, 1});
    const HostTensor z = run(
        {{"c", c21}, {"b", HostTensor::f32({3}, b)}}, [](auto& v) { return tg::where(v[0], -1.0, v[1]); }, compute);
    EXPECT_EQ(z.values, (std::vector<double>{10, 20, 30, -1, -1, -1}));
  }
  const HostTensor ints = run(
      {{"c", cond}, {"a", HostTensor::i32({2, 3}, {1, 2, 3, 4, 5, 6})}, {"b", HostTensor::i32({1}, {-7})}},
      [](auto& v) { return tg::where(v[0], v[1], v[2]); }, ComputeType::f32);
  EXPECT_EQ(ints.type, (tg::TensorType{DType::i32, {2, 3}}));
  EXPECT_EQ(ints.values, (std::vector<double>{1, -7, -7, 4, 5, -7}));
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
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(y.values[i], double(a[i] * b[i % b.size()])) << i;
}

// ---- errors ------------------------------------------------------------------------------------

TEST(ElementwiseErrors, BroadcastMismatchNamesOpShapesAndCallSite) {
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
    EXPECT_NE(what.find("elementwise_test.cpp"), std::string::npos) << what;
  }
  EXPECT_THROW(x * y, tg::ShapeError);
  EXPECT_THROW(tg::less(x, y), tg::ShapeError);
  const Tensor c = b.input("c", {DType::boolean, {2, 3}});
  EXPECT_THROW(tg::where(c, x, y), tg::ShapeError);
}

TEST(ElementwiseErrors, DtypesAreChecked) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor i = b.input("i", {DType::i32, {2, 3}});
  const Tensor x = b.input("x", {DType::f32, {2, 3}});
  const Tensor c = b.input("c", {DType::boolean, {2, 3}});
  try {
    tg::exp(i);
    FAIL() << "exp of i32 must throw";
  } catch (const tg::ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("exp"), std::string::npos) << what;
    EXPECT_NE(what.find("f32"), std::string::npos) << what;
    EXPECT_NE(what.find("i32[2,3]"), std::string::npos) << what;
  }
  EXPECT_THROW(tg::relu(c), tg::ShapeError);
  EXPECT_THROW(tg::add(x, i), tg::ShapeError);
  EXPECT_THROW(tg::equal(i, i), tg::ShapeError);
  EXPECT_THROW(tg::where(x, x, x), tg::ShapeError) << "the condition must be bool";
  EXPECT_THROW(tg::where(c, x, i), tg::ShapeError) << "branches must share a dtype";
  EXPECT_NO_THROW(tg::where(c, i, i));
  EXPECT_NO_THROW(tg::stop_gradient(i));
}

TEST(ElementwiseErrors, ClampNeedsLoAtMostHi) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {3}});
  try {
    tg::clamp(x, 1.0, -1.0);
    FAIL() << "clamp with lo > hi must throw";
  } catch (const tg::ShapeError& e) {
    EXPECT_NE(e.rule().find("lo"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(tg::clamp(x, 0.5, 0.5));
}

// ---- op definitions and grad rules -------------------------------------------------------------

struct DefExpectation {
  OpId id;
  int arity;
  tg::ToleranceClass tolerance;
  bool differentiable;
};

std::vector<DefExpectation> def_expectations() {
  using TC = tg::ToleranceClass;
  std::vector<DefExpectation> out;
  for (OpId id : {op::Add, op::Sub, op::Mul, op::Div, op::Minimum, op::Maximum}) {
    out.push_back({id, 2, TC::elementwise, true});
  }
  for (OpId id : {op::Less, op::Greater, op::Equal}) out.push_back({id, 2, TC::exact, false});
  out.push_back({op::Where, 3, TC::elementwise, true});
  for (OpId id : {op::Neg, op::Abs, op::Square, op::Relu, op::Clamp}) {
    out.push_back({id, 1, TC::elementwise, true});
  }
  for (OpId id : {op::Sqrt, op::Rsqrt, op::Exp, op::Log, op::Sin, op::Cos, op::Tanh, op::Sigmoid, op::Gelu, op::Silu}) {
    out.push_back({id, 1, TC::transcendental, true});
  }
  out.push_back({op::StopGradient, 1, TC::exact, false});
  return out;
}

TEST(ElementwiseDefs, EveryPartIsPresentAndSamplesAreValid) {
  tg::SampleRng rng(42);
  const tg::TensorType f23{DType::f32, {2, 3}};
  for (const auto& expect : def_expectations()) {
    const tg::OpDef& def = tg::op_def(expect.id);
    SCOPED_TRACE(std::string(def.name));
    EXPECT_EQ(def.name, tg::op_name(expect.id));
    EXPECT_EQ(def.arity, expect.arity);
    EXPECT_EQ(def.tolerance, expect.tolerance);
    EXPECT_EQ(def.differentiable, expect.differentiable);
    EXPECT_EQ(def.grad != nullptr, expect.differentiable);
    ASSERT_NE(def.shape, nullptr);
    ASSERT_NE(def.samples, nullptr);
    EXPECT_TRUE(tg::interp_has_kernel(expect.id));
    for (int trial = 0; trial < 20; ++trial) {
      const auto sample = def.samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      ASSERT_EQ(sample->inputs.size(), static_cast<std::size_t>(def.arity));
      ASSERT_EQ(sample->domains.size(), sample->inputs.size());
      tg::TensorType out;
      ASSERT_NO_THROW(out = tg::infer_type(expect.id, sample->attrs, sample->inputs));
      EXPECT_LE(out.size(), 512);
    }
    // Given a first input type, the sample uses it exactly or declines.
    const tg::TensorType first = expect.id == op::Where ? tg::TensorType{DType::boolean, {2, 3}} : f23;
    const auto given = def.samples(rng, first);
    ASSERT_TRUE(given.has_value());
    EXPECT_EQ(given->inputs[0], first);
    const tg::TensorType ints{DType::i32, {4}};
    EXPECT_EQ(def.samples(rng, ints).has_value(), expect.id == op::StopGradient);
  }
}

// Sum of `grad` over the axes its input was broadcast along, back to `shape`.
std::vector<double> reduce_to(const HostTensor& grad, const tg::Shape& shape) {
  std::vector<double> out(static_cast<std::size_t>(tg::num_elements(shape)), 0.0);
  const tg::interp::BroadcastIndexer index(shape, grad.type.shape);
  for (std::size_t j = 0; j < grad.values.size(); ++j) {
    out[static_cast<std::size_t>(index(static_cast<std::int64_t>(j)))] += grad.values[j];
  }
  return out;
}

// Runs the grad rule for one sample in f64 and compares each input's cotangent (after undoing
// broadcasting) with central differences of sum(g * op(inputs)).
void check_grad_rule(OpId id, const tg::OpSample& sample, tg::SampleRng& rng) {
  const tg::OpDef& def = tg::op_def(id);
  tg::TensorMap feed;
  for (std::size_t i = 0; i < sample.inputs.size(); ++i) {
    feed.emplace("x" + std::to_string(i),
                 HostTensor::of(sample.inputs[i], sample.domains[i].draw(rng, sample.inputs[i].size())));
  }
  tg::GraphBuilder b("grad");
  tg::TracingScope scope(b);
  std::vector<Tensor> xs;
  for (std::size_t i = 0; i < sample.inputs.size(); ++i)
    xs.push_back(b.input("x" + std::to_string(i), sample.inputs[i]));
  const Tensor y = b.emit(id, xs, sample.attrs, tg::SourceLoc{});
  const Tensor g = b.input("g", y.type());
  std::vector<double> g_values;
  // where() over i32 branches has an i32 output: its (unused) cotangent must hold integers.
  const bool real_output = y.dtype() == DType::f32;
  for (std::int64_t j = 0; j < y.size(); ++j) g_values.push_back(real_output ? rng.uniform(-1, 1) : 1.0);
  feed.emplace("g", HostTensor::of(y.type(), g_values));
  b.output("y", y);
  const auto grads = def.grad(tg::GradArgs{xs, y, g, sample.attrs});
  ASSERT_EQ(grads.size(), xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(grads[i].has_value(), sample.inputs[i].dtype == DType::f32) << "input " << i;
    if (grads[i]) b.output("d" + std::to_string(i), *grads[i]);
  }
  const tg::Graph graph = b.take();
  const auto analytic = tg::interpret(graph, feed).outputs;
  const auto loss = [&](const tg::TensorMap& inputs) {
    const HostTensor out = tg::interpret(graph, inputs).outputs.at("y");
    double total = 0;
    for (std::size_t j = 0; j < out.values.size(); ++j) total += g_values[j] * out.values[j];
    return total;
  };
  constexpr double kEps = 1e-6;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (!grads[i]) continue;
    const std::string name = "x" + std::to_string(i);
    const std::vector<double> grad = reduce_to(analytic.at("d" + std::to_string(i)), sample.inputs[i].shape);
    // A spread of at most ~16 elements keeps the test fast on large samples.
    const std::size_t stride = std::max<std::size_t>(1, grad.size() / 16);
    for (std::size_t e = 0; e < grad.size(); e += stride) {
      tg::TensorMap moved = feed;
      const double v = feed.at(name).values[e];
      moved.at(name).values[e] = v + kEps;
      const double up = loss(moved);
      moved.at(name).values[e] = v - kEps;
      const double numeric = (up - loss(moved)) / (2 * kEps);
      EXPECT_NEAR(grad[e], numeric, 1e-6 * (1 + std::fabs(numeric))) << "input " << i << " element " << e;
    }
  }
}

TEST(ElementwiseGrads, GradRulesMatchFiniteDifferences) {
  tg::SampleRng rng(2024);
  for (const auto& expect : def_expectations()) {
    if (!expect.differentiable) continue;
    const tg::OpDef& def = tg::op_def(expect.id);
    const tg::TensorType first{expect.id == op::Where ? DType::boolean : DType::f32, {2, 3}};
    for (int trial = 0; trial < 4; ++trial) {
      SCOPED_TRACE(std::string(def.name) + " trial " + std::to_string(trial));
      const auto sample = trial == 0 ? def.samples(rng, first) : def.samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      check_grad_rule(expect.id, *sample, rng);
    }
  }
}

TEST(ElementwiseGrads, MinimumGivesTiesToInputZero) {
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
  EXPECT_EQ(out.at("da").values, (std::vector<double>{10, 20, 0}));
  EXPECT_EQ(out.at("dc").values, (std::vector<double>{0, 0, 30}));
}

}  // namespace
