// matmul and conv2d with an output dtype: 16-bit operands with an f32 result multiply exactly and accumulate
// without rounding to 16 bits (the graph shows the operands cast to f32), a narrower result rounds
// the product once, and a non-float result dtype is a ShapeError naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string_view>
#include <vector>

#include "support/library.h"
#include "support/shape_error.h"
#include "tensorgrad/ir/low_precision.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "tensorgrad/ir/ops/ids/precision.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;

// Values whose products and sums are far from exact in 16 bits: the test can tell a rounding apart.
std::vector<float> values(std::size_t n, float step) {
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = 1.0f + step * static_cast<float>(i % 7) - 0.37f * static_cast<float>(i % 3);
  return out;
}

struct MatmulRun {
  tg::Graph graph;
  HostTensor y;
};

MatmulRun run(DType in, DType out, ComputeType compute) {
  constexpr std::int64_t m = 3, k = 40, n = 2;
  tg::GraphBuilder builder("g");
  tg::TracingScope scope(builder);
  builder.output("y", tg::matmul(builder.input("a", {in, {m, k}}), builder.input("b", {in, {k, n}}), out));
  MatmulRun r{builder.take(), {}};
  tg::TensorMap inputs;
  const auto a = values(m * k, 0.0123f), b = values(k * n, 0.0571f);
  inputs.emplace("a", in == DType::f32 ? HostTensor::f32({m, k}, a) : HostTensor::low_precision(in, {m, k}, a));
  inputs.emplace("b", in == DType::f32 ? HostTensor::f32({k, n}, b) : HostTensor::low_precision(in, {k, n}, b));
  r.y = tg::interpret(r.graph, inputs, {.compute = compute}).outputs.at("y");
  return r;
}

// The exact products of the stored operands, summed in double.
std::vector<double> exact_product(DType in) {
  constexpr std::size_t m = 3, k = 40, n = 2;
  const auto a = values(m * k, 0.0123f), b = values(k * n, 0.0571f);
  std::vector<double> y(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t p = 0; p < k; ++p)
        y[i * n + j] += tg::round_to_dtype(static_cast<double>(a[i * k + p]), in) *
                        tg::round_to_dtype(static_cast<double>(b[p * n + j]), in);
  return y;
}

void expect_shape_error(const std::function<void(tg::GraphBuilder&)>& trace, std::string_view rule_part) {
  tg::test::expect_shape_error_at(
      [&] {
        tg::GraphBuilder b("g");
        tg::TracingScope scope(b);
        trace(b);
      },
      "matmul", rule_part, "matmul_dtypes_test.cpp");
}

int count_op(const tg::Graph& g, tg::OpId op) {
  int count = 0;
  for (const tg::Node& node : g.nodes()) count += node.op == op ? 1 : 0;
  return count;
}

TEST(MatmulDtypes, SixteenBitOperandsWithAnF32ResultAccumulateWithoutRounding) {
  for (DType in : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(tg::dtype_name(in)));
    const MatmulRun oracle = run(in, DType::f32, ComputeType::f64);
    const MatmulRun fast = run(in, DType::f32, ComputeType::f32);
    EXPECT_EQ(oracle.y.type, (tg::TensorType{DType::f32, {3, 2}}));
    EXPECT_EQ(count_op(oracle.graph, tg::op::Cast), 2) << "both operands cast to f32";
    const std::vector<double> exact = exact_product(in);
    for (std::size_t i = 0; i < exact.size(); ++i) {
      EXPECT_NEAR(oracle.y.at(i), exact[i], 1e-12 * std::fabs(exact[i]));
      // f32 accumulation of 40 exact products: far inside one bf16 or f16 ulp, which a rounding of
      // the result to 16 bits would cost.
      EXPECT_NEAR(fast.y.at(i), exact[i], 40 * 6e-8 * std::fabs(exact[i]));
      EXPECT_NE(fast.y.at(i), tg::round_to_dtype(exact[i], in)) << "the result was rounded to 16 bits";
    }
  }
}

TEST(MatmulDtypes, ANarrowerResultRoundsTheProductOnce) {
  const MatmulRun oracle = run(DType::f32, DType::bf16, ComputeType::f64);
  EXPECT_EQ(oracle.y.type.dtype, DType::bf16);
  const std::vector<double> exact = exact_product(DType::f32);
  for (std::size_t i = 0; i < exact.size(); ++i) EXPECT_EQ(oracle.y.at(i), tg::round_to_dtype(exact[i], DType::bf16));
}

