// sum_to_shape's long preimages on CPU devices (layout.cpp's route_long_sums): every preimage of
// more than one 256-term block as block partials into scratch and their ordered sum, forced on
// whatever device the suite has, bit for bit against the f32 interpreter (the same additions as the
// workgroup per output GPUs run, whose thresholds vk_boundary_test.cpp crosses); the modes it
// leaves alone; and the route on made-up devices.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/layout.h"
#include "vk/kernels/kernels.h"
#include "vk_boundary_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using LongSums = LaunchThresholds::LongSums;
using testing::check_boundaries;
using testing::random_f32;
using testing::VkTest;

TEST_F(VkTest, LongSumsAsBlockPartialsEqualTheF32InterpreterBitForBit) {
  auto ctx = make_context();
  const ScopedLongSumsForTesting cpu_sums(LongSums::block_partials);
  const std::vector<std::tuple<std::string, Shape, Shape>> cases = {
      {"bias_grad", {64, 32, 8, 8}, {1, 32, 1, 1}},  // W7_small's, 4096 terms in 16 blocks
      {"general257", {3, 257, 2}, {3, 1, 2}},        // strided preimages one term past a block
      {"blocks2048", {524288}, {1}},                 // the most blocks of the one-dispatch form
      {"rows4097", {3, 4097}, {3, 1}},               // contiguous rows past the long-row mode
      {"short256", {1025, 256}, {1025, 1}},          // one block: contiguous rows, left alone
      {"long257", {7, 257}, {7, 1}}};                // contiguous long rows, left alone
  GraphBuilder b("long_sums");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 610;
  for (const auto& [name, from, to] : cases) {
    b.output(name, sum_to_shape(b.input(name, {DType::f32, from}), to));
    in.emplace(name, random_f32(from, ++seed));
  }
  const auto labels = check_boundaries(ctx, b.take(), in, {.f32_bits = true});
  std::string all;
  for (const auto& [label, count] : labels) all += label + ": " + std::to_string(count) + "\n";
  SCOPED_TRACE("dispatch labels:\n" + all);
  ASSERT_TRUE(labels.contains("sum_to_shape (block partials)") && labels.contains("sum_to_shape (block sum)") &&
              labels.contains("sum_to_shape (contiguous rows)") &&
              labels.contains("sum_to_shape (contiguous long rows)"));
  EXPECT_EQ(labels.at("sum_to_shape (block partials)"), 4u);  // bias_grad, general257, blocks2048, rows4097
  EXPECT_EQ(labels.at("sum_to_shape (block sum)"), 4u);
  EXPECT_EQ(labels.at("sum_to_shape (contiguous rows)"), 1u);
  EXPECT_EQ(labels.at("sum_to_shape (contiguous long rows)"), 1u);
  EXPECT_EQ(labels.count("sum_to_shape"), 0u);  // no workgroup per output
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Planned only: CPU devices take the block partials, other devices the workgroup per output,
// unless a test forces one.
TEST(VkLongSumsPlans, RouteFollowsTheDeviceType) {
  GraphBuilder b("long_sums_route");
  TracingScope scope(b);
  b.output("y", sum_to_shape(b.input("x", {DType::f32, {64, 32, 8, 8}}), {1, 32, 1, 1}));
  const Graph g = b.take();
  const auto label = [&](DeviceType type) {
    DeviceInfo device;
    device.type = type;
    const Node& node = g.nodes().back();
    std::vector<KernelLaunch> launches{kernel_plan_table()[static_cast<std::size_t>(node.op)](g, node)};
    route_long_sums(g, device, launches);
    return launches.front().label;
  };
  EXPECT_EQ(label(DeviceType::cpu), "sum_to_shape (block partials)");
  EXPECT_NE(label(DeviceType::discrete_gpu), "sum_to_shape (block partials)");
  {
    const ScopedLongSumsForTesting forced(LongSums::block_partials);
    EXPECT_EQ(label(DeviceType::discrete_gpu), "sum_to_shape (block partials)");
  }
  const ScopedLongSumsForTesting forced(LongSums::workgroup_per_output);
  EXPECT_NE(label(DeviceType::cpu), "sum_to_shape (block partials)");
}

}  // namespace
}  // namespace tg::vk
