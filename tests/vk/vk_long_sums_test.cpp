// sum_to_shape's long preimages (layout.cpp's route_long_sums): every preimage of more than one
// 256-term block as block partials into scratch and their ordered sum, computed one invocation per
// block (CPU devices) or ROWS blocks staged a workgroup (GPUs, few outputs), each forced on
// whatever device the suite has, bit for bit against the f32 interpreter (the same additions as the
// workgroup per output, whose thresholds vk_boundary_test.cpp crosses); the modes it leaves alone;
// and the route on made-up devices.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "support/library.h"
#include "support/path_coverage.h"
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

void check_long_sums(const std::shared_ptr<Context>& ctx, LongSums form, const std::string& partials_label) {
  const ScopedLongSumsForTesting forced(form);
  const std::vector<std::tuple<std::string, Shape, Shape>> cases = {
      {"bias_grad", {64, 32, 8, 8}, {1, 32, 1, 1}},  // W7_small's, 4096 terms in 16 blocks
      {"general257", {3, 257, 2}, {3, 1, 2}},        // strided preimages one term past a block
      {"blocks2048", {524288}, {1}},                 // the most blocks of the one-dispatch form
      {"rows4097", {3, 4097}, {3, 1}},               // contiguous rows past the long-row mode
      {"short256", {1025, 256}, {1025, 1}},          // one block: contiguous rows, left alone
      {"long257", {7, 257}, {7, 1}},                 // contiguous long rows, left alone
      // Staged: 17 and 15 items (blocks x outputs) against the 16 rows of a workgroup, the last
      // block short (one term; 255 terms).
      {"items17", {17, 257}, {1, 257}},     // 257 outputs of 17 terms: short, left alone
      {"items15", {3, 5, 300}, {1, 5, 1}},  // 5 outputs of 900 terms: 4 blocks each (20 items)
      {"blocks17", {4097}, {1}},            // 17 blocks, the last of one term
      {"blocks15", {3839}, {1}},            // 15 blocks, the last of 255 terms
      // Innermost summed axes of whole blocks (256 and 512 terms of stride 1; 512 of stride 3):
      // the staged form reads them without a decode per term.
      {"whole256", {2, 3, 256}, {1, 3, 1}},
      {"whole512", {3, 5, 512}, {1, 5, 1}},
      {"whole_strided", {2, 512, 3}, {2, 1, 3}}};
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
  ASSERT_TRUE(labels.contains(partials_label) && labels.contains("sum_to_shape (block sum)") &&
              labels.contains("sum_to_shape (contiguous rows)") &&
              labels.contains("sum_to_shape (contiguous long rows)"));
  // bias_grad, general257, blocks2048, rows4097, items15, blocks17, blocks15, and the whole ones
  EXPECT_EQ(labels.at(partials_label), 10u);
  EXPECT_EQ(labels.at("sum_to_shape (block sum)"), 10u);
  EXPECT_EQ(labels.at("sum_to_shape (contiguous rows)"), 1u);
  EXPECT_EQ(labels.at("sum_to_shape (contiguous long rows)"), 1u);
  EXPECT_EQ(labels.count("sum_to_shape"), 1u);  // items17's short preimages, one invocation each
}

TEST_F(VkTest, LongSumsAsBlockPartialsEqualTheF32InterpreterBitForBit) {
  auto ctx = make_context();
  check_long_sums(ctx, LongSums::block_partials, "sum_to_shape (block partials)");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LongSumsAsStagedBlockPartialsEqualTheF32InterpreterBitForBit) {
  auto ctx = make_context();
  check_long_sums(ctx, LongSums::staged_block_partials, "sum_to_shape (staged block partials)");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
  tg::testing::write_path_coverage();  // the staged mode (the sweep forces the other two)
}

// The ordered sum of the block partials (matmul_split_sum.comp) on both sides of its staged form's
// thresholds (matmul.cpp's kStagedSum*: 64 to 2048 partials, up to 1024 outputs), bit for bit
// against the f32 interpreter: 63 and 64 blocks of 5 outputs, 1024 and 1025 outputs of 64 blocks,
// 2049 blocks of one output.
TEST_F(VkTest, LongSumsOrderedSumAtTheStagedThresholdsBitForBit) {
  auto ctx = make_context();
  const ScopedLongSumsForTesting forced(LongSums::block_partials);
  const std::vector<std::tuple<std::string, Shape, Shape>> cases = {{"parts63", {5, 63 * 256}, {5, 1}},
                                                                    {"parts64", {5, 64 * 256}, {5, 1}},
                                                                    {"outputs1024", {1024, 64 * 256}, {1024, 1}},
                                                                    {"outputs1025", {1025, 64 * 256}, {1025, 1}},
                                                                    {"parts2049", {2049 * 256}, {1}}};
  GraphBuilder b("ordered_sums");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 640;
  for (const auto& [name, from, to] : cases) {
    b.output(name, sum_to_shape(b.input(name, {DType::f32, from}), to));
    in.emplace(name, random_f32(from, ++seed));
  }
  const auto labels = check_boundaries(ctx, b.take(), in, {.f32_bits = true});
  EXPECT_EQ(labels.at("sum_to_shape (block sum)"), cases.size());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
  tg::testing::write_path_coverage();
}

// Planned only: CPU devices take the block partials; other devices the staged block partials below
// 1024 outputs and the workgroup per output from there; unless a test forces one.
TEST(VkLongSumsPlans, RouteFollowsTheDeviceTypeAndOutputs) {
  GraphBuilder b("long_sums_route");
  TracingScope scope(b);
  b.output("y", sum_to_shape(b.input("x", {DType::f32, {64, 32, 8, 8}}), {1, 32, 1, 1}));
  b.output("y1023", sum_to_shape(b.input("x1023", {DType::f32, {2, 1023, 257}}), {1, 1023, 1}));
  b.output("y1024", sum_to_shape(b.input("x1024", {DType::f32, {2, 1024, 257}}), {1, 1024, 1}));
  const Graph g = b.take();
  const auto labels = [&](DeviceType type) {
    DeviceInfo device;
    device.type = type;
    std::vector<KernelLaunch> launches;
    for (const Node& node : g.nodes())
      launches.push_back(kernel_plan_table()[static_cast<std::size_t>(node.op)](g, node));
    route_long_sums(g, device, launches);
    std::vector<std::string> out;
    for (const KernelLaunch& l : launches) out.push_back(l.label.empty() ? "workgroup per output" : l.label);
    return out;
  };
  const std::string partials = "sum_to_shape (block partials)";
  const std::string staged = "sum_to_shape (staged block partials)";
  // Preimages of 2 x 257 = 514 strided terms: 1023 outputs staged, 1024 a workgroup each.
  EXPECT_EQ(labels(DeviceType::cpu), (std::vector<std::string>{partials, partials, partials}));
  EXPECT_EQ(labels(DeviceType::discrete_gpu), (std::vector<std::string>{staged, staged, "workgroup per output"}));
  {
    const ScopedLongSumsForTesting forced(LongSums::block_partials);
    EXPECT_EQ(labels(DeviceType::discrete_gpu), (std::vector<std::string>{partials, partials, partials}));
  }
  {
    const ScopedLongSumsForTesting forced(LongSums::staged_block_partials);
    EXPECT_EQ(labels(DeviceType::cpu), (std::vector<std::string>{staged, staged, staged}));
  }
  const ScopedLongSumsForTesting forced(LongSums::workgroup_per_output);
  EXPECT_EQ(labels(DeviceType::cpu), (std::vector<std::string>(3, "workgroup per output")));
}

}  // namespace
}  // namespace tg::vk
