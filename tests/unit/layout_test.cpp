// The layout family: forward values against loops written here, in both compute types and for every
// dtype the layout ops accept; the front-end's -1 and negative-axis handling; shape errors; and, for
// every op the registry lists in the family, the registry entries (samples valid, grad rules
// well-typed), f32 against the oracle and the grad rules against finite differences.
#include "tensorgrad/ir/ops/ids/layout.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <functional>
#include <map>
#include <numeric>

#include "support/library.h"
#include "support/op_family.h"
#include "support/shape_error.h"

namespace {

using tg::DType;
using tg::Shape;

constexpr tg::ComputeType kComputeTypes[] = {tg::ComputeType::f64, tg::ComputeType::f32};
constexpr DType kAllDtypes[] = {DType::f32, DType::i32, DType::boolean};

// Distinct, exactly representable values of each dtype, so a misplaced element cannot go unseen
// (bool repeats, but in a pattern of period 3 that most index mix-ups break).
std::vector<double> sample_values(DType dtype, std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto d = static_cast<double>(i);
    v[static_cast<std::size_t>(i)] = dtype == DType::f32   ? d * 0.5 - 3.0
                                     : dtype == DType::i32 ? d * 7 - 20
                                                           : (i % 3 == 0);
  }
  return v;
}

// Traces op(x) for one input of the given type, runs it and returns the output.
tg::HostTensor run_unary(const tg::TensorType& in_type, const std::vector<double>& values,
                         const std::function<tg::Tensor(const tg::Tensor&)>& op, tg::ComputeType compute) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  b.output("y", op(b.input("x", in_type)));
  const tg::Graph g = b.take();
  return tg::interpret(g, {{"x", tg::HostTensor::of(in_type, values)}}, {.compute = compute}).outputs.at("y");
}

// Expects `trace` to throw a ShapeError whose message names the op and contains `rule_part`.
void expect_shape_error(const std::function<void()>& trace, std::string_view op, std::string_view rule_part) {
  tg::test::expect_shape_error_at(trace, op, rule_part, "layout_test.cpp");
}

// Calls check(dtype, compute) for every dtype and compute type, labelled on failure.
void for_each_dtype_and_compute(const std::function<void(DType, tg::ComputeType)>& check) {
  for (DType dtype : kAllDtypes) {
    for (tg::ComputeType compute : kComputeTypes) {
      SCOPED_TRACE(std::string(tg::dtype_name(dtype)) + (compute == tg::ComputeType::f64 ? " in f64" : " in f32"));
      check(dtype, compute);
    }
  }
}

TEST(Reshape, KeepsRowMajorOrderForEveryDtype) {
  for_each_dtype_and_compute([](DType dtype, tg::ComputeType compute) {
    const auto values = sample_values(dtype, 24);
    const auto y = run_unary(
        {dtype, {2, 3, 4}}, values,
        [](const tg::Tensor& x) {
          return tg::reshape(x, {4, 6});
        },
        compute);
    EXPECT_EQ(y.type, (tg::TensorType{dtype, {4, 6}}));
    EXPECT_EQ(y.to_f64(), values);
  });
}

TEST(Reshape, InfersOneMinusOne) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {2, 3, 4}});
  EXPECT_EQ(tg::reshape(x, {-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_EQ(tg::reshape(x, {4, -1, 3}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(tg::reshape(x, {-1}).shape(), (Shape{24}));
  auto empty = b.input("e", {DType::f32, {0, 3}});
  EXPECT_EQ(tg::reshape(empty, {3, -1}).shape(), (Shape{3, 0}));
  auto one = b.input("one", {DType::i32, {}});
  EXPECT_EQ(tg::reshape(one, {1, -1, 1}).shape(), (Shape{1, 1, 1}));
  // The emitted attribute is fully resolved.
  const auto& last = b.graph().nodes().back();
  EXPECT_EQ(last.attrs.ints("shape"), (std::vector<std::int64_t>{1, 1, 1}));
}

TEST(Reshape, RefusesBadTargets) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {2, 3}});
  expect_shape_error([&] { (void)tg::reshape(x, {-1, -1}); }, "reshape", "more than one -1");
  expect_shape_error([&] { (void)tg::reshape(x, {4, -1}); }, "reshape", "do not divide");
  expect_shape_error([&] { (void)tg::reshape(x, {-2, -3}); }, "reshape", "negative dimension -2");
  expect_shape_error([&] { (void)tg::reshape(x, {4, 2}); }, "reshape", "changes the element count: 6 vs 8");
  expect_shape_error([&] { (void)tg::reshape(x, {0, -1}); }, "reshape", "cannot infer");
  try {
    (void)tg::reshape(x, {7});
    ADD_FAILURE() << "expected a ShapeError";
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.inputs(), (std::vector<tg::TensorType>{{DType::f32, {2, 3}}}));
    EXPECT_NE(std::string(e.what()).find("reshape(f32[2,3])"), std::string::npos) << e.what();
  }
}

