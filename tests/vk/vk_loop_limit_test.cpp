// lavapipe's per-invocation loop limit (src/vk/kernels/kernels.h): llvmpipe ends every loop of a
// shader invocation after 65535 passes in total and the run silently returns a wrong result.
// Issue 12's regression sizes (a full sum of ones right at 8,385,500, n/2 at 8,385,900 and 65,526
// at 2^23; the max of ones with a 7 in the last slot 1), every reduce op on a large vector against
// the oracle, the loop passes every planner declares (no device: planned at sizes lavapipe can
// hold), and the refusal of a launch that could pass the limit, naming the kernel, op and call site.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "property/graph_gen.h"
#include "support/library.h"
#include "support/op_seed.h"
#include "tensorgrad/ir/ops/ids/image.h"
#include "tensorgrad/ir/ops/ids/indexing.h"
#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/ir/ops/ids/losses.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "tensorgrad/ir/ops/ids/reduce.h"
#include "tensorgrad/ir/ops/ids/softmax.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::check_against_oracle;
using testing::random_f32;
using testing::VkTest;

// How many of a run's dispatches carry `label` (the split paths label theirs).
std::size_t dispatches_labelled(Program& program, const TensorMap& in, const std::string& label) {
  (void)program.run(in);
  std::size_t count = 0;
  for (const DispatchTiming& t : program.timings()) count += t.op == label ? 1 : 0;
  return count;
}

HostTensor ones_with(std::int64_t n, double last) {
  std::vector<double> v(static_cast<std::size_t>(n), 1.0);
  v.back() = last;
  return HostTensor::of({DType::f32, {n}}, std::move(v));
}

TEST_F(VkTest, LoopLimitSumOfOnesIsExactAtTheIssueSizes) {
  auto ctx = make_context();
  for (const std::int64_t n : {8385500, 8385900, 8388608}) {
    SCOPED_TRACE("n " + std::to_string(n));
    GraphBuilder b("sum_of_ones");
    TracingScope scope(b);
    b.output("sum", sum(b.input("x", {DType::f32, {n}})));
    Program program(ctx, b.take(), {.timestamps = true});
    const TensorMap in{{"x", ones_with(n, 1.0)}};
    EXPECT_EQ(dispatches_labelled(program, in, "sum (chunks)"), 1u);  // split across workgroups
    EXPECT_EQ(program.run(in).at("sum").to_f64(), std::vector<double>{static_cast<double>(n)});  // exact in f32
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// The extremum in the last slot lies in the last chunk, which one workgroup per row never reached.
TEST_F(VkTest, LoopLimitExtremaInTheLastSlotOf2To23) {
  auto ctx = make_context();
  constexpr std::int64_t n = std::int64_t{1} << 23;
  GraphBuilder b("last_slot");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {n}});
  Tensor y = b.input("y", {DType::f32, {n}});
  b.output("max", max(x));
  b.output("argmax", argmax(x));
  b.output("sum", sum(x));
  b.output("mean", mean(x));
  b.output("min", min(y));
  b.output("argmin", argmin(y));
  Program program(ctx, b.take());
  const TensorMap out = program.run({{"x", ones_with(n, 7.0)}, {"y", ones_with(n, -3.0)}});
  EXPECT_EQ(out.at("max").at(0), 7.0);
  EXPECT_EQ(out.at("argmax").at(0), static_cast<double>(n - 1));
  EXPECT_EQ(out.at("sum").at(0), static_cast<double>(n + 6));           // exact below 2^24
  EXPECT_EQ(out.at("mean").at(0), 1.0 + 6.0 / static_cast<double>(n));  // 1 + 6 * 2^-23, an f32
  EXPECT_EQ(out.at("min").at(0), -3.0);
  EXPECT_EQ(out.at("argmin").at(0), static_cast<double>(n - 1));
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Random values one past 2^23 (a short last chunk), with the extremum tied in two chunks (the first
// wins) and, in a second input, NaN in two chunks (the first NaN wins; max and min are NaN).
TEST_F(VkTest, LoopLimitEveryReduceOpOnALargeVectorMatchesTheOracle) {
  auto ctx = make_context();
  constexpr std::int64_t n = (std::int64_t{1} << 23) + 1;
  GraphBuilder b("large_vector");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {n}});
  Tensor z = b.input("z", {DType::f32, {n}});
  b.output("sum", sum(x));
  b.output("mean", mean(x));
  b.output("max", max(x));
  b.output("min", min(x));
  b.output("argmax", argmax(x));
  b.output("argmin", argmin(x));
  b.output("nan_max", max(z));
  b.output("nan_argmax", argmax(z));
  b.output("nan_argmin", argmin(z));
  const Graph g = b.take();
  HostTensor xs = random_f32({n}, 17);
  for (const std::int64_t at : {3 * 8192 + 5, 700 * 8192 + 1}) xs.set(static_cast<std::size_t>(at), 9.0);
  for (const std::int64_t at : {5 * 8192 + 7, 600 * 8192}) xs.set(static_cast<std::size_t>(at), -9.0);
  HostTensor zs = random_f32({n}, 18);
  for (const std::int64_t at : {900 * 8192 + 3, 2 * 8192 + 8191})
    zs.set(static_cast<std::size_t>(at), std::numeric_limits<double>::quiet_NaN());
  check_against_oracle(ctx, g, {{"x", xs}, {"z", zs}},
                       {.tolerance = {{"argmax", 0.0}, {"argmin", 0.0}, {"nan_argmax", 0.0}, {"nan_argmin", 0.0}},
                        .otherwise = std::nullopt,
                        .guards = false});
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// ---- the refusal ----

void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
}

