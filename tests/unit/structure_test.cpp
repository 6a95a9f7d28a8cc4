// The structure family: narrow, pad and concat against index loops written here, for every dtype and
// both compute types; the composites (stack, split, flatten, split_heads, merge_heads) likewise; the
// shape errors of ops and composites; gradients through tg::differentiate against cotangents placed
// by hand; and the OpDef parts (samples valid, grad rules typed).
#include "tensorgrad/ir/ops/ids/structure.h"

#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "support/library.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Shape;
using tg::Tensor;
using tg::TensorType;

constexpr ComputeType kComputeTypes[] = {ComputeType::f64, ComputeType::f32};
constexpr DType kAllDtypes[] = {DType::f32, DType::i32, DType::boolean};

// Distinct exactly representable values per dtype (bool in a period-3 pattern), offset by `salt` so
// two inputs of one graph differ.
std::vector<double> sample_values(DType dtype, std::int64_t n, int salt = 0) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto d = static_cast<double>(i + 100 * salt);
    v[static_cast<std::size_t>(i)] = dtype == DType::f32   ? d * 0.25 - 3.0
                                     : dtype == DType::i32 ? d * 7 - 20
                                                           : ((i + salt) % 3 == 0);
  }
  return v;
}

// Row-major coordinates of a flat index, and back.
std::vector<std::int64_t> coords_of(const Shape& shape, std::int64_t flat) {
  std::vector<std::int64_t> c(shape.size());
  for (std::size_t a = shape.size(); a-- > 0;) {
    c[a] = flat % shape[a];
    flat /= shape[a];
  }
  return c;
}
std::int64_t flat_of(const Shape& shape, const std::vector<std::int64_t>& c) {
  std::int64_t flat = 0;
  for (std::size_t a = 0; a < shape.size(); ++a) flat = flat * shape[a] + c[a];
  return flat;
}

using Build = std::function<Tensor(const std::vector<Tensor>&)>;

// Traces build(inputs x0, x1, ...) and runs it with coverage checks on; returns output "y".
HostTensor run(const std::vector<HostTensor>& inputs, const Build& build, ComputeType compute) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  std::vector<Tensor> traced;
  tg::TensorMap values;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    traced.push_back(b.input(name, inputs[i].type));
    values[name] = inputs[i];
  }
  b.output("y", build(traced));
  return tg::interpret(b.take(), values, {.compute = compute, .check_coverage = true}).outputs.at("y");
}

// Calls check(dtype, compute) for every dtype and compute type, labelled on failure.
void for_each_dtype_and_compute(const std::function<void(DType, ComputeType)>& check) {
  for (DType dtype : kAllDtypes) {
    for (ComputeType compute : kComputeTypes) {
      SCOPED_TRACE(std::string(tg::dtype_name(dtype)) + (compute == ComputeType::f64 ? " in f64" : " in f32"));
      check(dtype, compute);
    }
  }
}

// Expects `trace` to throw a ShapeError naming `op`, containing `rule_part` and this file's call site.
void expect_shape_error(const std::function<void()>& trace, std::string_view op, std::string_view rule_part) {
  try {
    trace();
    ADD_FAILURE() << "expected a ShapeError from " << op;
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), op);
    EXPECT_NE(std::string(e.what()).find(rule_part), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("structure_test.cpp"), std::string::npos) << e.what();
  }
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
      EXPECT_EQ(y.values[static_cast<std::size_t>(i)], values[static_cast<std::size_t>(flat_of(in_shape, c))]);
    }
  });
}

TEST(Narrow, NegativeAxisCountsFromTheEnd) {
  const auto values = sample_values(DType::f32, 12);
  const auto y = run(
      {HostTensor::of({DType::f32, {3, 4}}, values)}, [](const auto& x) { return tg::narrow(x[0], -1, 2, 2); },
      ComputeType::f64);
  EXPECT_EQ(y.values, (std::vector<double>{values[2], values[3], values[6], values[7], values[10], values[11]}));
  const auto first = run(
      {HostTensor::of({DType::f32, {3, 4}}, values)}, [](const auto& x) { return tg::narrow(x[0], 0, 2, 1); },
      ComputeType::f32);
  EXPECT_EQ(first.values, (std::vector<double>(values.begin() + 8, values.end())));
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
        EXPECT_EQ(y.values[static_cast<std::size_t>(i)], expected) << "at " << i;
      }
    }
  });
}

