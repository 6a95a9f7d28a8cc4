// The structure family: narrow, pad and concat against index loops written here, for every dtype and
// both compute types; their shape errors; gradients through tg::differentiate against cotangents
// placed by hand; and, for every op the registry lists in the family, the OpDef parts (samples
// valid, grad rules typed), f32 against the oracle and the grad rules against finite differences.
// The composites built from these ops: structure_composites_test.cpp.
#include "tensorgrad/ir/ops/ids/structure.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/op_family.h"
#include "support/structure_cases.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Shape;
using tg::Tensor;
using tg::TensorType;

using namespace tg::test::structure;

void expect_shape_error(const std::function<void()>& trace, std::string_view op, std::string_view rule_part) {
  expect_shape_error_at(trace, op, rule_part, "structure_test.cpp");
}

// ---- narrow ----

TEST(Narrow, SlicesOneAxisForEveryDtype) {
  const Shape in_shape{2, 5, 3};
  for_each_dtype_and_compute([&](DType dtype, ComputeType compute) {
    const auto values = sample_values(dtype, 30);
    const auto y = run(
        {HostTensor::of({dtype, in_shape}, values)}, [](const auto& x) { return tg::narrow(x[0], 1, 1, 3); }, compute);
    ASSERT_EQ(y.type, (TensorType{dtype, {2, 3, 3}}));
    for (std::int64_t i = 0; i < y.type.size(); ++i) {
      auto c = coords_of(y.type.shape, i);
      c[1] += 1;
      EXPECT_EQ(y.at(static_cast<std::size_t>(i)), values[static_cast<std::size_t>(flat_of(in_shape, c))]);
    }
  });
}

TEST(Narrow, NegativeAxisCountsFromTheEnd) {
  const auto values = sample_values(DType::f32, 12);
  const auto y = run(
      {HostTensor::of({DType::f32, {3, 4}}, values)}, [](const auto& x) { return tg::narrow(x[0], -1, 2, 2); },
      ComputeType::f64);
  EXPECT_EQ(y.to_f64(), (std::vector<double>{values[2], values[3], values[6], values[7], values[10], values[11]}));
  const auto first = run(
      {HostTensor::of({DType::f32, {3, 4}}, values)}, [](const auto& x) { return tg::narrow(x[0], 0, 2, 1); },
      ComputeType::f32);
  EXPECT_EQ(first.to_f64(), (std::vector<double>(values.begin() + 8, values.end())));
}

TEST(Narrow, RefusesBadRanges) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {2, 5}});
  auto s = b.input("s", {DType::f32, {}});
  expect_shape_error([&] { (void)tg::narrow(x, 2, 0, 1); }, "narrow", "axis 2 is out of range for rank 2");
  expect_shape_error([&] { (void)tg::narrow(x, -3, 0, 1); }, "narrow", "axis -3 is out of range for rank 2");
  expect_shape_error([&] { (void)tg::narrow(x, 1, -1, 2); }, "narrow", "start -1 is negative");
  expect_shape_error([&] { (void)tg::narrow(x, 1, 0, 0); }, "narrow", "length 0 is less than 1");
  expect_shape_error([&] { (void)tg::narrow(x, 1, 3, 3); }, "narrow", "= 6 is past the end of axis 1 of size 5");
  expect_shape_error([&] { (void)tg::narrow(s, 0, 0, 1); }, "narrow", "0-d input has no axis 0");
}

// ---- pad ----

TEST(Pad, ZeroFillsAroundOneAxisForEveryDtype) {
  const Shape in_shape{3, 2, 2};
  for_each_dtype_and_compute([&](DType dtype, ComputeType compute) {
    const auto values = sample_values(dtype, 12);
    for (std::int64_t axis : {0, 1, 2}) {
      SCOPED_TRACE("axis " + std::to_string(axis));
      const auto y = run(
          {HostTensor::of({dtype, in_shape}, values)}, [&](const auto& x) { return tg::pad(x[0], axis, 2, 1); },
          compute);
      Shape out_shape = in_shape;
      out_shape[static_cast<std::size_t>(axis)] += 3;
      ASSERT_EQ(y.type, (TensorType{dtype, out_shape}));
      for (std::int64_t i = 0; i < y.type.size(); ++i) {
        auto c = coords_of(out_shape, i);
        const auto inside = c[static_cast<std::size_t>(axis)] - 2;
        double expected = 0;
        if (inside >= 0 && inside < in_shape[static_cast<std::size_t>(axis)]) {
          c[static_cast<std::size_t>(axis)] = inside;
          expected = values[static_cast<std::size_t>(flat_of(in_shape, c))];
        }
        EXPECT_EQ(y.at(static_cast<std::size_t>(i)), expected) << "at " << i;
      }
    }
  });
}

