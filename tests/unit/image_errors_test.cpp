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
