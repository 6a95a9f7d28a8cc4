// Elementwise fusion with broadcast operands (src/vk/fusion.cpp): a periodic operand, one whose
// shape is the output's trailing axes (a bias [C] or [1, C] under [N, C]), joins a fused run and is
// read at i % C; a spread operand, the output's leading axes then 1s (a row statistic [N, 1] under
// [N, C]), is read at i / C; a broadcast_to of any such operand joins as a copy step. Every case
// compiles the graph
// with fusion off and on and demands the same bits, fewer dispatches where a pair now fuses, and
// agreement with the f64 oracle (guards and replay included).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::random_f32;
using testing::VkTest;

struct Counts {
  std::size_t plain = 0, fused = 0;
};

// Runs g unfused and fused: same bits for every output; returns both dispatch counts.
Counts expect_same_bits(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& inputs) {
  Program plain(ctx, g, {.fuse_elementwise = false});
  Program fused(ctx, g);
  const TensorMap a = plain.run(inputs), b = fused.run(inputs);
  EXPECT_EQ(a.size(), b.size());
  for (const auto& [name, x] : a) {
    const HostTensor& y = b.at(name);
    EXPECT_EQ(x.type, y.type) << name;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (std::bit_cast<std::uint32_t>(static_cast<float>(x.at(i))) !=
          std::bit_cast<std::uint32_t>(static_cast<float>(y.at(i)))) {
        ADD_FAILURE() << name << "[" << i << "]: unfused " << x.at(i) << ", fused " << y.at(i);
        break;
      }
    }
  }
  testing::check_against_oracle(ctx, g, inputs, {.otherwise = std::nullopt});
  return {plain.stats().dispatches, fused.stats().dispatches};
}

