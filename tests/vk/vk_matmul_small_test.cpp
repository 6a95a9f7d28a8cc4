// The 64x64 tiles of the Vulkan matmul (shaders/matmul_small.comp): a shader of its own,
// double-buffered K slices of 16 prefetched through registers, vec4 or scalar rows. Every
// output must have the bits of the f32 interpreter's ascending-k loop. The inputs make that a check
// of the summation order on any device: the lhs spans 2^-6 .. 2^22 with few significant bits and the
// rhs holds powers of two, so every product is exact (fused multiply-adds round the same as a
// multiply then an add) while each partial sum rounds, and another order gives other bits. Shapes
// cover M, N off multiples of 4 and 64, K off multiples of 16 and below 16, K = 0, batched and
// folded (shared rhs) products, transposed operands with vec4 and scalar rows, and split-K.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

constexpr int kLhs = 1;  // which operands are built as swap_axes of an input stored transposed
constexpr int kRhs = 2;

Shape swapped(Shape s) {
  std::swap(s[s.size() - 2], s.back());
  return s;
}

// Values m * 2^e, m odd in 1..7, e in [lo, hi], random sign.
HostTensor few_bits(Shape shape, std::uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> mantissa(0, 3), exponent(lo, hi), sign(0, 1);
  std::vector<float> v(static_cast<std::size_t>(num_elements(shape)));
  for (float& x : v)
    x = std::ldexp(static_cast<float>(2 * mantissa(rng) + 1), exponent(rng)) * (sign(rng) ? -1.f : 1.f);
  return HostTensor::f32(std::move(shape), v);
}

struct Case {
  Shape a;  // the logical operands: c = a x b
  Shape b;
};

Graph matmul_graph(const Case& c, int which) {
  const bool lhs_t = (which & kLhs) != 0;
  const bool rhs_t = (which & kRhs) != 0;
  GraphBuilder builder("matmul_small");
  TracingScope scope(builder);
  Tensor a = builder.input("a", {DType::f32, lhs_t ? swapped(c.a) : c.a});
  Tensor b = builder.input("b", {DType::f32, rhs_t ? swapped(c.b) : c.b});
  builder.output("c", matmul(lhs_t ? swap_axes(a, -2, -1) : a, rhs_t ? swap_axes(b, -1, -2) : b));
  return builder.take();
}

// The launch planned for g's matmul with the operands read as `which` says.
KernelLaunch plan(const Graph& g, int which) {
  for (const Node& n : g.nodes()) {
    if (n.op == op::Matmul)
      return plan_matmul_reading(g, n, {n.inputs[0], (which & kLhs) != 0}, {n.inputs[1], (which & kRhs) != 0});
  }
  ADD_FAILURE() << "no matmul";
  return {};
}