TEST(Pad, NothingToPadIsTheIdentityAndEmptyInputsPad) {
  const auto values = sample_values(DType::f32, 6);
  const auto same = run(
      {HostTensor::of({DType::f32, {2, 3}}, values)}, [](const auto& x) { return tg::pad(x[0], -1, 0, 0); },
      ComputeType::f32);
  EXPECT_EQ(same.to_f64(), values);
  const auto from_empty = run(
      {HostTensor::of({DType::i32, {2, 0}}, {})}, [](const auto& x) { return tg::pad(x[0], 1, 1, 1); },
      ComputeType::f64);
  EXPECT_EQ(from_empty.type, (TensorType{DType::i32, {2, 2}}));
  EXPECT_EQ(from_empty.to_f64(), (std::vector<double>(4, 0.0)));
}

TEST(Pad, RefusesNegativeAmountsAndBadAxes) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {2, 5}});
  expect_shape_error([&] { (void)tg::pad(x, 0, -1, 0); }, "pad", "before -1 is negative");
  expect_shape_error([&] { (void)tg::pad(x, 0, 0, -2); }, "pad", "after -2 is negative");
  expect_shape_error([&] { (void)tg::pad(x, 5, 0, 0); }, "pad", "axis 5 is out of range for rank 2");
}

// ---- concat ----

TEST(Concat, JoinsAlongAnAxisForEveryDtype) {
  for_each_dtype_and_compute([&](DType dtype, ComputeType compute) {
    const std::vector<Shape> shapes = {{2, 1, 3}, {2, 4, 3}, {2, 2, 3}};
    std::vector<HostTensor> inputs;
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      inputs.push_back(
          HostTensor::of({dtype, shapes[k]}, sample_values(dtype, tg::num_elements(shapes[k]), int(k) + 1)));
    }
    const auto y = run(
        inputs, [](const auto& x) { return tg::concat(x, 1); }, compute);
    ASSERT_EQ(y.type, (TensorType{dtype, {2, 7, 3}}));
    for (std::int64_t i = 0; i < y.type.size(); ++i) {
      auto c = coords_of(y.type.shape, i);
      std::size_t k = 0;
      while (c[1] >= shapes[k][1]) c[1] -= shapes[k++][1];
      EXPECT_EQ(y.at(static_cast<std::size_t>(i)), inputs[k].at(static_cast<std::size_t>(flat_of(shapes[k], c))));
    }
  });
}

TEST(Concat, FirstAndLastAxesAndOneInput) {
  const auto a = HostTensor::f32({2, 2}, {1, 2, 3, 4});
  const auto b = HostTensor::f32({2, 1}, {5, 6});
  const auto c = HostTensor::f32({1, 2}, {7, 8});
  for (ComputeType compute : kComputeTypes) {
    EXPECT_EQ(run(
                  {a, b}, [](const auto& x) { return tg::concat(x, -1); }, compute)
                  .to_f64(),
              (std::vector<double>{1, 2, 5, 3, 4, 6}));
    EXPECT_EQ(run(
                  {a, c}, [](const auto& x) { return tg::concat(x, 0); }, compute)
                  .to_f64(),
              (std::vector<double>{1, 2, 3, 4, 7, 8}));
    EXPECT_EQ(run(
                  {a}, [](const auto& x) { return tg::concat(x); }, compute)
                  .to_f64(),
              a.to_f64());
  }
}

