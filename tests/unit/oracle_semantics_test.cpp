// Semantics of the oracle pinned on the interpreters themselves, with hand-computed values: the
// behaviours the Vulkan tests otherwise pin only by agreeing with the interpreter they are judged
// by (issue 13, item 7). Each runs on interp_f64 (the oracle) and interp_f32.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "interp/philox.h"
#include "support/library.h"

namespace tg {
namespace {

const std::vector<ComputeType> kBothComputes = {ComputeType::f64, ComputeType::f32};

TensorMap run(const Graph& g, const TensorMap& inputs, ComputeType compute) {
  return interpret(g, inputs, {.compute = compute}).outputs;
}

std::string name(ComputeType c) { return c == ComputeType::f64 ? "f64" : "f32"; }

bool negative_zero(double v) { return v == 0.0 && std::signbit(v); }

// minimum/maximum: NaN in either input gives NaN; a tie gives input a, so the sign of a zero
// follows a (minimum(-0, +0) is -0, minimum(+0, -0) is +0).
TEST(OracleSemantics, MinimumAndMaximumPropagateNaNAndTieToTheirFirstInput) {
  GraphBuilder b("minmax");
  TracingScope scope(b);
  Tensor a = b.input("a", {DType::f32, {4}});
  Tensor c = b.input("c", {DType::f32, {4}});
  b.output("min", minimum(a, c));
  b.output("max", maximum(a, c));
  const Graph g = b.take();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const TensorMap in{{"a", HostTensor::f32({4}, {nan, 1.f, -0.f, 0.f})},
                     {"c", HostTensor::f32({4}, {1.f, nan, 0.f, -0.f})}};
  for (ComputeType compute : kBothComputes) {
    const TensorMap out = run(g, in, compute);
    for (const char* op : {"min", "max"}) {
      const auto v = out.at(op).to_f64();
      EXPECT_TRUE(std::isnan(v[0])) << op << " " << name(compute);
      EXPECT_TRUE(std::isnan(v[1])) << op << " " << name(compute);
      EXPECT_TRUE(negative_zero(v[2])) << op << "(-0, +0) is input a, -0 (" << name(compute) << ")";
      EXPECT_TRUE(v[3] == 0.0 && !std::signbit(v[3])) << op << "(+0, -0) is input a, +0 (" << name(compute) << ")";
    }
  }
}

// Reductions over axis groups that are not adjacent ({0, 2} of a rank-3 tensor, {0, 2} and {1, 3}
// of a rank-4 one), on x = arange: every output element is a hand-computed sum or extremum.
TEST(OracleSemantics, ReductionsOverSeparateAxisGroups) {
  GraphBuilder b("groups");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {2, 3, 4}});
  Tensor y = b.input("y", {DType::f32, {2, 2, 2, 2}});
  b.output("sum02", sum(x, {0, 2}));
  b.output("max02", max(x, {0, 2}));
  b.output("min02", min(x, {0, 2}, {.keep_dims = true}));
  b.output("sum_y02", sum(y, {0, 2}));
  b.output("mean_y13", mean(y, {1, 3}));
  const Graph g = b.take();
  std::vector<float> xs(24), ys(16);
  for (int i = 0; i < 24; ++i) xs[static_cast<std::size_t>(i)] = static_cast<float>(i);  // x[i, j, k] = 12 i + 4 j + k
  for (int i = 0; i < 16; ++i)
    ys[static_cast<std::size_t>(i)] = static_cast<float>(i);  // y[a, b, c, d] = 8a + 4b + 2c + d
  const TensorMap in{{"x", HostTensor::f32({2, 3, 4}, xs)}, {"y", HostTensor::f32({2, 2, 2, 2}, ys)}};
  for (ComputeType compute : kBothComputes) {
    const TensorMap out = run(g, in, compute);
    // sum over i, k of 12 i + 4 j + k = 48 + 32 j + 12.
    EXPECT_EQ(out.at("sum02").to_f64(), (std::vector<double>{60, 92, 124})) << name(compute);
    EXPECT_EQ(out.at("max02").to_f64(), (std::vector<double>{15, 19, 23})) << name(compute);  // x[1, j, 3]
    EXPECT_EQ(out.at("min02").type.shape, (Shape{1, 3, 1}));
    EXPECT_EQ(out.at("min02").to_f64(), (std::vector<double>{0, 4, 8})) << name(compute);  // x[0, j, 0]
    // sum over a, c of 8a + 4b + 2c + d = 16 + 16 b + 4 + 4 d, output [b, d].
    EXPECT_EQ(out.at("sum_y02").to_f64(), (std::vector<double>{20, 24, 36, 40})) << name(compute);
    // mean over b, d of 8a + 4b + 2c + d = 8a + 2 + 2c + 0.5, output [a, c].
    EXPECT_EQ(out.at("mean_y13").to_f64(), (std::vector<double>{2.5, 4.5, 10.5, 12.5})) << name(compute);
  }
}

