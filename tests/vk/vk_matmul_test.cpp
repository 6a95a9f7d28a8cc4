// The Vulkan matmul kernel (shaders/matmul.comp) on hand-built graphs against the f64 oracle:
// sizes that are and are not multiples of the 64x64x16 tiles, long K, a 2-D rhs under a 3-D lhs,
// batched operands, batch dims that broadcast (up to the shader's four batch groups; more are a
// CompileError), 1-D operands, more tiles than workgroups (under a cap of 3; past the real 65535 with TG_VK_LARGE=1),
// an empty K, split-K launches (partials in scratch, then an ordered sum), guard regions intact (scratch included), and
// the same bits on every replay.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

using testing::random_f32;

struct Case {
  Shape a;
  Shape b;
};

// Runs c = matmul(a, b) on Vulkan (with guard regions after every buffer, then without) and on
// the f64 oracle; the error allowed is the matmul tolerance class at reduction length K relative
// to max(1, largest |value|), and a replay gives the same bits. `dispatches` > 0: the program must
// record that many (2 for a split-K launch), so a case keeps testing the path it was written for.
void check_matmul(const std::shared_ptr<Context>& ctx, const Case& c, std::uint32_t seed, bool thorough = true,
                  std::size_t dispatches = 0, std::uint32_t max_workgroups = 0) {
  SCOPED_TRACE(shape_to_string(c.a) + " x " + shape_to_string(c.b));
  GraphBuilder builder("matmul");
  TracingScope scope(builder);
  Tensor a = builder.input("a", {DType::f32, c.a});
  Tensor b = builder.input("b", {DType::f32, c.b});
  builder.output("c", matmul(a, b));
  const Graph g = builder.take();
  const TensorMap in{{"a", random_f32(c.a, seed)}, {"b", random_f32(c.b, seed + 1)}};
  const TensorMap want = interpret(g, in, {.compute = ComputeType::f64}).outputs;

  const std::int64_t k = c.a.back();
  double scale = 1.0;
  for (const TensorMap* m : {&in, &want})
    for (const auto& [name, t] : *m)
      for (double v : t.to_f64()) scale = std::max(scale, std::fabs(v));
  const double tol = 4.0 * std::numeric_limits<float>::epsilon() * tolerance_ulps(ToleranceClass::matmul, k) * scale;

  for (std::uint64_t guard : {256u, 0u}) {
    if (!thorough && guard > 0) continue;
    Program program(ctx, g, {.guard_bytes = guard, .max_workgroups = max_workgroups});
    if (dispatches > 0) {
      EXPECT_EQ(program.stats().dispatches, dispatches);
    }
    const TensorMap got = program.run(in);
    const HostTensor& out = got.at("c");
    const HostTensor& ref = want.at("c");
    ASSERT_EQ(out.type, ref.type);
    ASSERT_EQ(out.size(), ref.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      if (!(std::fabs(out.at(i) - ref.at(i)) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << "c[" << i << "]: Vulkan " << out.at(i) << ", f64 oracle " << ref.at(i) << " (allowed error "
                      << tol << ")";
      }
    }
    EXPECT_EQ(bad, 0u) << "elements off";
    if (guard > 0) {
      EXPECT_TRUE(program.check_guards().empty()) << testing::join_lines(program.check_guards());
    }
    // Replays give the same bits.
    if (!thorough) continue;
    const TensorMap again = program.run(in);
    const HostTensor& out2 = again.at("c");
    for (std::size_t i = 0; i < out.size(); ++i) {
      const auto x = static_cast<float>(out.at(i));
      const auto y = static_cast<float>(out2.at(i));
      ASSERT_EQ(std::memcmp(&x, &y, sizeof(float)), 0) << "replay differs at c[" << i << "]";
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, MatmulSizesInAndOffTheTileGrid) {
  auto ctx = make_context();
  check_matmul(ctx, {{1, 1}, {1, 1}}, 1);
  check_matmul(ctx, {{17, 33}, {33, 29}}, 3);    // every extent ragged
  check_matmul(ctx, {{64, 64}, {64, 64}}, 5);    // exactly one tile, four K slices
  check_matmul(ctx, {{130, 70}, {70, 257}}, 7);  // 3x5 tiles, ragged K
  check_matmul(ctx, {{65, 16}, {16, 63}}, 9);    // one past / one short of a tile
}

// The 128x128-tile kernel (M, N >= 128 and at least 64 such tiles) with vec4 and scalar row loads:
// whole and ragged tiles, batched, K or N not a multiple of 4 (the scalar paths). One dispatch each:
// none of these splits K.
TEST_F(VkTest, MatmulLargeTilesVec4AndScalarRows) {
  auto ctx = make_context();
  check_matmul(ctx, {{1024, 48}, {48, 1024}}, 31, true, 1);       // whole 128x128 tiles, vec4 A, B, C
  check_matmul(ctx, {{8, 136, 36}, {8, 36, 1032}}, 33, true, 1);  // batched, ragged tiles, vec4
  check_matmul(ctx, {{1025, 120}, {120, 1026}}, 35, true, 1);     // vec4 A, scalar B/C (N % 4 = 2)
  check_matmul(ctx, {{1000, 30}, {30, 1024}}, 37, true, 1);       // scalar A (K % 4 = 2), vec4 B/C
}

// Few output tiles and a long K: K ranges as batches into scratch, then the ordered sum (two
// dispatches). Small and large tiles, vec4 and scalar sums, ragged tiles.
TEST_F(VkTest, MatmulSplitsLongReductionsOverFewTiles) {
  auto ctx = make_context();
  // The tiled kernel's tiles and splits (CPU devices run these products as row blocks).
  const ScopedMatmulKernelForTesting tiles(LaunchThresholds::ConvKernel::tiles);
  check_matmul(ctx, {{64, 4096}, {4096, 64}}, 41, true, 2);    // one small tile, 64 ranges of 64
  check_matmul(ctx, {{100, 2048}, {2048, 30}}, 43, true, 2);   // ragged tiles, scalar C, vec4 sum
  check_matmul(ctx, {{7, 1024}, {1024, 9}}, 45, true, 2);      // 63 outputs: the scalar sum
  check_matmul(ctx, {{1024, 256}, {256, 1024}}, 47, true, 2);  // 64 large tiles, four ranges
  check_matmul(ctx, {{5, 4099}, {4099, 3}}, 49, true, 1);      // K has no even split: one dispatch
  // Little work per tile, but one tile alone on the device: W1's weight gradient, K = 256, splits
  // into four ranges; with K = 192 (fewer than four ranges of 64) it does not.
  check_matmul(ctx, {{64, 256}, {256, 64}}, 51, true, 2);
  check_matmul(ctx, {{64, 192}, {192, 64}}, 55, true, 1);
  check_matmul(ctx, {{1024, 128}, {128, 1024}}, 53, true, 1);  // 64 large tiles, K = 128
}

TEST_F(VkTest, MatmulLongReduction) {
  auto ctx = make_context();
  check_matmul(ctx, {{5, 4099}, {4099, 3}}, 11);
}

TEST_F(VkTest, MatmulFoldsLeadingLhsDimsUnderA2DRhs) {
  auto ctx = make_context();
  check_matmul(ctx, {{3, 5, 7}, {7, 11}}, 13);
  check_matmul(ctx, {{2, 3, 45, 19}, {19, 70}}, 15);  // 270 rows: tiles span the leading dims
}

TEST_F(VkTest, MatmulBatched) {
  auto ctx = make_context();
  check_matmul(ctx, {{2, 3, 17, 9}, {2, 3, 9, 13}}, 17);
  check_matmul(ctx, {{2, 3, 70, 40}, {2, 3, 40, 66}}, 19);  // 2x2 tiles per batch
  check_matmul(ctx, {{4, 1, 1}, {4, 1, 1}}, 21);
}

// torch.matmul's broadcasting: batch groups with 0 strides, in both tilings, vec4 and scalar rows.
TEST_F(VkTest, MatmulBroadcastsBatchDims) {
  auto ctx = make_context();
  check_matmul(ctx, {{2, 1, 3, 4}, {5, 4, 6}}, 111, true, 1);                 // both repeat: two groups
  check_matmul(ctx, {{17, 9}, {2, 3, 9, 13}}, 113, true, 1);                  // a 2-D lhs under every batch
  check_matmul(ctx, {{1, 70, 40}, {3, 40, 66}}, 115, true, 1);                // a lhs batch of 1, 2x2 tiles
  check_matmul(ctx, {{2, 1, 3, 1, 5, 8}, {1, 4, 1, 2, 8, 3}}, 117, true, 1);  // four groups, the most
  check_matmul(ctx, {{8, 136, 36}, {2, 1, 36, 1032}}, 119, true, 1);          // large tiles, vec4 strides
  check_matmul(ctx, {{4, 1, 385, 12}, {3, 12, 514}}, 121, true, 1);           // large tiles, scalar rows
  check_matmul(ctx, {{2, 3, 5, 7}, {1, 1, 7, 11}}, 123, true, 1);             // an rhs batch of 1s folds
}

TEST_F(VkTest, MatmulVectorOperands) {
  auto ctx = make_context();
  check_matmul(ctx, {{37}, {37}}, 131, true, 1);         // dot product: a 0-d result
  check_matmul(ctx, {{37}, {37, 70}}, 133, true, 1);     // vector x matrix
  check_matmul(ctx, {{70, 37}, {37}}, 135, true, 1);     // matrix x vector
  check_matmul(ctx, {{3, 70, 37}, {37}}, 137, true, 1);  // batched matrix x vector (folded)
  check_matmul(ctx, {{37}, {3, 37, 70}}, 139, true, 1);  // vector x batched matrix (broadcast)
  check_matmul(ctx, {{4096}, {4096}}, 141, true, 2);     // one tile, a long K: split-K
}

// Five batch groups (dims alternating which operand repeats) exceed the shader's push constants:
// a CompileError naming the shapes, not a wrong result.
TEST_F(VkTest, MatmulRefusesMoreBatchGroupsThanTheShaderDecodes) {
  auto ctx = make_context();
  GraphBuilder builder("matmul");
  TracingScope scope(builder);
  Tensor a = builder.input("a", {DType::f32, {2, 1, 2, 1, 2, 3, 4}});
  Tensor b = builder.input("b", {DType::f32, {1, 2, 1, 2, 1, 4, 5}});
  builder.output("c", matmul(a, b));
  const Graph g = builder.take();
  try {
    Program program(ctx, g);
    ADD_FAILURE() << "a five-group matmul compiled";
  } catch (const CompileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("f32[2,1,2,1,2,3,4] x f32[1,2,1,2,1,4,5]"), std::string::npos) << what;
    EXPECT_NE(what.find("5 batch groups"), std::string::npos) << what;
  }
}

// More tiles than workgroups: under a cap of 3 workgroups (ProgramOptions::max_workgroups), 20
// one-tile batches make each workgroup loop over up to 7 tiles, with guards and a replay.
TEST_F(VkTest, MatmulMoreTilesThanWorkgroups) {
  auto ctx = make_context();
  check_matmul(ctx, {{20, 1, 2}, {20, 2, 1}}, 23, /*thorough=*/true, 0, /*max_workgroups=*/3);
  // The same with broadcast batches: 2 x 10 tiles decoded through two groups.
  check_matmul(ctx, {{2, 1, 1, 2}, {10, 2, 1}}, 24, /*thorough=*/true, 0, /*max_workgroups=*/3);
}

// The same at the real cap, TG_VK_LARGE=1 only: 65600 batches of 1x2 x 2x1 are 65600 tiles, above
// the 65535 groups of one dispatch. One run, no guards: lavapipe spends about 50 s on this many
// workgroups of 64x64 tiles, which the capped test above checks in well under a second.
TEST_F(VkTest, MatmulMoreTilesThanTheWorkgroupCapLarge) {
  const char* large = std::getenv("TG_VK_LARGE");
  if (!large || std::string(large) != "1") {
    GTEST_SKIP() << "needs TG_VK_LARGE=1: 2 x 65600 workgroups take about 50 s on lavapipe; "
                    "MatmulMoreTilesThanWorkgroups loops the same way under a cap of 3 workgroups";
  }
  auto ctx = make_context();
  check_matmul(ctx, {{65600, 1, 2}, {65600, 2, 1}}, 23, /*thorough=*/false);
  check_matmul(ctx, {{2, 1, 1, 2}, {32800, 2, 1}}, 24, /*thorough=*/false);
}

TEST_F(VkTest, MatmulEmptyReductionGivesZeros) {
  auto ctx = make_context();
  check_matmul(ctx, {{3, 0}, {0, 4}}, 25);
  check_matmul(ctx, {{0, 5}, {5, 4}}, 27);  // empty output: no dispatch
}

}  // namespace
}  // namespace tg::vk
