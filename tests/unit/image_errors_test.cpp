// The image family's bad input: every shape error names the op, the numbers and the call site (the
// OpDef parts and the rest of the family: image_test.cpp).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "support/library.h"

namespace {

using tg::DType;
using tg::Shape;
using tg::Tensor;

// ---- shape errors ----

// Expects `trace` to throw a ShapeError naming `op`, whose message contains every one of `parts`
// and this file as the call site.
void expect_shape_error(const std::function<void(tg::GraphBuilder&)>& trace, std::string_view op,
                        std::initializer_list<std::string_view> parts) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  try {
    trace(b);
    ADD_FAILURE() << "expected a ShapeError from " << op;
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), op);
    const std::string what = e.what();
    for (auto part : parts) EXPECT_NE(what.find(part), std::string::npos) << "missing '" << part << "' in: " << what;
    EXPECT_NE(what.find("image_errors_test.cpp"), std::string::npos) << what;
  }
}

tg::TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }

TEST(Conv2d, RefusesBadShapesAndOptions) {
  const auto conv = [](Shape x, Shape w, tg::Conv2dOptions o) {
    return [=](tg::GraphBuilder& b) { tg::conv2d(b.input("x", f32(x)), b.input("w", f32(w)), o); };
  };
  expect_shape_error(conv({1, 3, 5, 5}, {2, 4, 3, 3}, {}), "conv2d", {"channels differ", "3", "4"});
  expect_shape_error(conv({3, 5, 5}, {2, 3, 3, 3}, {}), "conv2d", {"input must be 4-D", "f32[3,5,5]"});
  expect_shape_error(conv({1, 3, 5, 5}, {3, 3, 3}, {}), "conv2d", {"weight must be 4-D"});
  expect_shape_error(conv({1, 1, 2, 5}, {1, 1, 4, 3}, {.padding = 0}), "conv2d",
                     {"kernel height 4 exceeds the padded input height 2", "no output"});
  expect_shape_error(conv({1, 1, 5, 2}, {1, 1, 3, 5}, {.padding = 1}), "conv2d",
                     {"kernel width 5 exceeds the padded input width 4"});
  expect_shape_error(conv({1, 1, 5, 5}, {1, 1, 3, 3}, {.stride = 0}), "conv2d", {"stride must be >= 1, got 0"});
  expect_shape_error(conv({1, 1, 5, 5}, {1, 1, 3, 3}, {.padding = -1}), "conv2d", {"padding must be >= 0, got -1"});
  expect_shape_error(conv({1, 1, 5, 5}, {1, 1, 0, 3}, {}), "conv2d", {"kernel size must be >= 1, got 0x3"});
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        tg::conv2d(b.input("x", {DType::i32, {1, 1, 3, 3}}), b.input("w", f32({1, 1, 1, 1})));
      },
      "conv2d", {"input must be f32"});
}

