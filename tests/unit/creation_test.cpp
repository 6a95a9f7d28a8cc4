// The creation family: full, zeros, ones and arange (and scalar, built on full) in both compute
// types and every dtype they make; the values a dtype cannot hold; the tracing scope a creation op
// needs and goes to; and, for every op the registry lists in the family, the OpDef parts, samples
// that run, and f32 against the oracle.
#include "tensorgrad/ir/ops/ids/creation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/op_family.h"
#include "support/shape_error.h"

namespace {

using tg::DType;

constexpr std::string_view kFamily = "creation";

constexpr tg::ComputeType kComputeTypes[] = {tg::ComputeType::f64, tg::ComputeType::f32};

// Runs a graph of creation ops only and returns output "y".
tg::HostTensor run_nullary(const std::function<tg::Tensor()>& op, tg::ComputeType compute) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  b.output("y", op());
  return tg::interpret(b.take(), {}, {.compute = compute}).outputs.at("y");
}

// Expects `trace` to throw a ShapeError whose message names the op, contains `rule_part` and this
// file as the call site.
void expect_shape_error(const std::function<void()>& trace, std::string_view op, std::string_view rule_part) {
  tg::test::expect_shape_error_at(trace, op, rule_part, "creation_test.cpp");
}

TEST(Creation, ArangeZerosOnesFullValuesAndDtypes) {
  for (tg::ComputeType compute : kComputeTypes) {
    const auto ints = run_nullary([] { return tg::arange(5); }, compute);
    EXPECT_EQ(ints.type, (tg::TensorType{DType::i32, {5}}));
    EXPECT_EQ(ints.to_f64(), (std::vector<double>{0, 1, 2, 3, 4}));
    const auto floats = run_nullary([] { return tg::arange(3, DType::f32); }, compute);
    EXPECT_EQ(floats.type, (tg::TensorType{DType::f32, {3}}));
    EXPECT_EQ(floats.to_f64(), (std::vector<double>{0, 1, 2}));
    EXPECT_EQ(run_nullary([] { return tg::arange(0); }, compute).size(), 0u);

    const auto z = run_nullary([] { return tg::zeros({2, 3}); }, compute);
    EXPECT_EQ(z.type, (tg::TensorType{DType::f32, {2, 3}}));
    EXPECT_EQ(z.to_f64(), std::vector<double>(6, 0.0));
    const auto o = run_nullary([] { return tg::ones({4}, DType::boolean); }, compute);
    EXPECT_EQ(o.type, (tg::TensorType{DType::boolean, {4}}));
    EXPECT_EQ(o.to_f64(), std::vector<double>(4, 1.0));
    const auto oi = run_nullary([] { return tg::ones({2}, DType::i32); }, compute);
    EXPECT_EQ(oi.type, (tg::TensorType{DType::i32, {2}}));
    EXPECT_EQ(oi.to_f64(), std::vector<double>(2, 1.0));

    const auto f = run_nullary([] { return tg::full({2, 2}, 0.1); }, compute);
    EXPECT_EQ(f.type, (tg::TensorType{DType::f32, {2, 2}}));
    // An f32 constant is rounded to f32 at trace time, so both compute types see 0.1f.
    const double expected = double{0.1f};
    EXPECT_EQ(f.to_f64(), std::vector<double>(4, expected));
    const auto fi = run_nullary([] { return tg::full({3}, -7, DType::i32); }, compute);
    EXPECT_EQ(fi.type, (tg::TensorType{DType::i32, {3}}));
    EXPECT_EQ(fi.to_f64(), std::vector<double>(3, -7.0));
    const auto inf = run_nullary([] { return tg::full({1}, -INFINITY); }, compute);
    EXPECT_TRUE(std::isinf(inf.at(0)) && inf.at(0) < 0);
    const auto s = run_nullary([] { return tg::scalar(2.5); }, compute);
    EXPECT_EQ(s.type, (tg::TensorType{DType::f32, {}}));
    EXPECT_EQ(s.to_f64(), std::vector<double>{2.5});
  }
}