TEST(MatmulDtypes, TheSameDtypeAddsNoCast) {
  const MatmulRun r = run(DType::bf16, DType::bf16, ComputeType::f64);
  EXPECT_EQ(count_op(r.graph, tg::op::Cast), 0);
  EXPECT_EQ(r.y.type.dtype, DType::bf16);
}

TEST(MatmulDtypes, ANonFloatResultOrMixedOperandsAreRefused) {
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        tg::matmul(b.input("a", {DType::bf16, {2, 3}}), b.input("b", {DType::bf16, {3, 2}}), DType::i32);
      },
      "the result dtype must be a float dtype (f32, f16, bf16), got i32");
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        tg::matmul(b.input("a", {DType::f16, {2, 3}}), b.input("b", {DType::bf16, {3, 2}}), DType::f32);
      },
      "input 0 is f16 but input 1 is bf16");
}

}  // namespace

namespace {

// conv2d takes a result dtype the same way (Conv2dOptions::out): bf16 input and weight with an f32
// result equal, on the oracle, the f32 convolution of the same values, and nothing is rounded to
// 16 bits on the way.
TEST(ConvDtypes, SixteenBitInputsWithAnF32ResultAccumulateWithoutRounding) {
  const tg::Shape x_shape{1, 3, 6, 6}, w_shape{4, 3, 3, 3};
  std::vector<float> xs(108), ws(108);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    xs[i] = 0.37f + 0.0191f * static_cast<float>(i % 17) - 0.011f * static_cast<float>(i % 5);
    ws[i] = -0.23f + 0.0137f * static_cast<float>(i % 13);
  }
  const HostTensor x16 = HostTensor::low_precision(DType::bf16, x_shape, xs);
  const HostTensor w16 = HostTensor::low_precision(DType::bf16, w_shape, ws);
  std::vector<float> x_exact(xs.size()), w_exact(ws.size());
  for (std::size_t i = 0; i < xs.size(); ++i) x_exact[i] = static_cast<float>(x16.at(i));
  for (std::size_t i = 0; i < ws.size(); ++i) w_exact[i] = static_cast<float>(w16.at(i));

  tg::GraphBuilder mixed("mixed");
  {
    tg::TracingScope scope(mixed);
    mixed.output("y", tg::conv2d(mixed.input("x", {DType::bf16, x_shape}), mixed.input("w", {DType::bf16, w_shape}),
                                 {.padding = 1, .out = DType::f32}));
  }
  const tg::Graph g = mixed.take();
  EXPECT_EQ(count_op(g, tg::op::Cast), 2) << "input and weight cast to f32";
  tg::GraphBuilder plain("plain");
  {
    tg::TracingScope scope(plain);
    plain.output("y", tg::conv2d(plain.input("x", {DType::f32, x_shape}), plain.input("w", {DType::f32, w_shape}),
                                 {.padding = 1}));
  }
  const HostTensor got = tg::interpret(g, {{"x", x16}, {"w", w16}}, {.compute = ComputeType::f64}).outputs.at("y");
  const HostTensor want =
      tg::interpret(plain.take(), {{"x", HostTensor::f32(x_shape, x_exact)}, {"w", HostTensor::f32(w_shape, w_exact)}},
                    {.compute = ComputeType::f64})
          .outputs.at("y");
  ASSERT_EQ(got.type, want.type);
  int off_the_bf16_grid = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got.at(i), want.at(i)) << i;
    off_the_bf16_grid += got.at(i) != tg::round_to_dtype(got.at(i), DType::bf16) ? 1 : 0;
  }
  EXPECT_GT(off_the_bf16_grid, 0) << "the result was rounded to bf16";
}

TEST(ConvDtypes, ANonFloatResultIsRefused) {
  tg::test::expect_shape_error_at(
      [] {
        tg::GraphBuilder b("g");
        tg::TracingScope scope(b);
        tg::conv2d(b.input("x", {DType::bf16, {1, 1, 3, 3}}), b.input("w", {DType::bf16, {1, 1, 2, 2}}),
                   {.out = DType::i32});
      },
      "conv2d", "the result dtype must be a float dtype (f32, f16, bf16), got i32", "matmul_dtypes_test.cpp");
}

}  // namespace