// Groups, dilation and per-axis options: each refusal names the op, both input types, the numbers
// and this file as the call site.
TEST(Conv2d, RefusesBadGroupsDilationAndPerAxisOptions) {
  const auto conv = [](Shape x, Shape w, tg::Conv2dOptions o) {
    return [=](tg::GraphBuilder& b) { tg::conv2d(b.input("x", f32(x)), b.input("w", f32(w)), o); };
  };
  expect_shape_error(conv({1, 3, 5, 5}, {2, 1, 3, 3}, {.groups = 2}), "conv2d",
                     {"conv2d(f32[1,3,5,5], f32[2,1,3,3])", "groups 2 does not divide the input channels 3"});
  expect_shape_error(conv({1, 4, 5, 5}, {3, 2, 3, 3}, {.groups = 2}), "conv2d",
                     {"conv2d(f32[1,4,5,5], f32[3,2,3,3])", "groups 2 does not divide the output channels", "3"});
  expect_shape_error(conv({1, 4, 5, 5}, {4, 4, 3, 3}, {.groups = 2}), "conv2d",
                     {"conv2d(f32[1,4,5,5], f32[4,4,3,3])", "channels differ", "2 per group of 2", "expects 4"});
  // A depthwise weight [C, 1, kh, kw] without groups = C.
  expect_shape_error(conv({1, 3, 5, 5}, {3, 1, 3, 3}, {}), "conv2d", {"channels differ", "expects 1"});
  expect_shape_error(conv({1, 2, 5, 5}, {2, 2, 3, 3}, {.groups = 0}), "conv2d", {"groups must be >= 1, got 0"});
  expect_shape_error(conv({1, 2, 5, 5}, {2, 2, 3, 3}, {.groups = -2}), "conv2d", {"groups must be >= 1, got -2"});
  expect_shape_error(conv({1, 1, 5, 5}, {1, 1, 3, 3}, {.dilation = 0}), "conv2d",
                     {"conv2d(f32[1,1,5,5], f32[1,1,3,3])", "dilation must be >= 1, got 0 (height)"});
  expect_shape_error(conv({1, 1, 5, 5}, {1, 1, 3, 3}, {.dilation = {1, -1}}), "conv2d",
                     {"dilation must be >= 1, got -1 (width)"});
  expect_shape_error(conv({1, 1, 5, 5}, {1, 1, 3, 3}, {.stride = {2, 0}}), "conv2d",
                     {"stride must be >= 1, got 0 (width)"});
  expect_shape_error(conv({1, 1, 5, 5}, {1, 1, 3, 3}, {.padding = {0, -2}}), "conv2d",
                     {"padding must be >= 0, got -2 (width)"});
  // A dilated kernel spans dilation * (kernel - 1) + 1 rows: 7 over a 5-row image.
  expect_shape_error(conv({1, 1, 5, 9}, {1, 1, 3, 3}, {.dilation = 3}), "conv2d",
                     {"conv2d(f32[1,1,5,9], f32[1,1,3,3])",
                      "kernel height 3 (dilation 3: spans 7) exceeds the padded "
                      "input height 5",
                      "no output"});
  expect_shape_error(conv({1, 1, 9, 4}, {1, 1, 3, 3}, {.padding = {0, 1}, .dilation = {1, 3}}), "conv2d",
                     {"kernel width 3 (dilation 3: spans 7) exceeds the padded input width 6 (4 + 2*padding 1)"});
}

TEST(Conv2d, RefusesPaddingSameWithAStride) {
  const auto same = [](tg::Conv2dOptions o) {
    o.padding = tg::kPaddingSame;
    return [=](tg::GraphBuilder& b) {
      tg::conv2d(b.input("x", f32({1, 2, 6, 6})), b.input("w", f32({3, 2, 3, 3})), o);
    };
  };
  expect_shape_error(same({.stride = 2}), "conv2d",
                     {"conv2d(f32[1,2,6,6], f32[3,2,3,3])", "padding = same needs stride 1, got stride [2, 2]",
                      "PyTorch refuses it too"});
  expect_shape_error(same({.stride = {1, 2}}), "conv2d", {"got stride [1, 2]", "PyTorch refuses it too"});
  expect_shape_error(same({.dilation = {0, 1}}), "conv2d", {"dilation must be >= 1, got [0, 1]"});
  // The other rules still hold under padding = same.
  expect_shape_error(same({.groups = 4}), "conv2d", {"groups 4 does not divide the input channels 2"});
}

TEST(Conv2dAdjoints, RefusePaddingSame) {
  tg::Conv2dOptions same;
  same.padding = tg::kPaddingSame;
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        tg::conv2d_input_grad(b.input("g", f32({1, 2, 5, 5})), b.input("w", f32({2, 1, 3, 3})), 5, 5, same);
      },
      "conv2d_input_grad",
      {"conv2d_input_grad(f32[1,2,5,5], f32[2,1,3,3])", "padding = same is for conv2d only",
       "pass the explicit padding"});
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        tg::conv2d_weight_grad(b.input("x", f32({1, 1, 5, 5})), b.input("g", f32({1, 2, 5, 5})), 3, 3, same);
      },
      "conv2d_weight_grad", {"conv2d_weight_grad(f32[1,1,5,5], f32[1,2,5,5])", "padding = same is for conv2d only"});
}