// A linear layer's bias add and activation (the forward of every MLP layer): with the bias as a
// periodic operand they are one dispatch; also as [1, C], on a 3-D activation, on either side of
// the add, and with the bias used twice.
TEST_F(VkTest, FusionJoinsABiasBroadcastAlongTrailingAxes) {
  auto ctx = make_context();
  GraphBuilder b("bias_relu");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {256, 64}});
  const Tensor bias = b.input("bias", {DType::f32, {64}});
  b.output("y", relu(add(x, bias)));
  const Graph g = b.take();
  const TensorMap in{{"x", random_f32({256, 64}, 1)}, {"bias", random_f32({64}, 2)}};
  const Counts c = expect_same_bits(ctx, g, in);
  EXPECT_EQ(c.plain, 2u);
  EXPECT_EQ(c.fused, 1u);

  GraphBuilder b2("bias_shapes");
  TracingScope scope2(b2);
  const Tensor h = b2.input("h", {DType::f32, {5, 7, 12}});
  const Tensor row = b2.input("row", {DType::f32, {1, 12}});
  const Tensor plane = b2.input("plane", {DType::f32, {7, 12}});
  // 5 * 7 * 12 = 420 elements: whole vec4s of the periods 12 and 84, plus a scalar tail of none.
  b2.output("z", tanh(mul(plane, sub(row, h))) + row);
  const Graph g2 = b2.take();
  const TensorMap in2{
      {"h", random_f32({5, 7, 12}, 3)}, {"row", random_f32({1, 12}, 4)}, {"plane", random_f32({7, 12}, 5)}};
  const Counts c2 = expect_same_bits(ctx, g2, in2);
  EXPECT_EQ(c2.plain, 4u);
  EXPECT_EQ(c2.fused, 1u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Two runs of different shapes, each with its own periodic operand used twice (period 8 and 4;
// a periodic operand's output is always whole vec4s, as its period is).
TEST_F(VkTest, FusionKeepsEachRunsPeriodicOperands) {
  auto ctx = make_context();
  GraphBuilder b("two_runs");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {33, 8}});
  const Tensor y = b.input("y", {DType::f32, {3, 11, 4}});
  const Tensor c8 = b.input("c8", {DType::f32, {8}});
  const Tensor c4 = b.input("c4", {DType::f32, {4}});
  b.output("a", sigmoid(x * c8) - c8);
  b.output("b", exp(tanh(y + c4)) * c4);
  const Graph g = b.take();
  const TensorMap in{{"x", random_f32({33, 8}, 6)},
                     {"y", random_f32({3, 11, 4}, 7)},
                     {"c8", random_f32({8}, 8)},
                     {"c4", random_f32({4}, 9)}};
  const Counts c = expect_same_bits(ctx, g, in);
  EXPECT_EQ(c.fused, 2u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Periods and spreads that are not whole vec4s, and operands that broadcast along a leading or
// middle axis alone, keep the per-op kernel (which broadcasts any way): right results, no fusion
// across them.
TEST_F(VkTest, FusionLeavesOtherBroadcastsToThePerOpKernel) {
  auto ctx = make_context();
  GraphBuilder b("other_broadcasts");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {10, 6}});
  const Tensor c6 = b.input("c6", {DType::f32, {6}});           // period 6: not whole vec4s
  const Tensor col = b.input("col", {DType::f32, {10, 1}});     // spread over runs of 6: not whole vec4s
  const Tensor mid = b.input("mid", {DType::f32, {10, 1, 6}});  // along a middle axis
  b.output("a", relu(x + c6));
  b.output("b", relu(x * col));
  const Tensor x3 = b.input("x3", {DType::f32, {10, 4, 6}});
  b.output("c", relu(x3 - mid));
  const Graph g = b.take();
  const TensorMap in{{"x", random_f32({10, 6}, 10)},
                     {"c6", random_f32({6}, 11)},
                     {"col", random_f32({10, 1}, 12)},
                     {"mid", random_f32({10, 1, 6}, 19)},
                     {"x3", random_f32({10, 4, 6}, 20)}};
  const Counts c = expect_same_bits(ctx, g, in);
  EXPECT_EQ(c.plain, 6u);
  EXPECT_EQ(c.fused, 6u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// The mean's gradient broadcast back over its input (broadcast_to of one element) joins the
// elementwise run after it as a copy step.
TEST_F(VkTest, FusionJoinsABroadcastOfOneElement) {
  auto ctx = make_context();
  GraphBuilder b("broadcast_one");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {256, 1}});
  const Tensor s = b.input("s", {DType::f32, {}});
  const Tensor spread = broadcast_to(s, {256, 1});
  b.output("y", spread * x - x);
  b.output("spread", spread);  // written too: the run stores it
  const Graph g = b.take();
  const TensorMap in{{"x", random_f32({256, 1}, 13)}, {"s", random_f32({}, 14)}};
  const Counts c = expect_same_bits(ctx, g, in);
  EXPECT_EQ(c.plain, 3u);
  EXPECT_EQ(c.fused, 1u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// LayerNorm's forward: the row mean and rstd ([N, 1]) are spread operands of the ops over [N, C],
// so x - mean joins square (both stored: the difference is read again), and the normalization,
// scale and shift are one run, with a broadcast_to of the rstd as a copy step after them. Also a
// 4-D spread [2, 3, 1, 1] under [2, 3, 4, 8] and one under an output with a leading 1.
TEST_F(VkTest, FusionJoinsRowStatisticsSpreadOverTheirRows) {
  auto ctx = make_context();
  GraphBuilder b("layer_norm");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {6, 16}});
  const Tensor gamma = b.input("gamma", {DType::f32, {16}});
  const Tensor beta = b.input("beta", {DType::f32, {16}});
  const Tensor centered = x - mean(x, -1, {.keep_dims = true});
  const Tensor rstd = rsqrt(mean(square(centered), -1, {.keep_dims = true}) + 1e-5f);
  b.output("y", centered * rstd * gamma + beta);
  b.output("z", broadcast_to(rstd, {6, 16}) * x);
  const Graph g = b.take();
  const TensorMap in{{"x", random_f32({6, 16}, 21)}, {"gamma", random_f32({16}, 22)}, {"beta", random_f32({16}, 23)}};
  const Counts c = expect_same_bits(ctx, g, in);
  // mean, sub, square, mean, add, rsqrt, mul, mul, add, broadcast_to, mul (the 1e-5 is a constant,
  // computed once) against mean, fused(sub,square), mean, fused(add,rsqrt) and one run of the rest.
  EXPECT_EQ(c.plain, 11u);
  EXPECT_EQ(c.fused, 5u);

  GraphBuilder b2("spreads");
  TracingScope scope2(b2);
  const Tensor h = b2.input("h", {DType::f32, {2, 3, 4, 8}});
  const Tensor s = b2.input("s", {DType::f32, {2, 3, 1, 1}});  // runs of 32
  const Tensor u = b2.input("u", {DType::f32, {1, 6, 16}});
  const Tensor w = b2.input("w", {DType::f32, {6, 1}});  // runs of 16 under an extra leading 1
  b2.output("a", h * s + s);
  b2.output("b", exp(u - w));
  const Graph g2 = b2.take();
  const TensorMap in2{{"h", random_f32({2, 3, 4, 8}, 24)},
                      {"s", random_f32({2, 3, 1, 1}, 25)},
                      {"u", random_f32({1, 6, 16}, 26)},
                      {"w", random_f32({6, 1}, 27)}};
  const Counts c2 = expect_same_bits(ctx, g2, in2);
  EXPECT_EQ(c2.plain, 4u);
  EXPECT_EQ(c2.fused, 2u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// The relu backward: where(x > 0, g, 0) is a comparison and a select; the bool stays a register
// of the run, so the pair (and the ops around it) is one dispatch. A comparison whose bool is also
// a graph output, or read by a later node outside the run, keeps its own launch, and so does a
// where whose condition comes from memory. NaN compares false in both.
TEST_F(VkTest, FusionJoinsAComparisonAndTheWhereThatReadsIt) {
  auto ctx = make_context();
  GraphBuilder b("select");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {256, 64}});
  const Tensor g = b.input("g", {DType::f32, {256, 64}});
  const Tensor zero = b.input("zero", {DType::f32, {}});
  b.output("relu_grad", where(greater(x, zero), g, zero) * 2.f);
  b.output("both", where(less(g, x), x - g, g * x) + where(equal(x, x), g, x));
  const Graph graph = b.take();
  TensorMap in{
      {"x", random_f32({256, 64}, 15)}, {"g", random_f32({256, 64}, 16)}, {"zero", HostTensor::f32({}, {0.f})}};
  in.at("x").set(3, std::numeric_limits<double>::quiet_NaN());
  const Counts fused = expect_same_bits(ctx, graph, in);
  EXPECT_EQ(fused.plain, 10u);  // the literal 2 is a constant, computed once
  EXPECT_EQ(fused.fused, 1u);

  GraphBuilder b2("kept_bool");
  TracingScope scope2(b2);
  const Tensor y = b2.input("y", {DType::f32, {64, 8}});
  const Tensor mask_in = b2.input("mask_in", {DType::boolean, {64, 8}});
  const Tensor mask = greater(y, y * 0.5f);
  b2.output("mask", mask);                               // the bool is an output: written by its own launch
  b2.output("picked", where(mask, y, -y));               // reads it from memory
  b2.output("from_memory", where(mask_in, y, y + 1.f));  // a condition from memory
  const Graph graph2 = b2.take();
  std::vector<double> flags(64 * 8);
  for (std::size_t i = 0; i < flags.size(); ++i) flags[i] = i % 3 == 0 ? 1.0 : 0.0;
  const TensorMap in2{{"y", random_f32({64, 8}, 18)}, {"mask_in", HostTensor::of({DType::boolean, {64, 8}}, flags)}};
  // Every run through the comparison would have to store its bool, and the wheres read theirs
  // from memory: nothing fuses (the mul, neg and add are each alone between them).
  const Counts counts = expect_same_bits(ctx, graph2, in2);
  EXPECT_EQ(counts.plain, 6u);
  EXPECT_EQ(counts.fused, 6u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