TEST(Permute, MovesAxesForEveryDtype) {
  for_each_dtype_and_compute([](DType dtype, tg::ComputeType compute) {
    const auto values = sample_values(dtype, 24);
    const auto y = run_unary(
        {dtype, {2, 3, 4}}, values,
        [](const tg::Tensor& x) {
          return tg::permute(x, {2, 0, 1});
        },
        compute);
    ASSERT_EQ(y.type, (tg::TensorType{dtype, {4, 2, 3}}));
    for (int a = 0; a < 4; ++a)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) EXPECT_EQ(y.at((a * 2 + i) * 3 + j), values[(i * 3 + j) * 4 + a]);
  });
}

TEST(Permute, NormalizesNegativeEntriesAndChecksThePermutation) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {2, 3, 4}});
  auto y = tg::permute(x, {-1, 0, -2});
  EXPECT_EQ(y.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(b.graph().nodes().back().attrs.ints("perm"), (std::vector<std::int64_t>{2, 0, 1}));
  expect_shape_error([&] { (void)tg::permute(x, {0, 0, 1}); }, "permute", "names axis 0 twice");
  expect_shape_error([&] { (void)tg::permute(x, {0, 1}); }, "permute", "2 entries for rank 3");
  expect_shape_error([&] { (void)tg::permute(x, {0, 1, 3}); }, "permute", "entry 3 is out of range for rank 3");
  expect_shape_error([&] { (void)tg::permute(x, {0, 1, -4}); }, "permute", "entry -4 is out of range");
}

TEST(SwapAxes, SwapsForEveryDtype) {
  for_each_dtype_and_compute([](DType dtype, tg::ComputeType compute) {
    const auto values = sample_values(dtype, 24);
    const auto y = run_unary(
        {dtype, {2, 3, 4}}, values, [](const tg::Tensor& x) { return tg::swap_axes(x, -1, 0); }, compute);
    ASSERT_EQ(y.type, (tg::TensorType{dtype, {4, 3, 2}}));
    for (int a = 0; a < 4; ++a)
      for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 2; ++i) EXPECT_EQ(y.at((a * 3 + j) * 2 + i), values[(i * 3 + j) * 4 + a]);
  });
}

TEST(SwapAxes, NormalizesAndChecksAxes) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {2, 3}});
  (void)tg::swap_axes(x, -2, -1);
  const auto& attrs = b.graph().nodes().back().attrs;
  EXPECT_EQ(attrs.integer("axis0"), 0);
  EXPECT_EQ(attrs.integer("axis1"), 1);
  EXPECT_EQ(tg::swap_axes(x, 1, 1).shape(), (Shape{2, 3}));
  expect_shape_error([&] { (void)tg::swap_axes(x, 0, 2); }, "swap_axes", "axis 2 is out of range for rank 2");
  expect_shape_error([&] { (void)tg::swap_axes(x, -3, 0); }, "swap_axes", "axis -3 is out of range");
}

TEST(BroadcastTo, RepeatsSizeOneAndLeadingAxesForEveryDtype) {
  for_each_dtype_and_compute([](DType dtype, tg::ComputeType compute) {
    const auto values = sample_values(dtype, 3);
    const auto y = run_unary(
        {dtype, {3, 1}}, values,
        [](const tg::Tensor& x) {
          return tg::broadcast_to(x, {2, 3, 4});
        },
        compute);
    ASSERT_EQ(y.type, (tg::TensorType{dtype, {2, 3, 4}}));
    for (int a = 0; a < 2; ++a)
      for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 4; ++k) EXPECT_EQ(y.at((a * 3 + i) * 4 + k), values[i]);
  });
}