TEST(Conv2dInputGrad, RefusesBadGroupsAndDilation) {
  const auto op = [](Shape g, Shape w, std::int64_t h, std::int64_t wd, tg::Conv2dOptions o) {
    return [=](tg::GraphBuilder& b) { tg::conv2d_input_grad(b.input("g", f32(g)), b.input("w", f32(w)), h, wd, o); };
  };
  expect_shape_error(op({1, 3, 3, 3}, {3, 1, 3, 3}, 5, 5, {.groups = 2}), "conv2d_input_grad",
                     {"conv2d_input_grad(f32[1,3,3,3], f32[3,1,3,3])",
                      "groups 2 does not divide the output channels (weight dim 0) 3"});
  expect_shape_error(op({1, 2, 3, 3}, {2, 1, 3, 3}, 5, 5, {.groups = 0}), "conv2d_input_grad",
                     {"groups must be >= 1, got 0"});
  expect_shape_error(op({1, 2, 3, 3}, {2, 1, 3, 3}, 5, 5, {.dilation = {2, 1}}), "conv2d_input_grad",
                     {"grad_output [1,2,3,3] has spatial size 3x3", "dilation [2, 1]", "gives 1x3"});
  expect_shape_error(op({1, 2, 3, 3}, {2, 1, 3, 3}, 5, 5, {.dilation = {1, 0}}), "conv2d_input_grad",
                     {"dilation must be >= 1, got 0 (width)"});
  expect_shape_error(op({1, 2, 1, 1}, {2, 1, 3, 3}, 4, 4, {.dilation = 2}), "conv2d_input_grad",
                     {"kernel height 3 (dilation 2: spans 5) exceeds the padded input height 4"});
  expect_shape_error(op({1, 2, 3, 3}, {2, 1, 3, 3}, 5, 5, {.padding = {-1, 0}}), "conv2d_input_grad",
                     {"padding must be >= 0, got -1 (height)"});
}

TEST(Conv2dWeightGrad, RefusesBadGroupsAndDilation) {
  const auto op = [](Shape x, Shape g, std::int64_t kh, std::int64_t kw, tg::Conv2dOptions o) {
    return [=](tg::GraphBuilder& b) { tg::conv2d_weight_grad(b.input("x", f32(x)), b.input("g", f32(g)), kh, kw, o); };
  };
  expect_shape_error(
      op({1, 3, 5, 5}, {1, 2, 3, 3}, 3, 3, {.groups = 2}), "conv2d_weight_grad",
      {"conv2d_weight_grad(f32[1,3,5,5], f32[1,2,3,3])", "groups 2 does not divide the input channels 3"});
  expect_shape_error(op({1, 4, 5, 5}, {1, 3, 3, 3}, 3, 3, {.groups = 2}), "conv2d_weight_grad",
                     {"groups 2 does not divide the output channels (grad_output dim 1) 3"});
  expect_shape_error(op({1, 1, 5, 5}, {1, 2, 3, 3}, 3, 3, {.dilation = 2}), "conv2d_weight_grad",
                     {"spatial size 3x3", "gives 1x1"});
  expect_shape_error(op({1, 1, 5, 5}, {1, 2, 1, 1}, 3, 3, {.dilation = 3}), "conv2d_weight_grad",
                     {"kernel height 3 (dilation 3: spans 7) exceeds the padded input height 5"});
  expect_shape_error(op({1, 1, 5, 5}, {1, 2, 3, 3}, 3, 3, {.stride = {0, 1}}), "conv2d_weight_grad",
                     {"stride must be >= 1, got 0 (height)"});
}