TEST(Creation, RefusesValuesTheDtypeCannotHold) {
  tg::GraphBuilder b;
  tg::TracingScope scope(b);
  expect_shape_error([] { (void)tg::full({2}, 1.5, DType::i32); }, "full", "i32 tensor needs an integer value");
  expect_shape_error([] { (void)tg::full({2}, 2, DType::boolean); }, "full", "bool tensor needs the value 0 or 1");
  expect_shape_error([] { (void)tg::full({-2}, 0); }, "full", "negative dimension -2");
  expect_shape_error([] { (void)tg::zeros({3, -1}); }, "zeros", "negative dimension -1");
  expect_shape_error([] { (void)tg::arange(-1); }, "arange", "n must be >= 0, got -1");
  expect_shape_error([] { (void)tg::arange(3, DType::boolean); }, "arange",
                     "dtype must be a float dtype (f32, f16, bf16) or i32");
  EXPECT_EQ(tg::full({2}, 1, DType::boolean).dtype(), DType::boolean);
}

// ---- tracing scopes ----

TEST(CreationScopes, CreationOpsNeedATracingScope) {
  for (const auto& create : std::vector<std::function<void()>>{
           [] { (void)tg::zeros({2}); }, [] { (void)tg::ones({2}); }, [] { (void)tg::full({2}, 3.0); },
           [] { (void)tg::arange(4); }, [] { (void)tg::scalar(1.0); }}) {
    try {
      create();
      ADD_FAILURE() << "expected tg::Error";
    } catch (const tg::Error& e) {
      EXPECT_NE(std::string(e.what()).find("no graph is being traced"), std::string::npos) << e.what();
    }
  }
}

TEST(CreationScopes, CreationOpsGoToTheInnermostScope) {
  tg::GraphBuilder outer("outer");
  tg::GraphBuilder inner("inner");
  tg::TracingScope outer_scope(outer);
  {
    tg::TracingScope inner_scope(inner);
    EXPECT_EQ(&tg::zeros({1}).builder(), &inner);
  }
  EXPECT_EQ(&tg::arange(3).builder(), &outer);
  EXPECT_EQ(inner.graph().nodes().size(), 1u);
  EXPECT_EQ(outer.graph().nodes().size(), 1u);
}

// ---- registry ----

// Facts pinned per op (optional: a new op is checked by the generic tests without joining).
const std::map<tg::OpId, tg::ToleranceClass> kPinnedTolerance = {{tg::op::Full, tg::ToleranceClass::exact},
                                                                 {tg::op::Zeros, tg::ToleranceClass::exact},
                                                                 {tg::op::Ones, tg::ToleranceClass::exact},
                                                                 {tg::op::Arange, tg::ToleranceClass::exact}};

TEST(CreationRegistry, EveryPartIsPresent) {
  tg::test::expect_ops_in_family(kPinnedTolerance, kFamily);
  for (tg::OpId id : tg::test::expect_family_defs(kFamily, 7, 40)) {
    const tg::OpDef& def = tg::op_def(id);
    SCOPED_TRACE(std::string(def.name));
    // A creation op has no inputs, so nothing to differentiate.
    EXPECT_EQ(def.arity, 0);
    EXPECT_FALSE(def.differentiable);
    if (const auto it = kPinnedTolerance.find(id); it != kPinnedTolerance.end()) {
      EXPECT_EQ(def.tolerance, it->second);
    }
  }
}

// Each sample must run through the kernel with a result of the rule's type; with no inputs, a
// creation op declines any given first input.
TEST(CreationRegistry, SamplesAreValid) {
  for (tg::OpId id : tg::test::family_ops(kFamily)) {
    const tg::OpDef& def = tg::op_def(id);
    SCOPED_TRACE(std::string(def.name));
    for (std::uint64_t seed = 0; seed < 40; ++seed) {
      tg::SampleRng rng(seed);
      const auto sample = def.samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      ASSERT_TRUE(sample->inputs.empty());
      ASSERT_TRUE(sample->domains.empty());
      tg::GraphBuilder b;
      tg::TracingScope scope(b);
      const tg::Tensor out = b.emit(id, {}, sample->attrs, tg::SourceLoc{});
      b.output("y", out);
      const auto result = tg::interpret(b.graph(), {}).outputs.at("y");
      EXPECT_EQ(result.type, out.type());
      EXPECT_EQ(static_cast<std::int64_t>(result.size()), out.type().size());
      tg::SampleRng again(seed);
      EXPECT_FALSE(def.samples(again, tg::TensorType{DType::f32, {2}}).has_value());
    }
  }
}

TEST(CreationRegistry, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 20);
}

}  // namespace