TEST(BroadcastTo, RefusesIncompatibleTargets) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {3}});
  expect_shape_error(
      [&] {
        (void)tg::broadcast_to(x, {2, 4});
      },
      "broadcast_to", "[3] does not broadcast to [2,4]: axis -1 has size 3");
  auto m = b.input("m", {DType::f32, {2, 3}});
  expect_shape_error([&] { (void)tg::broadcast_to(m, {3}); }, "broadcast_to", "more than the target rank");
  expect_shape_error([&] { (void)tg::broadcast_to(m, {-1, 3}); }, "broadcast_to", "negative dimension");
  EXPECT_EQ(tg::broadcast_to(m, {2, 3}).shape(), (Shape{2, 3}));
}

TEST(SumToShape, SumsBroadcastAxes) {
  for (tg::ComputeType compute : kComputeTypes) {
    const auto values = sample_values(DType::f32, 24);
    const auto y = run_unary(
        {DType::f32, {2, 3, 4}}, values,
        [](const tg::Tensor& x) {
          return tg::sum_to_shape(x, {3, 1});
        },
        compute);
    ASSERT_EQ(y.type, (tg::TensorType{DType::f32, {3, 1}}));
    for (int j = 0; j < 3; ++j) {
      double expected = 0;
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 4; ++k) expected += values[(i * 3 + j) * 4 + k];
      EXPECT_DOUBLE_EQ(y.at(j), expected);  // half-integers: exact in f32 too
    }
    const auto total = run_unary(
        {DType::f32, {2, 3, 4}}, values, [](const tg::Tensor& x) { return tg::sum_to_shape(x, {}); }, compute);
    EXPECT_DOUBLE_EQ(total.at(0), std::accumulate(values.begin(), values.end(), 0.0));
    const auto same = run_unary(
        {DType::f32, {2, 3, 4}}, values,
        [](const tg::Tensor& x) {
          return tg::sum_to_shape(x, {2, 3, 4});
        },
        compute);
    EXPECT_EQ(same.to_f64(), values);
  }
}

TEST(SumToShape, LongPreimagesGiveTheSameBitsOnAnyThreadCount) {
  const std::int64_t n = 3 * 5000;  // each output sums 5000 terms: longer than one block
  std::vector<double> values(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) values[static_cast<std::size_t>(i)] = std::sin(0.37 * static_cast<double>(i));
  const auto values_f32 = tg::HostTensor::f32({5000, 3}, std::vector<float>(values.begin(), values.end())).to_f64();
  auto run = [&] {
    return run_unary(
        {DType::f32, {5000, 3}}, values_f32, [](const tg::Tensor& x) { return tg::sum_to_shape(x, {3}); },
        tg::ComputeType::f32);
  };
  const auto parallel = run();
  tg::HostTensor serial;
  {
    tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
    serial = run();
  }
  EXPECT_EQ(parallel.to_f64(), serial.to_f64());
  for (int j = 0; j < 3; ++j) {
    double expected = 0;
    for (int i = 0; i < 5000; ++i) expected += values_f32[static_cast<std::size_t>(i * 3 + j)];
    EXPECT_NEAR(parallel.at(static_cast<std::size_t>(j)), expected, 1e-3);
  }
}

TEST(SumToShape, RefusesBadTargetsAndDtypes) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {2, 3}});
  expect_shape_error([&] { (void)tg::sum_to_shape(x, {2}); }, "sum_to_shape",
                     "target [2] does not broadcast to the input shape [2,3]");
  expect_shape_error([&] { (void)tg::sum_to_shape(x, {1, 2, 3}); }, "sum_to_shape", "more than the target rank");
  auto i = b.input("i", {DType::i32, {2, 3}});
  expect_shape_error([&] { (void)tg::sum_to_shape(i, {3}); }, "sum_to_shape", "input 0 must be f32");
}

// Facts pinned per op (optional: a new op is checked by the generic tests without joining).
struct Pinned {
  tg::ToleranceClass tolerance;
  bool accepts_i32;  // whether the sample generator takes an existing i32 value as input 0
};