TEST(Concat, RefusesMismatchedInputs) {
  tg::GraphBuilder b;
  tg::TracingScope scope(b);
  auto x = b.input("x", {DType::f32, {2, 3}});
  auto wide = b.input("wide", {DType::f32, {2, 4}});
  auto ints = b.input("ints", {DType::i32, {2, 3}});
  auto cube = b.input("cube", {DType::f32, {2, 3, 1}});
  auto s = b.input("s", {DType::f32, {}});
  expect_shape_error([&] { (void)tg::concat({x, ints}); }, "concat", "dtypes must match");
  expect_shape_error([&] { (void)tg::concat({x, cube}); }, "concat", "input 1 has rank 3 but input 0 has rank 2");
  expect_shape_error(
      [&] {
        (void)tg::concat({x, wide}, 0);
      },
      "concat", "input 1 has size 4 on axis 1 but input 0 has 3");
  expect_shape_error([&] { (void)tg::concat({x, x}, 2); }, "concat", "axis 2 is out of range for rank 2");
  expect_shape_error([&] { (void)tg::concat({s, s}); }, "concat", "0-d input has no axis 0");
  expect_shape_error([&] { (void)tg::concat({}); }, "concat", "needs at least one input");
  EXPECT_EQ(tg::concat({x, wide}, 1).shape(), (Shape{2, 7}));
}

// Attributes from the parser reach the rules raw: unnormalized values must be refused there too.
TEST(StructureRules, RefuseRawAttributesTheFrontEndWouldNormalize) {
  const TensorType x{DType::f32, {2, 3}};
  const TensorType inputs[] = {x, x};
  auto refuses = [](OpId op, const tg::Attrs& attrs, std::span<const TensorType> in, std::string_view part) {
    try {
      (void)tg::infer_type(op, attrs, in);
      ADD_FAILURE() << "expected RuleBroken";
    } catch (const tg::RuleBroken& e) {
      EXPECT_NE(e.rule.find(part), std::string::npos) << e.rule;
    }
  };
  refuses(op::Narrow, {{"axis", std::int64_t{-1}}, {"start", std::int64_t{0}}, {"length", std::int64_t{1}}},
          std::span(inputs, 1), "axis -1 is out of range");
  refuses(op::Pad, {{"axis", std::int64_t{-2}}, {"before", std::int64_t{0}}, {"after", std::int64_t{1}}},
          std::span(inputs, 1), "axis -2 is out of range");
  refuses(op::Concat, {{"axis", std::int64_t{-1}}}, inputs, "axis -1 is out of range");
  refuses(op::Concat, {{"axis", std::int64_t{0}}}, {}, "needs at least one input");
}

// ---- gradients ----

TEST(StructureGrads, NarrowPadAndConcatRouteTheCotangent) {
  const auto x = HostTensor::of({DType::f32, {2, 5}}, sample_values(DType::f32, 10));
  const auto w_narrow = weights({2, 2});
  EXPECT_EQ(gradients({x}, [](const auto& in) { return tg::narrow(in[0], 1, 3, 2); })[0].to_f64(),
            (std::vector<double>{0, 0, 0, w_narrow[0], w_narrow[1], 0, 0, 0, w_narrow[2], w_narrow[3]}));
  const auto w_pad = weights({2, 8});
  const auto g_pad = gradients({x}, [](const auto& in) { return tg::pad(in[0], 1, 1, 2); })[0];
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(g_pad.at(static_cast<std::size_t>(r * 5 + j)), w_pad[static_cast<std::size_t>(r * 8 + j + 1)]);
  const auto a = HostTensor::of({DType::f32, {1, 3}}, sample_values(DType::f32, 3));
  const auto c = HostTensor::of({DType::f32, {2, 3}}, sample_values(DType::f32, 6, 1));
  const auto w_cat = weights({3, 3});
  const auto g_cat = gradients({a, c}, [](const auto& in) { return tg::concat(in, 0); });
  EXPECT_EQ(g_cat[0].to_f64(), (std::vector<double>(w_cat.begin(), w_cat.begin() + 3)));
  EXPECT_EQ(g_cat[1].to_f64(), (std::vector<double>(w_cat.begin() + 3, w_cat.end())));
}

// ---- registry ----

constexpr std::string_view kFamily = "structure";

