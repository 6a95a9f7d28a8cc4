// The structure family's composites (front-end functions built from its ops, not ops): stack, split,
// flatten, split_heads and merge_heads against index loops written here, for every dtype and both
// compute types; their shape errors; and their gradients through tg::differentiate against
// cotangents placed by hand.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/structure_cases.h"

namespace {

using namespace tg::test::structure;

void expect_shape_error(const std::function<void()>& trace, std::string_view op, std::string_view rule_part) {
  expect_shape_error_at(trace, op, rule_part, "structure_composites_test.cpp");
}

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
        EXPECT_EQ(y.at(static_cast<std::size_t>(i)), inputs[k].at(static_cast<std::size_t>(flat_of(in_shape, c))));
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
          EXPECT_EQ(y.at(static_cast<std::size_t>(r * sizes[piece] + j)),
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
                .to_f64(),
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
      EXPECT_EQ(y.at(static_cast<std::size_t>(i)),
                values[static_cast<std::size_t>(flat_of({2, 3, 4}, {c[0], c[2], c[1] * 2 + c[3]}))]);
    }
    // merge_heads undoes it exactly.
    const auto back = run(
        {HostTensor::of({dtype, {2, 3, 4}}, values)},
        [](const auto& x) { return tg::merge_heads(tg::split_heads(x[0], 2)); }, compute);
    EXPECT_EQ(back.type, (TensorType{dtype, {2, 3, 4}}));
    EXPECT_EQ(back.to_f64(), values);
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
          EXPECT_EQ(y.at(static_cast<std::size_t>(t * 6 + h * 2 + e)),
                    values[static_cast<std::size_t>((h * 2 + t) * 2 + e)]);
  }
}

// ---- gradients ----

TEST(StructureGrads, CompositesRouteTheCotangent) {
  const auto x = HostTensor::of({DType::f32, {2, 3}}, sample_values(DType::f32, 6));
  const auto z = HostTensor::of({DType::f32, {2, 3}}, sample_values(DType::f32, 6, 2));
  // stack along axis 1 -> [2, 2, 3]: x's cotangent is w[:, 0, :], z's is w[:, 1, :].
  const auto w_stack = weights({2, 2, 3});
  const auto g_stack = gradients({x, z}, [](const auto& in) { return tg::stack(in, 1); });
  for (std::size_t k = 0; k < 2; ++k)
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 3; ++j)
        EXPECT_EQ(g_stack[k].at(static_cast<std::size_t>(i * 3 + j)),
                  w_stack[static_cast<std::size_t>((i * 2 + static_cast<std::int64_t>(k)) * 3 + j)]);
  // The middle piece of a split gets w, the rest of x none.
  const auto w_split = weights({2, 1});
  EXPECT_EQ(gradients({x},
                      [](const auto& in) {
                        return tg::split(in[0], {1, 1, 1}, 1)[1];
                      })[0]
                .to_f64(),
            (std::vector<double>{0, w_split[0], 0, 0, w_split[1], 0}));
  // split_heads: x[b, t, h * d + e] receives w[b, h, t, e].
  const auto q = HostTensor::of({DType::f32, {2, 3, 4}}, sample_values(DType::f32, 24));
  const auto w_heads = weights({2, 2, 3, 2});
  const auto g_heads = gradients({q}, [](const auto& in) { return tg::split_heads(in[0], 2); })[0];
  for (std::int64_t i = 0; i < 24; ++i) {
    const auto c = coords_of({2, 3, 4}, i);
    EXPECT_EQ(g_heads.at(static_cast<std::size_t>(i)),
              w_heads[static_cast<std::size_t>(flat_of({2, 2, 3, 2}, {c[0], c[2] / 2, c[1], c[2] % 2}))]);
  }
  const auto w_flat = weights({2, 12});
  EXPECT_EQ(gradients({q}, [](const auto& in) { return tg::flatten(in[0], 1); })[0].to_f64(), w_flat);
}

}  // namespace