// softmax_causal's row maximum is taken over the visible columns only: huge values above the
// diagonal change nothing (a maximum over the whole row would make row 0 exp(-1e30) / 0 = NaN).
TEST(OracleSemantics, TheCausalSoftmaxIgnoresTheMaskedColumnsEvenInItsMaximum) {
  GraphBuilder b("causal");
  TracingScope scope(b);
  b.output("y", softmax_causal(b.input("x", {DType::f32, {1, 3, 3}})));
  const Graph g = b.take();
  const TensorMap in{{"x", HostTensor::f32({1, 3, 3}, {0.f, 1e30f, 1e30f, 1.f, 2.f, 3e38f, 3.f, 1.f, 0.f})}};
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), e3 = std::exp(-3.0);
  const std::vector<double> want = {
      1, 0, 0, e1 / (1 + e1), 1 / (1 + e1), 0, 1 / (1 + e2 + e3), e2 / (1 + e2 + e3), e3 / (1 + e2 + e3)};
  for (ComputeType compute : kBothComputes) {
    const std::vector<double> got = run(g, in, compute).at("y").to_f64();
    const double tol = compute == ComputeType::f64 ? 1e-15 : 1e-7;
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << i << " " << name(compute);
  }
}

// dropout keeps element i exactly when u_i = (w0 >> 8) 2^-24 >= p, w0 the first Philox word of
// element i under (seed, salt): at p equal to some element's u that element is kept, at the next
// double above it dropped; kept elements are x / (1 - p).
TEST(OracleSemantics, DropoutKeepsAnElementWhoseUniformEqualsP) {
  constexpr std::int64_t kN = 64;
  constexpr std::int32_t kSeed = 1234;
  const auto graph_for = [](double p) {
    GraphBuilder b("dropout");
    TracingScope scope(b);
    b.output("y", dropout(b.input("x", {DType::f32, {kN}}), p));
    return b.take();
  };
  // The salt is the graph's, whatever p: read it from a first graph.
  const Graph probe = graph_for(0.5);
  const std::int64_t salt = probe.nodes().back().attrs.integer("salt");
  std::vector<double> u(kN);
  for (std::int64_t i = 0; i < kN; ++i) {
    const philox::Counter w = philox::draw(philox::stream_key(kSeed, salt), static_cast<std::uint64_t>(i));
    u[static_cast<std::size_t>(i)] = philox::uniform_closed_open<double>(w[0]);
  }
  const std::size_t pick = 7;
  for (const double p : {u[pick], std::nextafter(u[pick], 1.0)}) {
    const Graph g = graph_for(p);
    ASSERT_EQ(g.nodes().back().attrs.integer("salt"), salt);
    const TensorMap in{{"x", HostTensor::f32({kN}, std::vector<float>(kN, 1.f))},
                       {kStepSeedInput, HostTensor::i32({}, {kSeed})}};
    for (ComputeType compute : kBothComputes) {
      const std::vector<double> y = run(g, in, compute).at("y").to_f64();
      for (std::size_t i = 0; i < static_cast<std::size_t>(kN); ++i) {
        const bool kept = u[i] >= p;
        const double scale =
            compute == ComputeType::f64 ? 1.0 / (1.0 - p) : static_cast<double>(1.0f / static_cast<float>(1.0 - p));
        EXPECT_EQ(y[i], kept ? scale : 0.0) << "element " << i << ", u " << u[i] << ", p " << p << " " << name(compute);
      }
      EXPECT_EQ(y[pick] != 0.0, p == u[pick]) << "u == p keeps the element; p just above it drops it";
    }
  }
}

}  // namespace
}  // namespace tg