// Facts pinned per op (optional: a new op is checked by the generic tests without joining).
const std::map<OpId, int> kPinnedArity = {{op::Narrow, 1}, {op::Pad, 1}, {op::Concat, tg::kVariadic}};

TEST(StructureRegistry, EveryPartIsPresent) {
  tg::test::expect_ops_in_family(kPinnedArity, kFamily);
  for (OpId id : tg::test::expect_family_defs(kFamily, 3, 40, /*bounded_output=*/false)) {
    const tg::OpDef& def = tg::op_def(id);
    SCOPED_TRACE(std::string(def.name));
    if (const auto it = kPinnedArity.find(id); it != kPinnedArity.end()) {
      EXPECT_TRUE(def.differentiable);
      EXPECT_EQ(def.tolerance, tg::ToleranceClass::exact);
      EXPECT_EQ(def.arity, it->second);
    }
  }
}

// Each sample (fresh, or around a given first input of any dtype) passes the shape rule, runs with a
// result of the rule's type, and the grad rule gives one cotangent per input of that input's type.
TEST(StructureRegistry, SamplesAreValidAndGradRulesTyped) {
  for (OpId id : tg::test::family_ops(kFamily)) {
    const tg::OpDef& def = tg::op_def(id);
    SCOPED_TRACE(std::string(def.name));
    std::size_t most_inputs = 0;
    for (std::uint64_t seed = 0; seed < 60; ++seed) {
      tg::SampleRng rng(seed);
      const std::optional<TensorType> given =
          seed % 2 ? std::optional<TensorType>{TensorType{kAllDtypes[seed % 3], {3, 4}}} : std::nullopt;
      const auto sample = def.samples(rng, given);
      // The pinned ops take a first input of any dtype; a new op may decline one.
      if (!sample && given && !kPinnedArity.contains(id)) continue;
      ASSERT_TRUE(sample.has_value());
      if (given) {
        EXPECT_EQ(sample->inputs.at(0), *given);
      }
      ASSERT_EQ(sample->domains.size(), sample->inputs.size());
      most_inputs = std::max(most_inputs, sample->inputs.size());
      tg::GraphBuilder b;
      tg::TracingScope scope(b);
      std::vector<Tensor> inputs;
      tg::TensorMap values;
      for (std::size_t i = 0; i < sample->inputs.size(); ++i) {
        const auto& type = sample->inputs[i];
        if (!given) {
          EXPECT_LE(type.size(), 512);
        }
        inputs.push_back(b.input("x" + std::to_string(i), type));
        values["x" + std::to_string(i)] = HostTensor::of(type, sample->domains[i].draw(rng, type.size()));
      }
      const Tensor out = b.emit(id, inputs, sample->attrs, tg::SourceLoc{});
      b.output("y", out);
      if (!def.differentiable) {
        const auto result = tg::interpret(b.graph(), values, {.check_coverage = true}).outputs.at("y");
        EXPECT_EQ(result.type, out.type());
        continue;
      }
      const tg::GradArgs args{inputs, out, b.input("g", out.type()), sample->attrs};
      values["g"] = HostTensor::filled(out.type(), 1.0);
      const auto grads = def.grad(args);
      ASSERT_EQ(grads.size(), inputs.size());
      for (std::size_t i = 0; i < grads.size(); ++i) {
        EXPECT_EQ(grads[i].has_value(), inputs[i].dtype() == DType::f32);
        if (grads[i]) {
          EXPECT_EQ(grads[i]->type(), inputs[i].type());
        }
      }
      const auto result = tg::interpret(b.graph(), values, {.check_coverage = true}).outputs.at("y");
      EXPECT_EQ(result.type, out.type());
    }
    if (id == op::Concat) {
      EXPECT_GE(most_inputs, 3u);
    }  // variadic samples really vary
    if (kPinnedArity.contains(id)) {
      tg::SampleRng rng(1);
      EXPECT_FALSE(def.samples(rng, TensorType{DType::f32, {}}).has_value());  // a scalar has no axis
    }
  }
}

TEST(StructureRegistry, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 20);
}

TEST(StructureGrads, GradRulesMatchFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 5, 4);
}

}  // namespace
