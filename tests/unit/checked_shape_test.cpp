// Size limits and checked shape arithmetic (issue 15, item 1): both sides of kMaxElements, and for
// each kind of shape arithmetic (element counts, attribute sums and products, broadcast and matmul
// results, parsed types) a typed error naming the op and the dims instead of a wrapped count.
// Tracing allocates nothing, so graphs at the limit are cheap to build here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

namespace {

using tg::DType;
using tg::Shape;

constexpr std::int64_t kBig = std::int64_t{1} << 32;  // [kBig, kBig] has 2^64 elements: wraps to 0
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

tg::TensorType f32(Shape shape) { return {DType::f32, std::move(shape)}; }

// Runs `trace` in a fresh tracing scope and expects a ShapeError of `op` whose message holds every
// string of `mentions` (the dims, the rule).
void expect_shape_error(const std::function<void(tg::GraphBuilder&)>& trace, const std::string& op,
                        std::initializer_list<std::string> mentions) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  try {
    trace(b);
    ADD_FAILURE() << op << ": traced without error";
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), op) << e.what();
    const std::string message = e.what();
    for (const std::string& m : mentions)
      EXPECT_NE(message.find(m), std::string::npos) << "no '" << m << "' in " << message;
    EXPECT_NE(message.find("checked_shape_test.cpp"), std::string::npos) << "no call site in " << message;
  }
}

TEST(SizeLimits, BoundIsDocumentedValue) {
  EXPECT_EQ(tg::kMaxElements, std::int64_t{1} << 48);
  EXPECT_EQ(tg::kMaxBytes, tg::kMaxElements * 8);
}

TEST(SizeLimits, NumElementsBothSidesOfTheBound) {
  EXPECT_EQ(tg::num_elements({1 << 24, 1 << 24}), tg::kMaxElements);
  EXPECT_EQ(tg::num_elements({0, 5}), 0);
  EXPECT_EQ(tg::num_elements({}), 1);
  EXPECT_THROW((void)tg::num_elements({1 << 24, (1 << 24) + 1}), tg::RuleBroken);
  EXPECT_THROW((void)tg::num_elements({kBig, kBig}), tg::RuleBroken);  // 2^64 would wrap to 0
  EXPECT_THROW((void)tg::num_elements({3, -1}), tg::RuleBroken);
  // A 0 dim counts as 1 in the extent: the other dims still have to fit (strides are built from them).
  EXPECT_THROW((void)tg::num_elements({0, kBig, kBig}), tg::RuleBroken);
  EXPECT_TRUE(tg::shape_limit_problem({0, 1 << 24, 1 << 24}).empty());
  const std::string problem = tg::shape_limit_problem({kBig, kBig});
  EXPECT_NE(problem.find("[4294967296,4294967296]"), std::string::npos) << problem;
  EXPECT_NE(tg::shape_limit_problem({2, -3}).find("negative dimension -3"), std::string::npos);
}

TEST(SizeLimits, CheckedArithmetic) {
  EXPECT_EQ(tg::checked_add(kInt64Max - 1, 1, "x"), kInt64Max);
  EXPECT_EQ(tg::checked_mul(std::int64_t{1} << 31, std::int64_t{1} << 31, "x"), std::int64_t{1} << 62);
  EXPECT_EQ(tg::checked_sub(-kInt64Max, 1, "x"), std::numeric_limits<std::int64_t>::min());
  try {
    (void)tg::checked_add(kInt64Max, 1, "pad's before + after");
    ADD_FAILURE() << "no overflow reported";
  } catch (const tg::RuleBroken& e) {
    EXPECT_NE(e.rule.find("pad's before + after overflows"), std::string::npos) << e.rule;
    EXPECT_NE(e.rule.find(std::to_string(kInt64Max)), std::string::npos) << e.rule;
  }
  EXPECT_THROW((void)tg::checked_mul(kBig, kBig, "x"), tg::RuleBroken);
  EXPECT_THROW((void)tg::checked_sub(std::numeric_limits<std::int64_t>::min(), 1, "x"), tg::RuleBroken);
}