TEST(Conv2dInputGrad, RefusesMismatchedShapes) {
  const auto op = [](Shape g, Shape w, std::int64_t h, std::int64_t wd, tg::Conv2dOptions o) {
    return [=](tg::GraphBuilder& b) { tg::conv2d_input_grad(b.input("g", f32(g)), b.input("w", f32(w)), h, wd, o); };
  };
  expect_shape_error(op({1, 2, 3, 3}, {2, 1, 3, 3}, 6, 5, {}), "conv2d_input_grad",
                     {"grad_output [1,2,3,3] has spatial size 3x3", "gives 4x3"});
  expect_shape_error(op({1, 3, 3, 3}, {2, 1, 3, 3}, 5, 5, {}), "conv2d_input_grad", {"output channels differ"});
  expect_shape_error(op({1, 2, 3, 3}, {2, 1, 3, 3}, 0, 5, {}), "conv2d_input_grad", {"image size must be >= 1"});
  expect_shape_error(op({1, 2, 3, 3}, {2, 1, 3, 3}, 5, 5, {.stride = 0}), "conv2d_input_grad", {"stride"});
  expect_shape_error(op({2, 3, 3}, {2, 1, 3, 3}, 5, 5, {}), "conv2d_input_grad", {"grad_output must be 4-D"});
}

TEST(Conv2dWeightGrad, RefusesMismatchedShapes) {
  const auto op = [](Shape x, Shape g, std::int64_t kh, std::int64_t kw, tg::Conv2dOptions o) {
    return [=](tg::GraphBuilder& b) { tg::conv2d_weight_grad(b.input("x", f32(x)), b.input("g", f32(g)), kh, kw, o); };
  };
  expect_shape_error(op({2, 1, 5, 5}, {1, 2, 3, 3}, 3, 3, {}), "conv2d_weight_grad", {"batch sizes differ", "2", "1"});
  expect_shape_error(op({1, 1, 5, 5}, {1, 2, 3, 2}, 3, 3, {}), "conv2d_weight_grad", {"spatial size 3x2", "gives 3x3"});
  expect_shape_error(op({1, 1, 5, 5}, {1, 2, 3, 3}, 0, 3, {}), "conv2d_weight_grad", {"kernel size must be >= 1"});
  expect_shape_error(op({1, 1, 2, 2}, {1, 2, 1, 1}, 3, 3, {}), "conv2d_weight_grad", {"kernel height 3 exceeds"});
}

TEST(MaxPool2d, RefusesBadShapesAndOptions) {
  const auto pool = [](Shape x, std::int64_t k, tg::Pool2dOptions o) {
    return [=](tg::GraphBuilder& b) { tg::max_pool2d(b.input("x", f32(x)), k, o); };
  };
  expect_shape_error(pool({1, 1, 4, 4}, 2, {.padding = 2}), "max_pool2d",
                     {"padding 2 exceeds half the kernel 2 (at most 1)"});
  expect_shape_error(pool({1, 1, 4, 4}, 0, {}), "max_pool2d", {"kernel must be >= 1, got 0"});
  expect_shape_error(pool({1, 1, 4, 4}, 2, {.stride = 0}), "max_pool2d", {"stride must be >= 1, got 0"});
  expect_shape_error(pool({1, 1, 2, 4}, 3, {.stride = 1}), "max_pool2d", {"kernel height 3 exceeds", "no output"});
  expect_shape_error(pool({4, 4}, 2, {}), "max_pool2d", {"input must be 4-D"});
  // Padding half an even kernel would give windows over an empty plane: nothing to choose from.
  expect_shape_error(pool({1, 1, 0, 3}, 2, {.padding = 1}), "max_pool2d",
                     {"max pooling needs a non-empty image, got height 0 and width 3"});
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        tg::max_pool2d_grad(b.input("x", f32({1, 1, 4, 4})), b.input("g", f32({1, 1, 3, 3})), 2, 2, 0);
      },
      "max_pool2d_grad", {"grad_output [1,1,3,3] is not the pooled shape [1,1,2,2]"});
}

TEST(NearestUpsample2d, RefusesBadFactorAndRank) {
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        tg::nearest_upsample2d(b.input("x", f32({1, 1, 2, 2})), 0);
      },
      "nearest_upsample2d", {"factor must be >= 1, got 0"});
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        tg::nearest_upsample2d(b.input("x", f32({2, 2, 2})), 2);
      },
      "nearest_upsample2d", {"input must be 4-D", "f32[2,2,2]"});
}

}  // namespace