TEST(Pad, NothingToPadIsTheIdentityAndEmptyInputsPad) {
  const auto values = sample_values(DType::f32, 6);
  const auto same = run(
      {HostTensor::of({DType::f32, {2, 3}}, values)}, [](const auto& x) { return tg::pad(x[0], -1, 0, 0); },
      ComputeType::f32);
  EXPECT_EQ(same.values, values);
  const auto from_empty = run(
      {HostTensor::of({DType::i32, {2, 0}}, {})}, [](const auto& x) { return tg::pad(x[0], 1, 1, 1); },
      ComputeType::f64);
  EXPECT_EQ(from_empty.type, (TensorType{DType::i32, {2, 2}}));
  EXPECT_EQ(from_empty.values, (std::vector<double>(4, 0.0)));
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
      EXPECT_EQ(y.values[static_cast<std::size_t>(i)],
                inputs[k].values[static_cast<std::size_t>(flat_of(shapes[k], c))]);
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
                  .values,
              (std::vector<double>{1, 2, 5, 3, 4, 6}));
    EXPECT_EQ(run(
                  {a, c}, [](const auto& x) { return tg::concat(x, 0); }, compute)
                  .values,
              (std::vector<double>{1, 2, 3, 4, 7, 8}));
    EXPECT_EQ(run(
                  {a}, [](const auto& x) { return tg::concat(x); }, compute)
                  .values,
              a.values);
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

// ---- composites ----

TEST(Stack, InsertsANewAxisAnywhere) {
  for_each_dtype_and_compute([&](DType dtype, ComputeType compute) {
    const Shape in_shape{2, 3};
    std::vector<HostTensor> inputs;
    for (int k = 0; k < 3; ++k) inputs.push_back(HostTensor::of({dtype, in_shape}, sample_values(dtype, 6, k + 1)));
    for (std::int64_t axis : {0, 1, 2, -1, -3}) {
      SCOPED_TRACE("axis " + std::to_string(axis));
      const auto y = run(
          inputs, [&](const auto& x) { return tg::stack(x, axis); }, compute);
      const auto placed = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
      Shape out_shape = in_shape;
      out_shape.insert(out_shape.begin() + static_cast<std::ptrdiff_t>(placed), 3);
      ASSERT_EQ(y.type, (TensorType{dtype, out_shape}));
      for (std::int64_t i = 0; i < y.type.size(); ++i) {
        auto c = coords_of(out_shape, i);
        const auto k = static_cast<std::size_t>(c[placed]);
        c.erase(c.begin() + static_cast<std::ptrdiff_t>(placed));
        EXPECT_EQ(y.values[static_cast<std::size_t>(i)],
                  inputs[k].values[static_cast<std::size_t>(flat_of(in_shape, c))]);
      }
    }
  });
}

TEST(Stack, RefusesBadAxesAndShapes) {
  tg::GraphBuilder b;
  tg::TracingScope scope(b);
  auto x = b.input("x", {DType::f32, {2, 3}});
  auto y = b.input("y", {DType::f32, {3, 2}});
  expect_shape_error([&] { (void)tg::stack({x, x}, 3); }, "stack", "axis 3 is out of range [-3, 2]");
  expect_shape_error([&] { (void)tg::stack({x, x}, -4); }, "stack", "axis -4 is out of range");
  expect_shape_error([&] { (void)tg::stack({x, y}); }, "stack", "input 1 has shape [3,2] but input 0 has [2,3]");
  expect_shape_error([&] { (void)tg::stack({}); }, "stack", "needs at least one input");
}

