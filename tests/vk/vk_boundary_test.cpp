// Boundary tests of the other kernel families against the oracle, on both sides of every threshold
// of their launch logic: the grid-stride cap (256 x 65535 items), sum_to_shape's modes (32/33 terms,
// 256/257, 1024/1025 outputs, 128/129-term contiguous rows, the row form's 256/257 rows, one or two
// dispatches at 2048/2049 blocks) bit for bit against the f32 interpreter, matmul's tile multiples
// and tilings, split-K thresholds and the long-K split (32767/32771), the convolutions' implicit
// GEMM tile, slice, split-K and loop-limit edges, scatter_add's serial, workgroup and split modes,
// and pooling's serial threshold. Each test asserts from the
// dispatch labels that the paths it names ran. The sizes a lavapipe run of about a second cannot
// reach run with TG_VK_LARGE=1 (LargeRowsAtLavapipeSizes).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "support/library.h"
#include "support/path_coverage.h"
#include "vk/kernels/kernels.h"
#include "vk_boundary_check.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::BoundaryCheck;
using testing::check_boundaries;
using testing::random_f32;
using testing::random_indices;
using testing::small_integers_f32;
using testing::VkTest;

// 256 x 65535 invocations cover exactly one element each; one more wraps invocation 0 around.
TEST_F(VkTest, BoundaryGridStrideAtTheWorkgroupCap) {
  auto ctx = make_context();
  for (const std::int64_t n : {std::int64_t{256} * 65535, std::int64_t{256} * 65535 + 1}) {
    SCOPED_TRACE("n " + std::to_string(n));
    GraphBuilder b("grid_cap");
    TracingScope scope(b);
    b.output("y", neg(b.input("x", {DType::f32, {n}})));
    check_boundaries(ctx, b.take(), {{"x", random_f32({n}, 5)}}, {.exact = {"y"}});
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, BoundarySumToShapeModesBitForBit) {
  auto ctx = make_context();
  // The workgroup per long output GPUs take (CPU devices take block partials: vk_long_sums_test.cpp).
  const ScopedLongSumsForTesting gpu_sums(LaunchThresholds::LongSums::workgroup_per_output);
  const std::vector<std::tuple<std::string, Shape, Shape>> cases = {{"serial31", {31, 5}, {1, 5}},
                                                                    {"rows32", {32, 5}, {1, 5}},
                                                                    {"rows256", {256, 7}, {1, 7}},
                                                                    {"rows257", {257, 7}, {1, 7}},
                                                                    {"rows2049blocks", {524289, 2}, {1, 2}},
                                                                    {"staged1", {1024, 33}, {1024, 1}},
                                                                    {"contiguous33", {1025, 33}, {1025, 1}},
                                                                    {"contiguous129", {1025, 129}, {1025, 1}},
                                                                    {"staged1_1024", {2, 33, 512}, {2, 1, 512}},
                                                                    {"staged2_1026", {2, 33, 513}, {2, 1, 513}},
                                                                    {"short256", {7, 256}, {7, 1}},
                                                                    {"long257", {7, 257}, {7, 1}},
                                                                    {"general257", {3, 257, 2}, {3, 1, 2}},
                                                                    {"blocks2048", {524288}, {1}},
                                                                    {"blocks2049", {524289}, {1}}};
  GraphBuilder b("sum_to_shape_boundaries");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 120;
  for (const auto& [name, from, to] : cases) {
    b.output(name, sum_to_shape(b.input(name, {DType::f32, from}), to));
    in.emplace(name, random_f32(from, ++seed));
  }
  const auto labels = check_boundaries(ctx, b.take(), in, {.f32_bits = true});
  EXPECT_EQ(labels.at("sum_to_shape (row blocks)"), 4u);  // rows32, rows256, rows257, rows2049blocks
  EXPECT_EQ(labels.at("sum_to_shape (block sum)"), 3u);   // rows257, rows2049blocks, blocks2049
  EXPECT_EQ(labels.at("sum_to_shape (block partials)"), 1u);
  EXPECT_EQ(labels.at("sum_to_shape (contiguous rows)"), 2u);
  // long257; general257's strided preimages keep a workgroup each (vk_sum_to_shape_long_rows_test.cpp
  // crosses mode 5's thresholds).
  EXPECT_EQ(labels.at("sum_to_shape (contiguous long rows)"), 1u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, BoundaryMatmulTilesSplitsAndLongK) {
  auto ctx = make_context();
  // The tiled kernel's tiles and splits (CPU devices run these products as row blocks).
  const ScopedMatmulKernelForTesting tiles(LaunchThresholds::ConvKernel::tiles);
  const std::vector<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>> cases = {
      {"m63", 63, 16, 65},
      {"m64", 64, 16, 64},
      {"m65", 65, 17, 63},
      {"small_tiles", 896, 16, 1024},
      {"large_tiles", 897, 16, 1024},
      {"k255", 64, 255, 64},
      {"k256_split", 64, 256, 64},
      {"work16368", 1088, 1023, 64},
      {"work16384_split", 1088, 1024, 64},
      {"k32767", 1, 32767, 1},
      {"k32771_long", 1, 32771, 1},
      {"k32771_ragged", 2, 32771, 3},
      {"k32772_vec4", 4, 32772, 4}};
  GraphBuilder b("matmul_boundaries");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 140;
  for (const auto& [name, m, k, n] : cases) {
    Tensor x = b.input(name + "_a", {DType::f32, {m, k}});
    Tensor y = b.input(name + "_b", {DType::f32, {k, n}});
    b.output(name, matmul(x, y));
    in.emplace(name + "_a", random_f32({m, k}, ++seed));
    in.emplace(name + "_b", random_f32({k, n}, ++seed));
  }
  // The long K read through transposed operands (the shaders' A_T and B_T loads).
  Tensor at = b.input("at", {DType::f32, {32771, 3}});
  Tensor bt = b.input("bt", {DType::f32, {2, 32771}});
  b.output("a_transposed", matmul(swap_axes(at, 0, 1), b.input("bt_rhs", {DType::f32, {32771, 2}})));
  b.output("b_transposed", matmul(b.input("at_lhs", {DType::f32, {3, 32771}}), swap_axes(bt, 0, 1)));
  in.emplace("at", random_f32({32771, 3}, 201));
  in.emplace("bt", random_f32({2, 32771}, 202));
  in.emplace("bt_rhs", random_f32({32771, 2}, 203));
  in.emplace("at_lhs", random_f32({3, 32771}, 204));
  const auto labels = check_boundaries(ctx, b.take(), in);
  EXPECT_EQ(labels.at("matmul (split-K x4)"), 1u);  // k256_split: a lone tile, four ranges
  EXPECT_EQ(labels.at("matmul (split-K x8)"), 1u);  // work16384_split: 17 tiles
  EXPECT_EQ(labels.at("matmul (split-K x2)"), 5u);  // the long K: two ranges, the last shorter
  EXPECT_EQ(labels.at("matmul (split-K sum)"), 7u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, BoundaryConvolutionAndScatterAddSums) {
  auto ctx = make_context();
  // The tiled kernel's thresholds, on every device (CPU devices run the row blocks by default:
  // vk_conv_rows_test.cpp crosses theirs).
  const ScopedConvKernelForTesting tiles(LaunchThresholds::ConvKernel::tiles);
  GraphBuilder b("sum_boundaries");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 160;
  const auto input = [&](const std::string& name, Shape shape) {
    in.emplace(name, random_f32(shape, ++seed));
    return b.input(name, {DType::f32, std::move(shape)});
  };
  // The convolutions' implicit GEMM (conv_gemm.cpp): M (output channels) and NC (pixels) at the
  // edges of the tile shapes (M 64/65 of 64x64 tiles; NC 64/65 from 64x64 to 64x128 at M 40; NC
  // 128/130 at M 16, a product too small for 32x128 tiles), the forward's K = C at the 16-deep slice edge (16: vec4 A
  // rows; 17: scalar), one tile's weight-gradient K = N*OH*OW at the few-tiles split (255 unsplit, 256 in four ranges),
  // and a 17-tile forward at the work split (K 1023 unsplit, 1024 ragged ranges); all of them filling at least an
  // eighth of their tiles, and one thin product either side of that share (M 8: tiled; M 7: one invocation per output).
  for (const std::int64_t e : {64, 65}) {
    const std::string tag = std::to_string(e);
    b.output("conv_m" + tag, conv2d(input("mx" + tag, {1, 3, 4, 4}), input("mw" + tag, {e, 3, 1, 1})));
    b.output("conv_n" + tag, conv2d(input("nx" + tag, {1, 3, 1, e}), input("nw" + tag, {40, 3, 1, 1})));
    b.output("conv_n" + tag + "_narrow", conv2d(input("rx" + tag, {1, 3, 1, 2 * e}), input("rw" + tag, {16, 3, 1, 1})));
  }
  // Every op on both sides of the 32-row tile: M 32 takes 32x128 tiles from 256 of them (NC 32641;
  // NC 32640 keeps 64x64), M 33 takes 64x128 (NC 130, two column tiles), M 40 over NC <= 64 keeps
  // 64x64. conv2d's M is O, the input gradient's C, the weight gradient's O (its NC C*KH*KW).
  for (const std::int64_t nc : {32640, 32641}) {
    const std::string tag = std::to_string(nc);
    b.output("rows32_" + tag, conv2d(input("ox" + tag, {1, 3, 1, nc}), input("ow" + tag, {32, 3, 1, 1})));
  }
  b.output("rows33", conv2d(input("ox33", {1, 3, 10, 13}), input("ow33", {33, 3, 1, 1})));
  for (const std::int64_t m : {32, 33}) {
    const std::string tag = std::to_string(m);
    const std::int64_t width = m == 32 ? 32641 : 130;  // 256 tiles of 32x128; two of 64x128
    b.output("rows_dx" + tag, conv2d_input_grad(input("ig" + tag, {1, 4, 1, width}), input("iw" + tag, {4, m, 1, 3}), 1,
                                                width, {.padding = {0, 1}}));
    const std::int64_t channels = m == 32 ? 3627 : 8;  // NC 32643 (256 tiles of 32x128); 72 (64x128)
    b.output("rows_dw" + tag, conv2d_weight_grad(input("dx" + tag, {1, channels, 4, 4}),
                                                 input("dg" + tag, {1, m, 4, 4}), 3, 3, {.padding = 1}));
  }
  // The gradients' 64x64 tiles: M 40 over NC 16 (input grad) and 18 (weight grad).
  b.output("square_dx",
           conv2d_input_grad(input("sqg", {1, 4, 4, 4}), input("sqw", {4, 40, 3, 3}), 4, 4, {.padding = 1}));
  b.output("square_dw",
           conv2d_weight_grad(input("qx", {1, 2, 4, 4}), input("qg", {1, 40, 4, 4}), 3, 3, {.padding = 1}));
  for (const std::int64_t c : {16, 17}) {
    const std::string tag = std::to_string(c);
    b.output("conv_k" + tag, conv2d(input("kx" + tag, {2, c, 8, 8}), input("kw" + tag, {16, c, 1, 1})));
  }
  for (const std::int64_t h : {255, 256}) {
    const std::string tag = std::to_string(h);
    b.output("wgrad" + tag,
             conv2d_weight_grad(input("wx" + tag, {1, 16, h, 1}), input("wg" + tag, {1, 32, h, 1}), 1, 1, {}));
  }
  for (const std::int64_t c : {1023, 1024}) {
    const std::string tag = std::to_string(c);
    b.output("conv_work" + tag, conv2d(input("sx" + tag, {1, c, 1, 17 * 128}), input("sw" + tag, {16, c, 1, 1})));
  }
  for (const std::int64_t m : {7, 8}) {
    const std::string tag = std::to_string(m);
    b.output("conv_thin" + tag, conv2d(input("tx" + tag, {1, 5, 8, 8}), input("tw" + tag, {m, 5, 1, 1})));
  }
  // scatter_add: K terms per output (6 outputs); serial to 256, then a workgroup, then chunks.
  BoundaryCheck check;
  for (const std::int64_t k : {256, 257, 8192, 8193}) {
    const std::string tag = std::to_string(k);
    b.output("scatter" + tag,
             scatter_add(b.input("su" + tag, {DType::f32, {k, 2}}), b.input("si" + tag, {DType::i32, {k, 2}}), 0, 3));
    in.emplace("su" + tag, small_integers_f32({k, 2}, ++seed));  // exact sums in any order
    in.emplace("si" + tag, random_indices({k, 2}, 3, ++seed));
    check.exact.push_back("scatter" + tag);
  }
  const auto labels = check_boundaries(ctx, b.take(), in, check);
  EXPECT_EQ(labels.at("conv2d (split-K)"), 1u);  // K 1024 of 17 tiles
  EXPECT_EQ(labels.at("conv2d (split-K sum)"), 1u);
  EXPECT_EQ(labels.at("conv2d_weight_grad (split-K)"), 1u);  // K 256 of one tile
  EXPECT_EQ(labels.at("conv2d_weight_grad (split-K sum)"), 1u);
  EXPECT_EQ(labels.at("conv2d"), 14u);  // the unsplit ones, the thin pair included
  EXPECT_EQ(labels.at("conv2d_input_grad"), 3u);
  EXPECT_EQ(labels.at("conv2d_weight_grad"), 4u);
  EXPECT_EQ(labels.at("scatter_add (chunks)"), 1u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
  tg::testing::write_path_coverage();  // the tile shapes' paths (the sweep's draws may miss some)
}

// The convolutions' loop-limit ranges, planned only (a run would take hours on lavapipe): with
// 2048 tiles of 64x128 no split pays, and a K of 32768 = 2048 slices is one range; one more term gives two
// ranges (the last shorter), each within the loop budget.
TEST(VkBoundaryPlans, ConvolutionKRangesForTheLoopLimit) {
  for (const std::int64_t c : {32768, 32769}) {
    SCOPED_TRACE("C " + std::to_string(c));
    GraphBuilder b("conv_long_k");
    TracingScope scope(b);
    b.output("y", conv2d(b.input("x", {DType::f32, {1, c, 64, 256}}), b.input("w", {DType::f32, {1024, c, 1, 1}})));
    const Graph g = b.take();
    const Node& node = g.nodes().back();
    const KernelLaunch launch = kernel_plan_table()[static_cast<std::size_t>(node.op)](g, node);
    EXPECT_LE(launch.loop_passes, kLoopBudget);
    EXPECT_EQ(launch.then.size(), c > 32768 ? 1u : 0u);
    EXPECT_EQ(launch.items, std::uint64_t{2048} * 256 * (c > 32768 ? 2 : 1));
  }
}

// max_pool2d: a window of 64 x 64 taps is one invocation's, 65 x 65 a workgroup's; the gradient:
// covering windows x taps 64 x 64 serial, 81 x 81 a workgroup per element.
TEST_F(VkTest, BoundaryPoolingSerialThreshold) {
  auto ctx = make_context();
  GraphBuilder b("pool_boundaries");
  TracingScope scope(b);
  TensorMap in;
  b.output("pool64", max_pool2d(b.input("p64", {DType::f32, {1, 2, 64, 64}}), 64));
  b.output("pool65", max_pool2d(b.input("p65", {DType::f32, {1, 2, 65, 65}}), 65));
  in.emplace("p64", random_f32({1, 2, 64, 64}, 180));
  in.emplace("p65", random_f32({1, 2, 65, 65}, 181));
  for (const std::int64_t k : {8, 9}) {
    const std::int64_t h = 2 * k, out = h - k + 1;
    const std::string tag = std::to_string(k);
    b.output("grad" + tag, max_pool2d_grad(b.input("gx" + tag, {DType::f32, {1, 1, h, h}}),
                                           b.input("gg" + tag, {DType::f32, {1, 1, out, out}}), k, 1, 0));
    in.emplace("gx" + tag, random_f32({1, 1, h, h}, 182 + static_cast<std::uint32_t>(k)));
    in.emplace("gg" + tag, small_integers_f32({1, 1, out, out}, 190 + static_cast<std::uint32_t>(k)));
  }
  check_boundaries(ctx, b.take(), in, {.exact = {"pool64", "pool65", "grad8", "grad9"}});
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// The largest rows one lavapipe value holds, where an unsplit loop passed llvmpipe's limit many
// times over: reductions and softmax over 2^24 and 3 x 2^23 elements, the 256-row split threshold
// at 65536/65537 terms, sum_to_shape's 98304 block partials, and a matmul with K = 2^24.
TEST_F(VkTest, BoundaryLargeRowsAtLavapipeSizes) {
  if (!testing::large_tests_enabled()) GTEST_SKIP() << "about 1 GB of host memory and a minute: set TG_VK_LARGE=1";
  auto ctx = make_context();
  constexpr std::int64_t big = 3 * (std::int64_t{1} << 23);
  constexpr std::int64_t half = std::int64_t{1} << 24;
  {
    GraphBuilder b("large_reduce");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {big}});
    b.output("sum", sum(x));
    b.output("argmax", argmax(x));
    b.output("to_shape", sum_to_shape(x, {1}));
    check_boundaries(ctx, b.take(), {{"x", random_f32({big}, 1)}}, {.exact = {"argmax"}});
  }
  {
    GraphBuilder b("large_rows");
    TracingScope scope(b);
    b.output("whole", max(b.input("whole", {DType::f32, {256, 65536}}), 1));
    b.output("split", max(b.input("split", {DType::f32, {256, 65537}}), 1));
    const auto labels = check_boundaries(
        ctx, b.take(), {{"whole", random_f32({256, 65536}, 2)}, {"split", random_f32({256, 65537}, 3)}});
    EXPECT_EQ(labels.at("max (chunks)"), 1u);
  }
  {
    GraphBuilder b("large_softmax");
    TracingScope scope(b);
    b.output("y", softmax(b.input("x", {DType::f32, {1, half}})));
    check_boundaries(ctx, b.take(), {{"x", random_f32({1, half}, 4)}});
  }
  {
    GraphBuilder b("large_k");
    TracingScope scope(b);
    b.output("y", matmul(b.input("a", {DType::f32, {1, half}}), b.input("b", {DType::f32, {half, 1}})));
    check_boundaries(ctx, b.take(), {{"a", random_f32({1, half}, 5)}, {"b", random_f32({half, 1}, 6)}});
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