TEST(SizeLimits, InputAtTheBoundTracesOneMoreIsRefused) {
  tg::GraphBuilder ok("g");
  const tg::Tensor x = ok.input("x", f32({1 << 24, 1 << 24}));
  EXPECT_EQ(x.size(), tg::kMaxElements);
  {
    tg::TracingScope scope(ok);
    EXPECT_EQ(tg::neg(x).size(), tg::kMaxElements);  // a node at the bound too
  }
  tg::GraphBuilder b("g");
  const auto call_line = static_cast<std::uint32_t>(__LINE__ + 2);
  try {
    (void)b.input("x", f32({1 << 24, (1 << 24) + 1}));
    ADD_FAILURE() << "input past the bound traced";
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), "input 'x'");
    EXPECT_NE(std::string(e.what()).find("[16777216,16777217]"), std::string::npos) << e.what();
    // The caller's line, not "<unknown>": input() takes its call site like every op.
    EXPECT_NE(e.location().file.find("checked_shape_test.cpp"), std::string::npos) << e.what();
    EXPECT_EQ(e.location().line, call_line);
  }
  EXPECT_TRUE(b.graph().inputs().empty());  // nothing was added
}

TEST(SizeLimits, InputOfWrappingShapeIsRefused) {
  tg::GraphBuilder b("g");
  EXPECT_THROW((void)b.input("x", f32({kBig, kBig})), tg::ShapeError);
  EXPECT_THROW((void)b.input("y", f32({2, -1})), tg::ShapeError);
  EXPECT_THROW((void)b.param("w", f32({0, kBig, kBig})), tg::ShapeError);
  // The reserved step-seed name with another type, and a duplicate name, name the caller's file.
  for (const auto& bad : std::vector<std::function<void()>>{[&] { (void)b.input(tg::kStepSeedInput, f32({2})); },
                                                            [&] { (void)b.input("x", f32({1})); }}) {
    if (!b.graph().find_input("x")) (void)b.input("x", f32({1}));
    try {
      bad();
      ADD_FAILURE() << "accepted";
    } catch (const tg::Error& e) {
      EXPECT_NE(std::string(e.what()).find("checked_shape_test.cpp"), std::string::npos) << e.what();
    }
  }
}

TEST(SizeLimits, CreationOps) {
  expect_shape_error([](tg::GraphBuilder&) { (void)tg::full({kBig, kBig}, 1.0); }, "full", {"[4294967296,4294967296]"});
  expect_shape_error([](tg::GraphBuilder&) { (void)tg::zeros({kBig, kBig}); }, "zeros", {"[4294967296,4294967296]"});
  expect_shape_error([](tg::GraphBuilder&) { (void)tg::ones({3, kBig, kBig}); }, "ones", {"[3,4294967296,4294967296]"});
  expect_shape_error([](tg::GraphBuilder&) { (void)tg::randn({kBig, kBig}); }, "randn", {"[4294967296,4294967296]"});
  // At the bound, full traces (nothing is allocated until a backend runs it).
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  EXPECT_EQ(tg::full({1 << 24, 1 << 24}, 0.0).size(), tg::kMaxElements);
}

TEST(SizeLimits, LayoutOps) {
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        (void)tg::reshape(b.input("x", f32({4})), {kBig, kBig});
      },
      "reshape", {"[4294967296,4294967296]"});
  // The -1 inference multiplies the known dims: overflow is refused, not wrapped.
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        (void)tg::reshape(b.input("x", f32({4})), {-1, kBig, kBig});
      },
      "reshape", {"overflows", "4294967296"});
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        (void)tg::broadcast_to(b.input("x", f32({1})), {kBig, kBig});
      },
      "broadcast_to", {"[4294967296,4294967296]"});
}

TEST(SizeLimits, BroadcastAndMatmulResults) {
  const std::int64_t half = std::int64_t{1} << 30;
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        (void)tg::add(b.input("x", f32({half, 1})), b.input("y", f32({1, half})));
      },
      "add", {"[1073741824,1073741824]"});
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        (void)tg::matmul(b.input("a", f32({half, 2})), b.input("b", f32({2, half})));
      },
      "matmul", {"[1073741824,1073741824]"});
}