TEST_F(VkTest, LoopLimitALaunchPastTheLimitIsRefusedByName) {
  auto ctx = make_context();
  GraphBuilder b("long_rows");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {4, 5000}});
  b.output("s", sum(x, 1));  // a workgroup per row: about 20 loop passes per invocation
  const Graph g = b.take();
  {
    const ScopedLoopLimitForTesting limit(10);
    try {
      Program program(ctx, g);
      FAIL() << "a launch above a loop limit of 10 was accepted";
    } catch (const Error& e) {
      expect_mentions(e.what(), {"Vulkan kernel 'reduce' for 'sum'", "f32[4,5000]", "graph 'long_rows'",
                                 ".cpp:", "lavapipe's 65535-iteration loop limit"});
    }
  }
  // A node's later dispatches are checked too: a loss mean over 8193 rows computes the row losses
  // (about 30 passes), then splits their sum (about 50 passes in reduce_split's chunk pass).
  {
    GraphBuilder b2("split_loss");
    TracingScope scope2(b2);
    b2.output("loss", nll_loss(b2.input("x", {DType::f32, {8193, 3}}), b2.input("t", {DType::i32, {8193}})));
    const ScopedLoopLimitForTesting limit(40);
    try {
      Program program(ctx, b2.take());
      FAIL() << "a split sum above a loop limit of 40 was accepted";
    } catch (const Error& e) {
      expect_mentions(e.what(), {"Vulkan kernel 'reduce_split' for 'nll_loss'", "f32[8193,3]", "graph 'split_loss'"});
    }
  }
  // Without a limit the same graph builds and runs.
  const ScopedLoopLimitForTesting none(std::nullopt);
  check_against_oracle(ctx, g, {{"x", random_f32({4, 5000}, 3)}}, {.otherwise = std::nullopt, .guards = false});
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// What the splits cannot remove: a pooling gradient whose every input element re-finds the argmax
// of 64 x 64 windows of 64 x 64 taps loops about 114,000 times per invocation; lavapipe refuses it
// when the Program is built.
TEST_F(VkTest, LoopLimitLavapipeRefusesAPoolingGradientWithHugeWindows) {
  auto ctx = make_context();
  if (!device_loop_limit(ctx->info())) GTEST_SKIP() << ctx->info().name << " has no loop limit";
  GraphBuilder b("huge_windows");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {1, 1, 127, 127}});
  Tensor g = b.input("g", {DType::f32, {1, 1, 64, 64}});
  b.output("dx", max_pool2d_grad(x, g, 64, 1, 0));
  try {
    Program program(ctx, b.take());
    FAIL() << "a launch above lavapipe's loop limit was accepted";
  } catch (const Error& e) {
    expect_mentions(e.what(), {"Vulkan kernel 'max_pool2d_grad' for 'max_pool2d_grad'", "f32[1,1,127,127]",
                               "graph 'huge_windows'", ".cpp:", "lavapipe's 65535-iteration loop limit"});
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// ---- no device: which devices have the limit, what the planners declare ----

TEST(VkLoopLimit, OnlyLlvmpipeHasTheLimit) {
  DeviceInfo lavapipe;
  lavapipe.name = "llvmpipe (LLVM 15.0.6, 256 bits)";
  EXPECT_EQ(device_loop_limit(lavapipe), kLlvmpipeLoopLimit);
  DeviceInfo by_driver;
  by_driver.name = "some CPU device";
  by_driver.driver_name = "llvmpipe";
  EXPECT_EQ(device_loop_limit(by_driver), kLlvmpipeLoopLimit);
  DeviceInfo gpu;
  gpu.name = "NVIDIA H200";
  gpu.driver_name = "NVIDIA";
  EXPECT_EQ(device_loop_limit(gpu), std::nullopt);
  {
    const ScopedLoopLimitForTesting limit(7);
    EXPECT_EQ(device_loop_limit(gpu), 7u);
  }
  EXPECT_EQ(device_loop_limit(gpu), std::nullopt);
}

// Plans `op` on inputs of `types` (no device, no data) and returns its launch.
KernelLaunch plan(OpId op, const std::vector<TensorType>& types, const Attrs& attrs = {}) {
  GraphBuilder b("plan");
  std::vector<Tensor> operands;
  for (std::size_t i = 0; i < types.size(); ++i) operands.push_back(b.input("x" + std::to_string(i), types[i]));
  b.output("y", b.emit(op, operands, attrs, SourceLoc{"vk_loop_limit_test", 1, 0}));
  const Graph g = b.take();
  return kernel_plan_table()[static_cast<std::size_t>(op)](g, g.nodes().back());
}

std::uint64_t most_passes(const KernelLaunch& launch) {
  std::uint64_t most = 0;
  for (const KernelLaunch* step : launch_steps(launch)) most = std::max(most, step->loop_passes);
  return most;
}

// Every op's samples (30 each): each dispatch that runs declares its loop passes.
TEST(VkLoopLimit, EveryKernelDeclaresItsLoopPasses) {
  std::size_t planned = 0;
  for (const OpId op : all_ops()) {
    if (!has_kernel(op)) continue;
    for (std::uint64_t seed = 1; seed <= 30; ++seed) {
      SampleRng rng(seed * 104729 + tg::testing::op_seed(op));
      const auto sample = op_def(op).samples(rng, std::nullopt);
      if (!sample) continue;
      const KernelLaunch launch = plan(op, sample->inputs, sample->attrs);
      ++planned;
      for (const KernelLaunch* step : launch_steps(launch)) {
        if (step->items == 0) continue;
        EXPECT_GT(step->loop_passes, 0u) << op_name(op) << " (" << step->shader << ") seed " << seed;
        EXPECT_LE(step->loop_passes, kLlvmpipeLoopLimit) << op_name(op) << " seed " << seed;
      }
    }
  }
  EXPECT_GT(planned, 1000u);
}

// At the largest sizes one lavapipe value holds (2^25 f32 elements), the loops the splits serve
// stay far below the limit: reduce and softmax rows, the losses' sums, sum_to_shape's preimages,
// matmul's K, convolution and scatter_add sums.
TEST(VkLoopLimit, LongLoopsAtLavapipeSizesAreSplit) {
  constexpr std::int64_t n = std::int64_t{1} << 25;
  const TensorType vec{DType::f32, {n}};
  const TensorType row{DType::f32, {1, n}};
  const Attrs all_axes{{"axes", std::vector<std::int64_t>{0}}, {"keep_dims", false}};
  EXPECT_LE(most_passes(plan(op::Sum, {vec}, all_axes)), kLoopBudget);
  EXPECT_LE(most_passes(plan(op::Argmax, {vec}, {{"axis", std::int64_t{0}}, {"keep_dims", false}})), kLoopBudget);
  EXPECT_LE(most_passes(plan(op::Softmax, {row}, {{"axis", std::int64_t{1}}})), kLoopBudget);
  EXPECT_LE(most_passes(plan(op::LogSoftmax, {{DType::f32, {n, 1}}}, {{"axis", std::int64_t{0}}})), kLoopBudget);
  EXPECT_LE(most_passes(plan(op::NllLoss, {{DType::f32, {n / 2, 2}}, {DType::i32, {n / 2}}},
                             {{"reduction", std::string("mean")}})),
            kLoopBudget);
  EXPECT_LE(most_passes(plan(op::SumToShape, {{DType::f32, {3 * (n / 4)}}}, {{"shape", std::vector<std::int64_t>{1}}})),
            kLoopBudget);
  EXPECT_LE(most_passes(plan(op::SumToShape, {{DType::f32, {n / 2, 2}}}, {{"shape", std::vector<std::int64_t>{1, 2}}})),
            kLoopBudget);
  EXPECT_LE(most_passes(plan(op::Matmul, {row, {DType::f32, {n, 1}}})), kLoopBudget);
  EXPECT_LE(most_passes(plan(op::Matmul, {{DType::f32, {1, n - 1}}, {DType::f32, {n - 1, 1}}})), kLoopBudget);
  const TensorType image{DType::f32, {1, 1, 4096, 4096}};
  EXPECT_LE(most_passes(plan(op::Conv2dWeightGrad, {image, image},
                             {{"dilation", std::vector<std::int64_t>{1, 1}},
                              {"groups", std::int64_t{1}},
                              {"kernel_h", std::int64_t{1}},
                              {"kernel_w", std::int64_t{1}},
                              {"padding", std::vector<std::int64_t>{0, 0}},
                              {"stride", std::vector<std::int64_t>{1, 1}}})),
            kLoopBudget);
  EXPECT_LE(most_passes(plan(op::ScatterAdd, {{DType::f32, {n / 2, 1}}, {DType::i32, {n / 2, 1}}},
                             {{"axis", std::int64_t{0}}, {"size", std::int64_t{3}}})),
            kLoopBudget);
}

}  // namespace
}  // namespace tg::vk