void expect_same_bits(const HostTensor& want, const HostTensor& got, const std::string& what) {
  ASSERT_EQ(want.type, got.type) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto x = static_cast<float>(want.at(i));
    const auto y = static_cast<float>(got.at(i));
    if (std::memcmp(&x, &y, sizeof(float)) != 0 && ++bad <= 5) {
      ADD_FAILURE() << what << ": c[" << i << "] Vulkan " << y << ", f32 interpreter " << x;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": elements differ";
}

// c = a x b on Vulkan (plain, replayed, with guard regions) against the f32 interpreter, bit for
// bit, for each operand layout in `layouts` (0 plain; kLhs, kRhs: that operand stored transposed).
// The launch must take the small tiles and record `dispatches` dispatches (2: split-K).
void check(const std::shared_ptr<Context>& ctx, const Case& c, std::uint32_t seed, std::size_t dispatches = 1,
           std::vector<int> layouts = {0, kLhs, kRhs, kLhs | kRhs}) {
  for (int which : layouts) {
    SCOPED_TRACE(shape_to_string(c.a) + " x " + shape_to_string(c.b) + ", transposed " + std::to_string(which));
    const Graph g = matmul_graph(c, which);
    const KernelLaunch launch = plan(g, which);
    EXPECT_EQ(launch.shader, "matmul_small") << "not the small tiles";
    if (which == 0) {
      EXPECT_TRUE(launch.specialization.empty());
    } else {
      ASSERT_EQ(launch.specialization.size(), 3u);  // A_T, B_T, VEC_BT
      EXPECT_EQ(launch.specialization[0], (which & kLhs) != 0 ? 1u : 0u);
      EXPECT_EQ(launch.specialization[1], (which & kRhs) != 0 ? 1u : 0u);
    }

    const TensorMap in{{"a", few_bits(g.type(*g.find_input("a")).shape, seed, -6, 22)},
                       {"b", few_bits(g.type(*g.find_input("b")).shape, seed + 1, -2, 2)}};
    const HostTensor want = interpret(g, in, {.compute = ComputeType::f32}).outputs.at("c");
    Program program(ctx, g);
    if (num_elements(c.a) > 0 && num_elements(c.b) > 0) {
      EXPECT_EQ(program.stats().dispatches, dispatches);
    }
    expect_same_bits(want, program.run(in).at("c"), "run");
    expect_same_bits(want, program.run(in).at("c"), "replay");
    Program guarded(ctx, g, {.guard_bytes = 256});
    expect_same_bits(want, guarded.run(in).at("c"), "with guards");
    EXPECT_TRUE(guarded.check_guards().empty()) << testing::join_lines(guarded.check_guards());
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// K below one slice, not a multiple of 16 or of 4 (scalar rows of A and of a transposed B), and
// exactly one or two slices with vec4 rows everywhere; M, N off multiples of 4 (scalar C and
// transposed A) and of 64.
TEST_F(VkTest, MatmulSmallTilesRaggedExtents) {
  auto ctx = make_context();
  check(ctx, {{1, 1}, {1, 1}}, 1);
  check(ctx, {{5, 3}, {3, 7}}, 3);
  check(ctx, {{64, 15}, {15, 64}}, 5);     // one tile, K < 16 and odd; vec4 C and transposed A
  check(ctx, {{63, 17}, {17, 65}}, 7);     // one short / past a tile, a second slice of one k
  check(ctx, {{64, 16}, {16, 64}}, 9);     // one whole slice
  check(ctx, {{64, 32}, {32, 64}}, 11);    // two slices, vec4 everywhere
  check(ctx, {{66, 20}, {20, 70}}, 13);    // vec4 A and transposed B, a part slice; N % 4 = 2
  check(ctx, {{100, 36}, {36, 4}}, 15);    // one column quad
  check(ctx, {{130, 70}, {70, 257}}, 17);  // 3x5 tiles
}

// M and N reach 128 but too few 128x128 tiles would occupy the device: small tiles, long K loops.
TEST_F(VkTest, MatmulSmallTilesBelowTheLargeTileCount) {
  auto ctx = make_context();
  // The tiled kernel's tiles and splits (CPU devices run these products as row blocks).
  const ScopedMatmulKernelForTesting tiles(LaunchThresholds::ConvKernel::tiles);
  check(ctx, {{640, 512}, {512, 128}}, 21);  // 20 small tiles: too many to split K for latency alone
  check(ctx, {{200, 100}, {100, 131}}, 23);
}

// Batches pair up (b_batch_stride = K*N); a 2-D rhs under a rank-3 lhs is shared by the folded rows
// (only the rhs can be read transposed there); K = 0 writes zeros.
TEST_F(VkTest, MatmulSmallTilesBatchedFoldedAndEmpty) {
  auto ctx = make_context();
  check(ctx, {{3, 70, 20}, {3, 20, 66}}, 31);
  check(ctx, {{16, 128, 128}, {16, 128, 32}}, 33);
  check(ctx, {{2, 5, 9, 7}, {2, 5, 7, 3}}, 35);
  check(ctx, {{4, 30, 24}, {24, 50}}, 37, 1, {0, kRhs});
  check(ctx, {{5, 0}, {0, 70}}, 39, 1);
}

// Few tiles and a long K: the K ranges run as batches into scratch (lda = the whole K), then the
// ordered sum. The interpreter sums in one loop, so the inputs are small integers here: every
// partial sum is exact, and any correct split gives the interpreter's bits.
TEST_F(VkTest, MatmulSmallTilesSplitK) {
  auto ctx = make_context();
  for (const Case& c : {Case{{100, 1024}, {1024, 30}}, Case{{37, 1040}, {1040, 18}}}) {
    for (int which : {0, kLhs, kRhs, kLhs | kRhs}) {
      SCOPED_TRACE(shape_to_string(c.a) + " x " + shape_to_string(c.b) + ", transposed " + std::to_string(which));
      const Graph g = matmul_graph(c, which);
      EXPECT_EQ(plan(g, which).shader, "matmul_small");
      const TensorMap in{{"a", testing::small_integers_f32(g.type(*g.find_input("a")).shape, 41)},
                         {"b", testing::small_integers_f32(g.type(*g.find_input("b")).shape, 42)}};
      const HostTensor want = interpret(g, in, {.compute = ComputeType::f32}).outputs.at("c");
      Program program(ctx, g);
      EXPECT_EQ(program.stats().dispatches, 2u);
      expect_same_bits(want, program.run(in).at("c"), "split-K");
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// No device needed: which shader a launch takes, and its specialization constants (ids 0..2: A_T,
// B_T, VEC_BT). A plain launch sets none, so its pipeline is the shader's default kernel.
TEST(VkMatmulPlan, TheTilingPicksTheShader) {
  const Graph large = matmul_graph({{1024, 48}, {48, 1024}}, 0);
  EXPECT_EQ(plan(large, 0).shader, "matmul");
  EXPECT_TRUE(plan(large, 0).specialization.empty());
  EXPECT_EQ(plan(large, kRhs).specialization, (std::vector<std::uint32_t>{0, 1, 1}));
  const Graph small = matmul_graph({{64, 15}, {15, 64}}, 0);
  EXPECT_EQ(plan(small, 0).shader, "matmul_small");
  EXPECT_TRUE(plan(small, 0).specialization.empty());
  EXPECT_EQ(plan(matmul_graph({{64, 15}, {15, 64}}, kLhs | kRhs), kLhs | kRhs).specialization,
            (std::vector<std::uint32_t>{1, 1, 0}));  // K % 4 != 0: a transposed B moves scalars
}

}  // namespace
}  // namespace tg::vk