TEST(SizeLimits, StructureOps) {
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        (void)tg::pad(b.input("x", f32({2, 3})), 0, kInt64Max, 1);
      },
      "pad", {"overflows", std::to_string(kInt64Max)});
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        (void)tg::pad(b.input("x", f32({2, 3})), 1, kInt64Max - 2, 0);
      },
      "pad", {"padded axis 1 overflows"});
  // No overflow, but the padded result is past the bound.
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        (void)tg::pad(b.input("x", f32({1 << 20, 3})), 1, kBig, kBig);
      },
      "pad", {"[1048576,8589934595]", "size limits"});
  // narrow's check and its message must not compute start + length past int64.
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        (void)tg::narrow(b.input("x", f32({2, 3})), 1, kInt64Max, kInt64Max);
      },
      "narrow", {"start " + std::to_string(kInt64Max), "past the end of axis 1 of size 3"});
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        (void)tg::narrow(b.input("x", f32({2, 3})), 1, 1, kInt64Max);
      },
      "narrow", {"length " + std::to_string(kInt64Max), "past the end"});
  const std::int64_t big_half = std::int64_t{1} << 47;
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        const tg::Tensor x = b.input("x", f32({big_half}));
        (void)tg::concat({x, x, x}, 0);
      },
      "concat", {"[422212465065984]", "size limits"});
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        (void)tg::split(b.input("x", f32({4})), {kInt64Max, kInt64Max}, 0);
      },
      "split", {"sum past int64"});
}

TEST(SizeLimits, ImageOps) {
  const auto image = [](tg::GraphBuilder& b) { return b.input("x", f32({1, 1, 3, 3})); };
  const auto weight = [](tg::GraphBuilder& b) { return b.input("w", f32({1, 1, 3, 3})); };
  expect_shape_error([&](tg::GraphBuilder& b) { (void)tg::conv2d(image(b), weight(b), {.padding = kInt64Max / 2}); },
                     "conv2d", {"2*padding", "overflows"});
  expect_shape_error(
      [&](tg::GraphBuilder& b) { (void)tg::conv2d(image(b), weight(b), {.padding = std::int64_t{1} << 62}); }, "conv2d",
      {"overflows", std::to_string(std::int64_t{1} << 62)});
  // Padding that fits int64 but makes the output past the bound.
  expect_shape_error([&](tg::GraphBuilder& b) { (void)tg::conv2d(image(b), weight(b), {.padding = kBig}); }, "conv2d",
                     {"size limits"});
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        (void)tg::conv2d_input_grad(b.input("g", f32({1, 1, 1, 1})), weight(b), kInt64Max, 3, {.padding = 1});
      },
      "conv2d_input_grad", {"overflows", std::to_string(kInt64Max)});
  // The dilated kernel's span, dilation * (kernel - 1) + 1, per axis.
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        (void)tg::conv2d(image(b), weight(b), {.dilation = {1, kInt64Max}});
      },
      "conv2d", {"dilated kernel width", "overflows", std::to_string(kInt64Max)});
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        (void)tg::conv2d_weight_grad(image(b), b.input("g", f32({1, 1, 1, 1})), 3, 3, {.dilation = kInt64Max});
      },
      "conv2d_weight_grad", {"dilated kernel height", "overflows"});
  // padding = same's total padding, dilation * (kernel - 1), computed by the front end.
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        (void)tg::conv2d(image(b), weight(b), {.padding = tg::kPaddingSame, .dilation = kInt64Max});
      },
      "conv2d", {"padding = same", "overflows"});
  expect_shape_error(
      [&](tg::GraphBuilder& b) { (void)tg::max_pool2d(image(b), kInt64Max, {.padding = kInt64Max / 2}); }, "max_pool2d",
      {"overflows"});
  expect_shape_error([&](tg::GraphBuilder& b) { (void)tg::nearest_upsample2d(image(b), kBig); }, "nearest_upsample2d",
                     {"factor 4294967296", "size limits"});
}

TEST(SizeLimits, ArgmaxIndexMustFitI32) {
  const std::int64_t past = (std::int64_t{1} << 31) + 1;
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        (void)tg::argmax(b.input("x", f32({2, past})), 1);
      },
      "argmax", {"[2,2147483649]", "i32 index"});
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  EXPECT_EQ(tg::argmin(b.input("x", f32({2, std::int64_t{1} << 31})), 1).shape(), Shape{2});
}

TEST(SizeLimits, IndexingOps) {
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        (void)tg::one_hot(b.input("i", {DType::i32, {1 << 20}}), std::int64_t{1} << 30);
      },
      "one_hot", {"[1048576,1073741824]"});
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        (void)tg::scatter_add(b.input("u", f32({1 << 20, 2})), b.input("i", {DType::i32, {1 << 20, 2}}), 1, kBig);
      },
      "scatter_add", {"[1048576,4294967296]"});
}