TEST(Split, CutsPiecesInOrder) {
  for_each_dtype_and_compute([&](DType dtype, ComputeType compute) {
    const Shape in_shape{2, 6};
    const auto values = sample_values(dtype, 12);
    const std::vector<std::int64_t> sizes = {1, 3, 2};
    std::int64_t start = 0;
    for (std::size_t piece = 0; piece < sizes.size(); ++piece) {
      const auto y = run(
          {HostTensor::of({dtype, in_shape}, values)},
          [&](const auto& x) { return tg::split(x[0], sizes, -1).at(piece); }, compute);
      ASSERT_EQ(y.type, (TensorType{dtype, {2, sizes[piece]}}));
      for (std::int64_t r = 0; r < 2; ++r)
        for (std::int64_t j = 0; j < sizes[piece]; ++j)
          EXPECT_EQ(y.values[static_cast<std::size_t>(r * sizes[piece] + j)],
                    values[static_cast<std::size_t>(r * 6 + start + j)]);
      start += sizes[piece];
    }
  });
}

TEST(Split, RefusesSizesThatDoNotCoverTheAxis) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {2, 6}});
  expect_shape_error([&] { (void)tg::split(x, {2, 3}, 1); }, "split", "sizes [2,3] sum to 5 but axis 1 has size 6");
  expect_shape_error([&] { (void)tg::split(x, {6, 0}, 1); }, "split", "size 0 in [6,0] is less than 1");
  expect_shape_error([&] { (void)tg::split(x, {}, 1); }, "split", "needs at least one size");
  expect_shape_error([&] { (void)tg::split(x, {2}, 2); }, "split", "axis 2 is out of range for rank 2");
  EXPECT_EQ(tg::split(x, {2}, 0).size(), 1u);
}

