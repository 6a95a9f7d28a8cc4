// Matmuls on the row-block kernel (conv_rows.cpp's route_matmuls_to_rows: a matmul as a 1x1
// convolution), the kernel CPU devices run, forced on whatever device the suite has: each form (A B
// as the forward product, A Bt as the weight gradient, At B as the input gradient, equal batches as
// groups, K = 0), both sides of the kernel's thresholds in M, N and K, against the f64 oracle; the
// products it leaves to the tiled kernel (At Bt, broadcast batches, part products); and the route.
// The forms' bits against the materialized transposes are vk_matmul_transposed_test.cpp's, which
// runs on the device's default kernel.
#include <gtest/gtest.h>

#include <string>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "vk/kernels/conv_gemm.h"
#include "vk/kernels/kernels.h"
#include "vk/kernels/matmul_units.h"
#include "vk_boundary_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using Kernel = LaunchThresholds::ConvKernel;
using testing::check_boundaries;
using testing::random_f32;
using testing::VkTest;

bool runs_row_blocks(const DeviceInfo& info) { return info.compute_subgroup_broadcast && info.subgroup_size >= 8; }

TEST_F(VkTest, MatmulRowsFormsAndThresholdsMatchTheOracle) {
  auto ctx = make_context();
  if (!runs_row_blocks(ctx->info())) {
    GTEST_SKIP() << "the row-block kernel needs subgroupBroadcast in subgroups of 8 or more; " << ctx->info().name
                 << " runs the tiled kernel only";
  }
  const ScopedMatmulKernelForTesting rows(Kernel::rows);
  GraphBuilder b("matmul_rows");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 1200;
  const auto input = [&](const std::string& name, Shape shape) {
    in.emplace(name, random_f32(shape, ++seed));
    return b.input(name, {DType::f32, std::move(shape)});
  };
  // M across the row blocks (8, 16, 32 rows; 33 takes two blocks of 32), N across the columns per
  // invocation (one to 64, two to 128, four past), each in the three forms.
  for (const std::int64_t m : {8, 9, 17, 33}) {
    const std::string tag = std::to_string(m);
    b.output("ab_m" + tag, matmul(input("a_m" + tag, {m, 20}), input("b_m" + tag, {20, 7})));
    b.output("abt_m" + tag, matmul(input("at_m" + tag, {m, 20}), swap_axes(input("bt_m" + tag, {7, 20}), 0, 1)));
    b.output("atb_m" + tag, matmul(swap_axes(input("ta_m" + tag, {20, m}), 0, 1), input("tb_m" + tag, {20, 7})));
  }
  for (const std::int64_t n : {64, 65, 128, 129, 257}) {
    const std::string tag = std::to_string(n);
    b.output("ab_n" + tag, matmul(input("a_n" + tag, {5, 12}), input("b_n" + tag, {12, n})));
    b.output("abt_n" + tag, matmul(input("at_n" + tag, {5, 12}), swap_axes(input("bt_n" + tag, {n, 12}), 0, 1)));
    b.output("atb_n" + tag, matmul(swap_axes(input("ta_n" + tag, {12, 5}), 0, 1), input("tb_n" + tag, {12, n})));
  }
  // One workgroup: K splits from 512 (two ranges), 513 ragged; 511 stays one range.
  for (const std::int64_t k : {511, 512, 513}) {
    const std::string tag = std::to_string(k);
    b.output("k" + tag, matmul(input("ka" + tag, {8, k}), input("kb" + tag, {k, 64})));
  }
  // 64 workgroups (M 128 in four blocks, N 4096 in 16 blocks): K splits only past the 2048-term range.
  b.output("long2049", matmul(input("la", {128, 2049}), input("lb", {2049, 4096})));
  // Equal batches as groups, in each form; lhs batch dims folded into M under a 2-D rhs; vectors.
  b.output("batched", matmul(input("ba", {3, 9, 10}), input("bb", {3, 10, 11})));
  b.output("batched_bt", matmul(input("bta", {3, 9, 10}), swap_axes(input("btb", {3, 11, 10}), -1, -2)));
  b.output("batched_at", matmul(swap_axes(input("ata", {3, 10, 9}), -1, -2), input("atb", {3, 10, 11})));
  b.output("folded", matmul(input("fa", {2, 3, 5, 6}), input("fb", {6, 4})));
  b.output("vector", matmul(input("va", {6}), input("vb", {6, 3})));
  b.output("empty_k", matmul(input("ea", {4, 0}), input("eb", {0, 5})));
  // Left to the tiles: both operands transposed, batches that broadcast (an rhs batch of 1 alone
  // folds, as 'vector' and 'folded' do).
  b.output("atbt", matmul(swap_axes(input("xa", {6, 4}), 0, 1), swap_axes(input("xb", {5, 6}), 0, 1)));
  b.output("broadcast", matmul(input("ra", {2, 4, 6}), input("rb", {3, 1, 6, 5})));
  const auto labels = check_boundaries(ctx, b.take(), in);
  std::string all;
  for (const auto& [label, count] : labels) all += label + ": " + std::to_string(count) + "\n";
  SCOPED_TRACE("dispatch labels:\n" + all);
  EXPECT_EQ(labels.at("matmul (rows, split-K)"), 3u);  // K 512, 513, 2049
  EXPECT_EQ(labels.at("matmul (rows, split-K sum)"), 3u);
  // 12 M cases, 15 N cases, K 511, three batched, folded, vector, empty K.
  EXPECT_EQ(labels.at("matmul (rows)"), 34u);
  EXPECT_EQ(labels.at("matmul"), 2u);  // At Bt and the broadcast batches
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Planned only, on made-up devices: CPU devices take the row blocks for plain fp32 products, other
// devices the tiles, unless a test forces one; part products keep the portable kernel.
TEST(VkMatmulRowsPlans, RouteFollowsTheDeviceTypeAndThePrecision) {
  GraphBuilder b("matmul_route");
  TracingScope scope(b);
  b.output("c", matmul(b.input("a", {DType::f32, {16, 24}}), b.input("b", {DType::f32, {24, 8}})));
  const Graph g = b.take();
  const auto routed = [&](DeviceType type, std::uint32_t subgroup, bool broadcast,
                          MatmulPrecision precision = MatmulPrecision::ieee) {
    DeviceInfo device;
    device.type = type;
    device.subgroup_size = subgroup;
    device.compute_subgroup_broadcast = broadcast;
    const Node& node = g.nodes().back();
    std::vector<KernelLaunch> launches{plan_matmul_reading(g, node, {node.inputs[0], false}, {node.inputs[1], false})};
    route_matmuls(g, device, precision, launches);
    route_matmuls_to_rows(g, device, launches);
    return launches.front().shader;
  };
  EXPECT_EQ(routed(DeviceType::cpu, 8, true), "conv2d_rows");
  EXPECT_EQ(routed(DeviceType::discrete_gpu, 32, true), "matmul_small");
  EXPECT_EQ(routed(DeviceType::cpu, 4, true), "matmul_small");
  EXPECT_EQ(routed(DeviceType::cpu, 8, false), "matmul_small");
  EXPECT_EQ(routed(DeviceType::cpu, 8, true, MatmulPrecision::split), "matmul_small");
  {
    const ScopedMatmulKernelForTesting forced(Kernel::rows);
    EXPECT_EQ(routed(DeviceType::discrete_gpu, 32, true), "conv2d_rows");
  }
  const ScopedMatmulKernelForTesting forced(Kernel::tiles);
  EXPECT_EQ(routed(DeviceType::cpu, 8, true), "matmul_small");
}

}  // namespace
}  // namespace tg::vk