std::map<tg::OpId, Pinned> pinned_defs() {
  using TC = tg::ToleranceClass;
  return {{tg::op::Reshape, {TC::exact, true}},
          {tg::op::Permute, {TC::exact, true}},
          {tg::op::SwapAxes, {TC::exact, true}},
          {tg::op::BroadcastTo, {TC::exact, true}},
          {tg::op::SumToShape, {TC::reduction, false}}};  // sum_to_shape is f32 only
}

constexpr std::string_view kFamily = "layout";

TEST(LayoutRegistry, EveryPartIsPresent) {
  const auto pinned = pinned_defs();
  tg::test::expect_ops_in_family(pinned, kFamily);
  for (tg::OpId id : tg::test::expect_family_defs(kFamily, 7, 40)) {
    const tg::OpDef& def = tg::op_def(id);
    SCOPED_TRACE(std::string(def.name));
    // A layout op moves (or sums back) the elements of one tensor.
    EXPECT_EQ(def.arity, 1);
    EXPECT_TRUE(def.differentiable);
    if (const auto it = pinned.find(id); it != pinned.end()) {
      EXPECT_EQ(def.tolerance, it->second.tolerance);
    }
  }
}

// Each sample must pass the shape rule, run through the kernel with a result of the rule's type,
// and give a cotangent of each input's type.
TEST(LayoutRegistry, SamplesAreValidAndGradRulesTyped) {
  const auto pinned = pinned_defs();
  for (tg::OpId id : tg::test::family_ops(kFamily)) {
    const tg::OpDef& def = tg::op_def(id);
    SCOPED_TRACE(std::string(def.name));
    for (std::uint64_t seed = 0; seed < 40; ++seed) {
      tg::SampleRng rng(seed);
      const auto sample = def.samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      ASSERT_EQ(sample->inputs.size(), static_cast<std::size_t>(def.arity));
      ASSERT_EQ(sample->domains.size(), sample->inputs.size());
      tg::GraphBuilder b;
      tg::TracingScope scope(b);
      std::vector<tg::Tensor> inputs;
      tg::TensorMap values;
      for (std::size_t i = 0; i < sample->inputs.size(); ++i) {
        const auto& type = sample->inputs[i];
        EXPECT_LE(type.size(), 512);
        inputs.push_back(b.input("x" + std::to_string(i), type));
        values["x" + std::to_string(i)] = tg::HostTensor::of(type, sample->domains[i].draw(rng, type.size()));
      }
      const tg::Tensor out = b.emit(id, inputs, sample->attrs, tg::SourceLoc{});
      ASSERT_TRUE(def.differentiable);
      const tg::GradArgs args{inputs, out, b.input("g", out.type()), sample->attrs};
      const auto grads = def.grad(args);
      ASSERT_EQ(grads.size(), inputs.size());
      for (std::size_t i = 0; i < grads.size(); ++i) {
        ASSERT_TRUE(grads[i].has_value());
        EXPECT_EQ(grads[i]->type(), inputs[i].type());
      }
      values["g"] = tg::HostTensor::filled(out.type(), 1.0);
      b.output("y", out);
      const auto result = tg::interpret(b.graph(), values).outputs.at("y");
      EXPECT_EQ(result.type, out.type());
      EXPECT_EQ(static_cast<std::int64_t>(result.size()), out.type().size());

      // The same op must also accept an existing value of another dtype as input 0, or decline it
      // cleanly (as pinned).
      tg::SampleRng again(seed);
      const tg::TensorType i32_first{DType::i32, sample->inputs[0].shape};
      const auto from_first = def.samples(again, i32_first);
      if (from_first) {
        EXPECT_EQ(from_first->inputs.at(0), i32_first);
        EXPECT_NO_THROW((void)tg::infer_type(id, from_first->attrs, from_first->inputs));
      }
      if (const auto it = pinned.find(id); it != pinned.end()) {
        EXPECT_EQ(from_first.has_value(), it->second.accepts_i32);
      }
    }
  }
}

TEST(LayoutRegistry, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 20);
}

// Layout grad rules pass a cotangent through for any dtype (the i32 one is unused).
TEST(LayoutGrads, GradRulesMatchFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 31, 4, std::nullopt, {.only_f32_cotangents = false});
}

}  // namespace