TEST(Flatten, MergesTrailingAxes) {
  tg::GraphBuilder b;
  tg::TracingScope scope(b);
  auto x = b.input("x", {DType::f32, {2, 3, 4}});
  EXPECT_EQ(tg::flatten(x).shape(), (Shape{24}));
  EXPECT_EQ(tg::flatten(x, 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(tg::flatten(x, -1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(tg::flatten(b.input("s", {DType::i32, {}})).shape(), (Shape{1}));
  expect_shape_error([&] { (void)tg::flatten(x, 3); }, "flatten", "start_axis 3 is out of range for rank 3");
  expect_shape_error([&] { (void)tg::flatten(x, -4); }, "flatten", "start_axis -4 is out of range");
  // Row-major order is kept.
  const auto values = sample_values(DType::f32, 24);
  EXPECT_EQ(run(
                {HostTensor::of({DType::f32, {2, 3, 4}}, values)}, [](const auto& in) { return tg::flatten(in[0], 1); },
                ComputeType::f32)
                .values,
            values);
}

TEST(SplitHeads, MovesHeadsBeforeTime) {
  // [B=2, T=3, D=4] with 2 heads -> [2, 2, 3, 2]: y[b, h, t, e] = x[b, t, h * 2 + e].
  for_each_dtype_and_compute([&](DType dtype, ComputeType compute) {
    const auto values = sample_values(dtype, 24);
    const auto y = run(
        {HostTensor::of({dtype, {2, 3, 4}}, values)}, [](const auto& x) { return tg::split_heads(x[0], 2); }, compute);
    ASSERT_EQ(y.type, (TensorType{dtype, {2, 2, 3, 2}}));
    for (std::int64_t i = 0; i < y.type.size(); ++i) {
      const auto c = coords_of(y.type.shape, i);
      EXPECT_EQ(y.values[static_cast<std::size_t>(i)],
                values[static_cast<std::size_t>(flat_of({2, 3, 4}, {c[0], c[2], c[1] * 2 + c[3]}))]);
    }
    // merge_heads undoes it exactly.
    const auto back = run(
        {HostTensor::of({dtype, {2, 3, 4}}, values)},
        [](const auto& x) { return tg::merge_heads(tg::split_heads(x[0], 2)); }, compute);
    EXPECT_EQ(back.type, (TensorType{dtype, {2, 3, 4}}));
    EXPECT_EQ(back.values, values);
  });
}

TEST(SplitHeads, RankTwoAndRefusals) {
  tg::GraphBuilder b;
  auto x = b.input("x", {DType::f32, {5, 6}});
  EXPECT_EQ(tg::split_heads(x, 3).shape(), (Shape{3, 5, 2}));
  expect_shape_error([&] { (void)tg::split_heads(x, 4); }, "split_heads",
                     "last dimension 6 is not divisible by heads 4");
  expect_shape_error([&] { (void)tg::split_heads(x, 0); }, "split_heads", "heads 0 is less than 1");
  expect_shape_error(
      [&] {
        (void)tg::split_heads(b.input("v", {DType::f32, {6}}), 2);
      },
      "split_heads", "needs rank >= 2");
  expect_shape_error([&] { (void)tg::merge_heads(x); }, "merge_heads", "needs rank >= 3");
}

TEST(MergeHeads, InterleavesHeadsIntoTheLastAxis) {
  // [H=3, T=2, d=2] -> [2, 6]: y[t, h * 2 + e] = x[h, t, e].
  const auto values = sample_values(DType::f32, 12);
  for (ComputeType compute : kComputeTypes) {
    const auto y = run(
        {HostTensor::of({DType::f32, {3, 2, 2}}, values)}, [](const auto& x) { return tg::merge_heads(x[0]); },
        compute);
    ASSERT_EQ(y.type, (TensorType{DType::f32, {2, 6}}));
    for (std::int64_t t = 0; t < 2; ++t)
      for (std::int64_t h = 0; h < 3; ++h)
        for (std::int64_t e = 0; e < 2; ++e)
          EXPECT_EQ(y.values[static_cast<std::size_t>(t * 6 + h * 2 + e)],
                    values[static_cast<std::size_t>((h * 2 + t) * 2 + e)]);
  }
}

// ---- gradients ----

// d/dx_k of sum(build(x...) * w) for a fixed w: the cotangent w routed back to each input.
std::vector<HostTensor> gradients(const std::vector<HostTensor>& inputs, const Build& build) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  std::vector<Tensor> traced;
  tg::TensorMap values;
  std::vector<std::string> wrt;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    wrt.push_back("x" + std::to_string(i));
    traced.push_back(b.input(wrt.back(), inputs[i].type));
    values[wrt.back()] = inputs[i];
  }
  const Tensor y = build(traced);
  const Tensor w = b.input("w", y.type());
  values["w"] = HostTensor::of(y.type(), sample_values(DType::f32, y.size(), 7));
  b.output("loss", tg::sum(y * w));
  const tg::Graph grad = tg::differentiate(b.take(), {.wrt = wrt});
  std::vector<HostTensor> out;
  const auto result = tg::interpret(grad, values, {.compute = ComputeType::f64}).outputs;
  for (const auto& name : wrt) out.push_back(result.at("grad." + name));
  return out;
}

// The w that gradients() uses for an output of `shape`.
std::vector<double> weights(const Shape& shape) { return sample_values(DType::f32, tg::num_elements(shape), 7); }

TEST(StructureGrads, NarrowPadAndConcatRouteTheCotangent) {
  const auto x = HostTensor::of({DType::f32, {2, 5}}, sample_values(DType::f32, 10));
  const auto w_narrow = weights({2, 2});
  EXPECT_EQ(gradients({x}, [](const auto& in) { return tg::narrow(in[0], 1, 3, 2); })[0].values,
            (std::vector<double>{0, 0, 0, w_narrow[0], w_narrow[1], 0, 0, 0, w_narrow[2], w_narrow[3]}));
  const auto w_pad = weights({2, 8});
  const auto g_pad = gradients({x}, [](const auto& in) { return tg::pad(in[0], 1, 1, 2); })[0];
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(g_pad.values[static_cast<std::size_t>(r * 5 + j)], w_pad[static_cast<std::size_t>(r * 8 + j + 1)]);
  const auto a = HostTensor::of({DType::f32, {1, 3}}, sample_values(DType::f32, 3));
  const auto c = HostTensor::of({DType::f32, {2, 3}}, sample_values(DType::f32, 6, 1));
  const auto w_cat = weights({3, 3});
  const auto g_cat = gradients({a, c}, [](const auto& in) { return tg::concat(in, 0); });
  EXPECT_EQ(g_cat[0].values, (std::vector<double>(w_cat.begin(), w_cat.begin() + 3)));
  EXPECT_EQ(g_cat[1].values, (std::vector<double>(w_cat.begin() + 3, w_cat.end())));
}

TEST(StructureGrads, CompositesRouteTheCotangent) {
  const auto x = HostTensor::of({DType::f32, {2, 3}}, sample_values(DType::f32, 6));
  const auto z = HostTensor::of({DType::f32, {2, 3}}, sample_values(DType::f32, 6, 2));
  // stack along axis 1 -> [2, 2, 3]: x's cotangent is w[:, 0, :], z's is w[:, 1, :].
  const auto w_stack = weights({2, 2, 3});
  const auto g_stack = gradients({x, z}, [](const auto& in) { return tg::stack(in, 1); });
  for (std::size_t k = 0; k < 2; ++k)
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 3; ++j)
        EXPECT_EQ(g_stack[k].values[static_cast<std::size_t>(i * 3 + j)],
                  w_stack[static_cast<std::size_t>((i * 2 + static_cast<std::int64_t>(k)) * 3 + j)]);
  // The middle piece of a split gets w, the rest of x none.
  const auto w_split = weights({2, 1});
  EXPECT_EQ(gradients({x},
                      [](const auto& in) {
                        return tg::split(in[0], {1, 1, 1}, 1)[1];
                      })[0]
                .values,
            (std::vector<double>{0, w_split[0], 0, 0, w_split[1], 0}));
  // split_heads: x[b, t, h * d + e] receives w[b, h, t, e].
  const auto q = HostTensor::of({DType::f32, {2, 3, 4}}, sample_values(DType::f32, 24));
  const auto w_heads = weights({2, 2, 3, 2});
  const auto g_heads = gradients({q}, [](const auto& in) { return tg::split_heads(in[0], 2); })[0];
  for (std::int64_t i = 0; i < 24; ++i) {
    const auto c = coords_of({2, 3, 4}, i);
    EXPECT_EQ(g_heads.values[static_cast<std::size_t>(i)],
              w_heads[static_cast<std::size_t>(flat_of({2, 2, 3, 2}, {c[0], c[2] / 2, c[1], c[2] % 2}))]);
  }
  const auto w_flat = weights({2, 12});
  EXPECT_EQ(gradients({q}, [](const auto& in) { return tg::flatten(in[0], 1); })[0].values, w_flat);
}

// ---- registry ----

constexpr OpId kFamilyOps[] = {op::Narrow, op::Pad, op::Concat};

TEST(StructureRegistry, EveryPartIsPresent) {
  for (OpId id : kFamilyOps) {
    const tg::OpDef& def = tg::op_def(id);
    SCOPED_TRACE(std::string(def.name));
    EXPECT_EQ(def.name, tg::op_name(id));
    EXPECT_NE(def.shape, nullptr);
    EXPECT_NE(def.grad, nullptr);
    EXPECT_TRUE(def.differentiable);
    EXPECT_NE(def.samples, nullptr);
    EXPECT_TRUE(tg::interp_has_kernel(id));
    EXPECT_EQ(def.tolerance, tg::ToleranceClass::exact);
    EXPECT_EQ(def.arity, id == op::Concat ? tg::kVariadic : 1);
  }
}

// Each sample (fresh, or around a given first input of any dtype) passes the shape rule, runs with a
// result of the rule's type, and the grad rule gives one cotangent per input of that input's type.
TEST(StructureRegistry, SamplesAreValidAndGradRulesTyped) {
  for (OpId id : kFamilyOps) {
    const tg::OpDef& def = tg::op_def(id);
    SCOPED_TRACE(std::string(def.name));
    std::size_t most_inputs = 0;
    for (std::uint64_t seed = 0; seed < 60; ++seed) {
      tg::SampleRng rng(seed);
      const std::optional<TensorType> given =
          seed % 2 ? std::optional<TensorType>{TensorType{kAllDtypes[seed % 3], {3, 4}}} : std::nullopt;
      const auto sample = def.samples(rng, given);
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
      b.output("y", out);
      const auto result = tg::interpret(b.graph(), values, {.check_coverage = true}).outputs.at("y");
      EXPECT_EQ(result.type, out.type());
    }
    if (id == op::Concat) {
      EXPECT_GE(most_inputs, 3u);
    }  // variadic samples really vary
    tg::SampleRng rng(1);
    EXPECT_FALSE(def.samples(rng, TensorType{DType::f32, {}}).has_value());  // a scalar has no axis
  }
}

}  // namespace