// Expects parse_graph(text) to fail at 1-based (line, the column of `at` in that line) with a
// message holding every string of `mentions`.
void expect_parse_error(const std::string& text, const std::string& at, std::initializer_list<std::string> mentions) {
  try {
    (void)tg::parse_graph(text);
    ADD_FAILURE() << "parsed:\n" << text;
  } catch (const tg::ParseError& e) {
    const std::size_t offset = text.find(at);
    ASSERT_NE(offset, std::string::npos) << at;
    const std::size_t line_start = text.rfind('\n', offset) == std::string::npos ? 0 : text.rfind('\n', offset) + 1;
    EXPECT_EQ(e.line(), 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + offset, '\n')))
        << e.what();
    EXPECT_EQ(e.column(), offset - line_start + 1) << e.what();
    const std::string message = e.what();
    for (const std::string& m : mentions)
      EXPECT_NE(message.find(m), std::string::npos) << "no '" << m << "' in " << message;
  }
}

TEST(SizeLimits, ParserRefusesOversizedTypesWhereTheyAreWritten) {
  // The dim that takes the shape past the bound is the one named.
  expect_parse_error("graph g(%x: f32[4294967296,4294967296]) {\n  return y=%x\n}\n", "4294967296]",
                     {"too many elements", "281474976710656"});
  expect_parse_error("graph g(%x: f32[0,4294967296,4294967296]) {\n  return y=%x\n}\n", "4294967296]",
                     {"too many elements"});
  expect_parse_error("graph g(%x: f32[4]) {\n  %0 = neg(%x) : f32[16777216,16777217]\n  return y=%0\n}\n", "16777217]",
                     {"too many elements"});
}

TEST(SizeLimits, ParserRefusesOversizedAttributesNamingTheOp) {
  // The declared types are small; the attributes give a wrapping shape that the rule refuses.
  expect_parse_error(
      "graph g(%x: f32[4]) {\n  %0 = reshape(%x) {shape=[4294967296,4294967296]} : f32[4]\n  return y=%0\n}\n",
      "reshape", {"op reshape refuses", "[4294967296,4294967296]"});
  expect_parse_error(
      "graph g() {\n  %0 = full() {dtype=f32, shape=[4294967296,4294967296], value=1} : f32[1]\n  return y=%0\n}\n",
      "full", {"op full refuses", "[4294967296,4294967296]"});
  expect_parse_error(
      "graph g(%x: f32[2,3]) {\n  %0 = pad(%x) {after=1, axis=1, before=9223372036854775807} : f32[2,3]\n"
      "  return y=%0\n}\n",
      "pad", {"op pad refuses", "overflows", "9223372036854775807"});
  // At the bound, the same kind of text parses.
  const tg::Graph at_bound = tg::parse_graph(
      "graph g(%x: f32[16777216,16777216]) {\n  %0 = reshape(%x) {shape=[281474976710656]} : f32[281474976710656]\n"
      "  return y=%0\n}\n");
  EXPECT_EQ(at_bound.type(at_bound.outputs().at(0).value).size(), tg::kMaxElements);
}

TEST(SizeLimits, GraphAddNodeRefusesAResultPastTheBound) {
  tg::Graph g("g");
  const tg::ValueId x = g.add_input("x", tg::InputKind::data, f32({2}));
  try {
    (void)g.add_node(tg::op::Neg, {x}, {}, f32({kBig, kBig}), tg::SourceLoc{"model.cpp", 7, 1});
    ADD_FAILURE() << "added";
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), "neg");
    const std::string message = e.what();
    EXPECT_NE(message.find("[4294967296,4294967296]"), std::string::npos) << message;
    EXPECT_NE(message.find("model.cpp:7"), std::string::npos) << message;
  }
  EXPECT_TRUE(g.nodes().empty());
}

TEST(SizeLimits, HostTensorChecksTheCountBeforeAllocating) {
  EXPECT_THROW((void)tg::HostTensor::filled(f32({kBig, kBig}), 0.0), tg::RuntimeError);
  try {
    (void)tg::HostTensor::of(f32({kBig, kBig}), {});  // would match a count wrapped to 0
    ADD_FAILURE() << "built";
  } catch (const tg::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("f32[4294967296,4294967296]"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)tg::HostTensor::f32({2, -1}, {}), tg::RuntimeError);
  EXPECT_EQ(tg::HostTensor::filled(f32({2, 3}), 1.5).size(), 6u);
}

}  // namespace
