// The convolutions' row-block kernel (conv_rows.cpp, shaders/conv2d_rows.comp), the one CPU devices
// run, forced on whatever device the suite has: both sides of each of its launch thresholds (the
// row block of 8, 16 or 32 rows, the workgroup width of 8 to 64 and one to four columns per
// invocation fitted to NC, the split-K for workgroups below 64 from a K of 512, the 2048-term range
// of llvmpipe's loop limit), against the f64 oracle, and the routing that picks it. The tiled kernel's own thresholds
// are vk_boundary_test.cpp's.
#include <gtest/gtest.h>

#include <string>

#include "support/library.h"
#include "vk/kernels/conv_gemm.h"
#include "vk/kernels/kernels.h"
#include "vk_boundary_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using Kernel = LaunchThresholds::ConvKernel;
using testing::check_boundaries;
using testing::random_f32;
using testing::VkTest;

TEST_F(VkTest, ConvRowsKernelAtItsThresholdsMatchesTheOracle) {
  auto ctx = make_context();
  if (!ctx->info().compute_subgroup_broadcast || ctx->info().subgroup_size < 8) {
    GTEST_SKIP() << "the row-block kernel needs subgroupBroadcast in subgroups of 8 or more; " << ctx->info().name
                 << " runs the tiled kernel only";
  }
  const ScopedConvKernelForTesting rows(Kernel::rows);
  GraphBuilder b("conv_rows_boundaries");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 900;
  const auto input = [&](const std::string& name, Shape shape) {
    in.emplace(name, random_f32(shape, ++seed));
    return b.input(name, {DType::f32, std::move(shape)});
  };
  // M (output channels) across the row blocks: 8 fills one block of 8, 9 one of 16 partly, 17 one
  // of 32 partly, 33 two of 32; NC (pixels) across the widths and columns per invocation
  // (VkConvRowsPlans.WidthAndColumnsFitNC lists the picks): 1 and 8 (8 wide, one column), 9 (two),
  // 17 (three), 25 (four), 33 (16 wide), 49 and 64 (eight), 65, 128, 129, 256 (32 wide), 257, 512
  // (64 wide) and 513.
  for (const std::int64_t m : {8, 9, 16, 17, 32, 33}) {
    const std::string tag = std::to_string(m);
    b.output("m" + tag, conv2d(input("mx" + tag, {1, 3, 4, 4}), input("mw" + tag, {m, 3, 3, 3}), {.padding = 1}));
  }
  for (const std::int64_t n : {1, 8, 9, 17, 25, 33, 49, 64, 65, 128, 129, 256, 257, 512, 513}) {
    const std::string tag = std::to_string(n);
    b.output("n" + tag, conv2d(input("nx" + tag, {1, 5, 1, n}), input("nw" + tag, {8, 5, 1, 1})));
  }
  // One workgroup: K splits from 512 (two ranges), 513 ragged; 511 stays one range.
  for (const std::int64_t k : {511, 512, 513}) {
    const std::string tag = std::to_string(k);
    b.output("k" + tag, conv2d(input("kx" + tag, {1, k, 1, 64}), input("kw" + tag, {8, k, 1, 1})));
  }
  // 64 workgroups (M 128: four blocks of 32 rows; NC 4096: 16 blocks of 256 columns): no split
  // for parallelism, so K splits only past the 2048-term range.
  for (const std::int64_t k : {2048, 2049}) {
    const std::string tag = std::to_string(k);
    b.output("long" + tag, conv2d(input("lx" + tag, {1, k, 1, 4096}), input("lw" + tag, {128, k, 1, 1})));
  }
  // The gradients with every geometry the im2col arithmetic has: stride, padding, dilation, groups.
  const Conv2dOptions strided{.stride = 2, .padding = 1, .dilation = 2, .groups = 2};
  b.output("input_grad", conv2d_input_grad(input("ig", {3, 6, 3, 3}), input("iw", {6, 2, 3, 2}), 7, 6, strided));
  b.output("weight_grad", conv2d_weight_grad(input("wx", {3, 4, 7, 6}), input("wg", {3, 6, 3, 3}), 3, 2, strided));
  b.output("empty_batch", conv2d_weight_grad(input("ex", {0, 2, 3, 3}), input("eg", {0, 4, 3, 3}), 1, 1, {}));
  const auto labels = check_boundaries(ctx, b.take(), in);
  std::string all;
  for (const auto& [label, count] : labels) all += label + ": " + std::to_string(count) + "\n";
  SCOPED_TRACE("dispatch labels:\n" + all);
  EXPECT_EQ(labels.at("conv2d (rows, split-K)"), 3u);  // K 512, 513, 2049
  EXPECT_EQ(labels.at("conv2d (rows, split-K sum)"), 3u);
  EXPECT_EQ(labels.at("conv2d (rows)"), 23u);  // the six M, the fifteen NC, K 511 and 2048
  EXPECT_EQ(labels.at("conv2d_input_grad (rows)"), 1u);
  EXPECT_EQ(labels.count("conv2d_weight_grad (rows)") + labels.count("conv2d_weight_grad (rows, split-K)"), 1u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Planned only: a K of 32769 terms splits into ranges of at most 2048, each within the loop budget.
TEST(VkConvRowsPlans, LongKRangesStayWithinTheLoopBudget) {
  GraphBuilder b("conv_rows_long_k");
  TracingScope scope(b);
  b.output("y", conv2d(b.input("x", {DType::f32, {1, 32769, 1, 4096}}), b.input("w", {DType::f32, {8, 32769, 1, 1}})));
  const Graph g = b.take();
  const KernelLaunch launch = plan_conv_rows(g, g.nodes().back(), ConvRole::forward);
  EXPECT_LE(launch.loop_passes, kLoopBudget);
  ASSERT_EQ(launch.then.size(), 1u);
  EXPECT_EQ(launch.items, std::uint64_t{8} * 17 * 64);  // 8 blocks of 64 x 8 columns, 17 ranges
}

// Planned only: the workgroup width (specialization constant 3) and columns per invocation (2)
// that cost the fewest lane-by-lane loads for NC, on both sides of each change, with M of 8 (so
// eight columns fit the accumulator budget); and a block of 32 rows, which keeps four.
TEST(VkConvRowsPlans, WidthAndColumnsFitNC) {
  struct Pick {
    std::int64_t nc;
    std::uint32_t width, lane_columns;
  };
  for (const Pick& p :
       {Pick{1, 8, 1}, Pick{8, 8, 1}, Pick{9, 8, 2}, Pick{16, 8, 2}, Pick{17, 8, 3}, Pick{24, 8, 3}, Pick{25, 8, 4},
        Pick{32, 8, 4}, Pick{33, 16, 3}, Pick{48, 16, 3}, Pick{49, 8, 8}, Pick{64, 8, 8}, Pick{65, 8, 3},
        Pick{128, 16, 8}, Pick{129, 16, 3}, Pick{256, 32, 8}, Pick{257, 8, 3}, Pick{512, 64, 8}, Pick{4096, 64, 8}}) {
    GraphBuilder b("conv_rows_width");
    TracingScope scope(b);
    b.output("y", conv2d(b.input("x", {DType::f32, {1, 5, 1, p.nc}}), b.input("w", {DType::f32, {8, 5, 1, 1}})));
    const Graph g = b.take();
    const KernelLaunch launch = plan_conv_rows(g, g.nodes().back(), ConvRole::forward);
    ASSERT_EQ(launch.specialization.size(), 4u);
    EXPECT_EQ(launch.specialization[2], p.lane_columns) << "NC " << p.nc;
    EXPECT_EQ(launch.specialization[3], p.width) << "NC " << p.nc;
    EXPECT_EQ(launch.group_size, p.width) << "NC " << p.nc;
    const std::uint64_t columns = std::uint64_t{p.width} * p.lane_columns;
    EXPECT_EQ(launch.items, (static_cast<std::uint64_t>(p.nc) + columns - 1) / columns * p.width) << "NC " << p.nc;
  }
  GraphBuilder b("conv_rows_32_rows");
  TracingScope scope(b);
  b.output("y", conv2d(b.input("x", {DType::f32, {1, 5, 1, 4096}}), b.input("w", {DType::f32, {32, 5, 1, 1}})));
  const Graph g = b.take();
  const KernelLaunch launch = plan_conv_rows(g, g.nodes().back(), ConvRole::forward);
  EXPECT_EQ(launch.specialization[1], 32u);
  EXPECT_EQ(launch.specialization[2], 4u);
  EXPECT_EQ(launch.specialization[3], 64u);
}

// The route: CPU devices take the row blocks, other devices the tiles, unless a test forces one;
// a device without subgroupBroadcast in subgroups of 8 keeps the tiles whatever is forced.
TEST(VkConvRowsPlans, RouteFollowsTheDeviceType) {
  GraphBuilder b("conv_route");
  TracingScope scope(b);
  b.output("y", conv2d(b.input("x", {DType::f32, {1, 3, 8, 8}}), b.input("w", {DType::f32, {4, 3, 3, 3}})));
  const Graph g = b.take();
  const auto routed = [&](DeviceType type, std::uint32_t subgroup, bool broadcast) {
    DeviceInfo device;
    device.type = type;
    device.subgroup_size = subgroup;
    device.compute_subgroup_broadcast = broadcast;
    std::vector<KernelLaunch> launches{plan_conv_gemm(g, g.nodes().back(), ConvRole::forward)};
    route_convolutions(g, device, launches);
    return launches.front().shader;
  };
  EXPECT_EQ(routed(DeviceType::cpu, 8, true), "conv2d_rows");
  EXPECT_EQ(routed(DeviceType::discrete_gpu, 32, true), "conv2d_gemm");
  EXPECT_EQ(routed(DeviceType::cpu, 4, true), "conv2d_gemm");
  EXPECT_EQ(routed(DeviceType::cpu, 8, false), "conv2d_gemm");
  {
    const ScopedConvKernelForTesting forced(Kernel::rows);
    EXPECT_EQ(routed(DeviceType::discrete_gpu, 32, true), "conv2d_rows");
  }
  const ScopedConvKernelForTesting forced(Kernel::tiles);
  EXPECT_EQ(routed(DeviceType::cpu, 8, true), "conv2d_gemm");
}

}  // namespace
}  // namespace tg::vk
