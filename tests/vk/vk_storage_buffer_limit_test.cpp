// Devices that allow few storage buffers per dispatch (maxPerStageDescriptorStorageBuffers: Vulkan
// guarantees only 4). ContextOptions::max_storage_buffers_per_dispatch builds programs as for such
// a device: below the fused kernel's 16 bindings, fusion is off and the per-op kernels give the same
// bits; a launch that needs more buffers than allowed is refused when the Program is built, with an
// error naming the kernel, the op, the call site and both counts.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
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

TEST_F(VkTest, FewStorageBuffersPerDispatchTurnFusionOff) {
  auto wide = make_context();
  auto narrow = make_context({.max_storage_buffers_per_dispatch = 15});
  EXPECT_EQ(narrow->info().max_per_stage_storage_buffers, 15u);
  EXPECT_GE(wide->info().max_per_stage_storage_buffers, 16u) << "lavapipe and desktop GPUs allow far more";
  // A cap above the device's own limit changes nothing.
  auto capped_high = make_context({.max_storage_buffers_per_dispatch = 0xffffffffu});
  EXPECT_EQ(capped_high->info().max_per_stage_storage_buffers, wide->info().max_per_stage_storage_buffers);

  GraphBuilder b("fusable");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {64, 32}});
  const Tensor y = b.input("y", {DType::f32, {64, 32}});
  const Tensor bias = b.input("bias", {DType::f32, {32}});
  b.output("z", relu(x * y + bias));
  const Graph g = b.take();
  const TensorMap in{{"x", random_f32({64, 32}, 1)}, {"y", random_f32({64, 32}, 2)}, {"bias", random_f32({32}, 3)}};

  Program fused(wide, g);
  Program per_op(narrow, g);
  EXPECT_EQ(fused.stats().dispatches, 1u);
  EXPECT_EQ(per_op.stats().dispatches, 3u);
  const HostTensor a = fused.run(in).at("z"), c = per_op.run(in).at("z");
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(static_cast<float>(a.at(i))),
              std::bit_cast<std::uint32_t>(static_cast<float>(c.at(i))))
        << "z[" << i << "]";
  }
  testing::check_against_oracle(narrow, g, in, {.otherwise = std::nullopt});
  EXPECT_NO_VALIDATION_MESSAGES(narrow);
}

TEST_F(VkTest, ALaunchAboveTheStorageBufferLimitIsRefusedByName) {
  auto ctx = make_context({.max_storage_buffers_per_dispatch = 4});
  GraphBuilder b("wide_concat");
  TracingScope scope(b);
  std::vector<Tensor> parts;
  for (int k = 0; k < 8; ++k) parts.push_back(b.input("p" + std::to_string(k), {DType::f32, {2, 3}}));
  b.output("all", concat(parts, 0));  // 8 inputs and the output in one dispatch: 9 buffers
  const Graph g = b.take();
  try {
    Program program(ctx, g);
    FAIL() << "a 9-buffer concat was accepted under a limit of 4";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* part : {"'structure'", "'concat'", "graph 'wide_concat'", "binds 9 storage buffers",
                             "allows 4 per dispatch", "maxPerStageDescriptorStorageBuffers", ".cpp:"}) {
      EXPECT_NE(message.find(part), std::string::npos) << "missing " << part << " in: " << message;
    }
  }

  // Three buffers fit: an add runs under the same limit.
  GraphBuilder b2("narrow_add");
  TracingScope scope2(b2);
  const Tensor x = b2.input("x", {DType::f32, {4}});
  b2.output("y", x + x);
  Program add(ctx, b2.take());
  EXPECT_EQ(add.run({{"x", HostTensor::f32({4}, {1, 2, 3, 4})}}).at("y").to_f64(), (std::vector<double>{2, 4, 6, 8}));
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
