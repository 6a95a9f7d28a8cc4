// The elementwise_unary family: forward values in both compute types against <cmath>, dtype errors,
// and, for every op the registry lists in the family (no test edit for a new op), the OpDef parts,
// valid samples, f32 against the f64 oracle, and the grad rule against central finite differences.
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

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
using tg::test::run;

constexpr std::string_view kFamily = "elementwise_unary";

const std::vector<float> kSmooth = {-1.7f, -0.6f, -0.05f, 0.3f, 0.9f, 1.8f};
const std::vector<float> kPositive = {0.2f, 0.5f, 1.0f, 1.7f, 2.5f, 3.1f};

double reference_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double reference_gelu(double x) {
  const double pi = std::acos(-1.0);
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

// An independent reference per op (optional: a new op need not join; the registry-driven tests
// below check it against the oracle and finite differences). `name` is the op's name, or a
// front-end spelling of one ("unary minus").
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
    // A case named like an op must test an op of this family.
    if (const auto id = tg::find_op(c.name)) {
      EXPECT_EQ(tg::op_family(*id), kFamily) << c.name;
    }
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
    for (double v : s.to_f64()) EXPECT_TRUE(std::isfinite(v));
    for (double v : si.to_f64()) EXPECT_TRUE(std::isfinite(v));
  }
}

TEST(ElementwiseUnary, StopGradientKeepsIntegerValues) {
  const HostTensor x = HostTensor::i32({3}, {4, -2, 7});
  const HostTensor y = run(
      {{"x", x}}, [](auto& v) { return tg::stop_gradient(v[0]); }, ComputeType::f32);
  EXPECT_EQ(y, x);
}

// ---- errors ------------------------------------------------------------------------------------

TEST(ElementwiseUnaryErrors, DtypesAreChecked) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor i = b.input("i", {DType::i32, {2, 3}});
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
  EXPECT_NO_THROW(tg::stop_gradient(i));
}

TEST(ElementwiseUnaryErrors, ClampNeedsLoAtMostHi) {
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

// ---- op definitions and grad rules (every op of the family, from the registry) -----------------

// Facts pinned per op (optional: a new op is checked by the generic tests without joining).
struct Pinned {
  tg::ToleranceClass tolerance;
  bool differentiable;
  bool accepts_i32;  // whether the sample generator takes an i32 input 0
};

std::map<OpId, Pinned> pinned_defs() {
  using TC = tg::ToleranceClass;
  std::map<OpId, Pinned> out;
  for (OpId id : {op::Neg, op::Abs, op::Square, op::Relu, op::Clamp}) out[id] = {TC::elementwise, true, false};
  for (OpId id : {op::Sqrt, op::Rsqrt, op::Exp, op::Log, op::Sin, op::Cos, op::Tanh, op::Sigmoid, op::Gelu, op::Silu}) {
    out[id] = {TC::transcendental, true, false};
  }
  out[op::StopGradient] = {TC::exact, false, true};
  return out;
}

TEST(ElementwiseUnaryDefs, EveryPartIsPresentAndSamplesAreValid) {
  const std::vector<OpId> ops = tg::test::expect_family_defs(kFamily, 42, 20);
  const auto pinned = pinned_defs();
  tg::SampleRng rng(42);
  for (OpId id : ops) {
    const tg::OpDef& def = tg::op_def(id);
    SCOPED_TRACE(std::string(def.name));
    EXPECT_EQ(def.arity, 1) << "the family is unary";
    const bool takes_i32 = tg::test::expect_samples_honour_a_given_first_input(def, rng);
    if (const auto it = pinned.find(id); it != pinned.end()) {
      EXPECT_EQ(def.tolerance, it->second.tolerance);
      EXPECT_EQ(def.differentiable, it->second.differentiable);
      EXPECT_EQ(takes_i32, it->second.accepts_i32);
    }
  }
  tg::test::expect_ops_in_family(pinned, kFamily);
}

TEST(ElementwiseUnaryDefs, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 10);
}

TEST(ElementwiseUnaryGrads, GradRulesMatchFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 2024, 4, tg::Shape{2, 3});
}

}  // namespace
