// The device memory of a Program: plans spread over several allocations ("blocks") give the same
// bits as one block, with resident params, writebacks, device outputs, index checks and guards
// reading and writing values in every block; a plan above the device's memory heap is refused
// before anything is allocated, naming the graph, the bytes and the heap; and Session and Training
// report the plan. Under the validation layer, so a binding or copy in the wrong block fails.
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"
#include "vk_transformer_step.h"

namespace tg::vk {
namespace {

using testing::VkTest;

const examples::TransformerConfig kSmall{.vocab = 65, .context = 16, .width = 32, .layers = 2, .heads = 4};

// W2 shrunk: one step's every output (loss, gradients, new params and state) has the same bits
// whether the plan is one block or many (a 64 KiB cap), with guards intact in every block.
TEST_F(VkTest, ManyBlocksGiveTheSameBitsAsOne) {
  auto ctx = make_context();
  const Training t = testing::compile_transformer(kSmall, 4);
  const TensorMap in = testing::transformer_step_inputs(t, kSmall.vocab);
  Program one(ctx, t.graph());
  Program many(ctx, t.graph(), {.max_block_bytes = 64 << 10});
  Program guarded(ctx, t.graph(), {.guard_bytes = 64, .max_block_bytes = 64 << 10});
  ASSERT_EQ(one.stats().block_bytes.size(), 1u);
  EXPECT_GT(many.stats().block_bytes.size(), 4u);
  for (std::uint64_t bytes : many.stats().block_bytes) EXPECT_LE(bytes, std::uint64_t{64} << 10);
  std::cout << "W2_small step: " << one.stats().device_bytes << " bytes in one block, " << many.stats().device_bytes
            << " in " << many.stats().block_bytes.size() << " blocks\n";
  const TensorMap want = one.run(in);
  testing::expect_same_bits(want, many.run(in), "64 KiB blocks");
  testing::expect_same_bits(want, many.run(in), "64 KiB blocks, replay");
  testing::expect_same_bits(want, guarded.run(in), "64 KiB blocks with guards");
  EXPECT_TRUE(guarded.check_guards().empty()) << testing::join_lines(guarded.check_guards());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Blocks of one 64-element value each (a cap below any value is raised to the largest, 256 bytes;
// smaller values share), staging buffers under the same cap: resident params written and read,
// writebacks swapping slots across blocks over several steps, a device output read on demand, and
// an index check that reads the bad index back from its block.
TEST_F(VkTest, OneBlockPerValueKeepsResidentParamsWritebacksAndChecks) {
  auto ctx = make_context();
  GraphBuilder b("per_value");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {64}});
  Tensor ids = b.input("ids", {DType::i32, {5}});
  Tensor w = b.param("w", {DType::f32, {64}});
  Tensor table = b.param("table", {DType::f32, {10, 3}});
  b.output("loss", sum(x * w));
  b.output("w.new", w - 0.5f * x);
  b.output("rows", embedding(table, ids));
  b.output("scaled", x * 3.f);
  const Graph g = b.take();
  Program program(
      ctx, g,
      {.resident_params = true, .writebacks = {{"w.new", "w"}}, .device_outputs = {"scaled"}, .max_block_bytes = 4});
  // x, w, both slots of w.new and scaled live for the whole program: a block each at least.
  EXPECT_GE(program.stats().block_bytes.size(), 5u);
  for (std::uint64_t bytes : program.stats().block_bytes) EXPECT_LE(bytes, 256u);
  // Staging under the same cap: x and ids in two upload buffers, loss, rows and the status word
  // (index check) in readback buffers of at most 256 bytes.
  EXPECT_GE(program.stats().staging_buffers, 3u);
  const HostTensor xs = testing::random_f32({64}, 1);
  std::vector<float> wv(64, 1.f);
  program.write_input("w", HostTensor::f32({64}, wv));
  program.write_input("table", testing::random_f32({10, 3}, 2));
  const HostTensor good = HostTensor::i32({5}, {0, 9, 3, 3, 7});
  for (int step = 0; step < 3; ++step) {
    const TensorMap out = program.run({{"x", xs}, {"ids", good}});
    float loss = 0.f;
    for (int i = 0; i < 64; ++i) loss += static_cast<float>(xs.at(static_cast<std::size_t>(i))) * wv[i];
    EXPECT_NEAR(out.at("loss").at(0), loss, 1e-4 * (1 + std::abs(loss))) << "step " << step;
    for (int i = 0; i < 64; ++i) wv[i] -= 0.5f * static_cast<float>(xs.at(static_cast<std::size_t>(i)));
    EXPECT_EQ(program.read_input("w").to_f32(), wv) << "step " << step;
    const HostTensor table_now = program.read_input("table");
    for (int r = 0; r < 5; ++r)
      for (int c = 0; c < 3; ++c)
        EXPECT_EQ(out.at("rows").at(static_cast<std::size_t>(3 * r + c)),
                  table_now.at(static_cast<std::size_t>(3 * good.to_f64()[static_cast<std::size_t>(r)] + c)));
  }
  const HostTensor scaled = program.read_output("scaled");
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(scaled.at(static_cast<std::size_t>(i)),
              static_cast<double>(static_cast<float>(xs.at(static_cast<std::size_t>(i))) * 3.f));
  try {
    program.run({{"x", xs}, {"ids", HostTensor::i32({5}, {0, 1, 2, 12, 4})}});
    FAIL() << "expected the index check to fire";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("12 is out of range [0, 10) at element 3"), std::string::npos) << e.what();
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// More memory than the device heap holds: refused when the program is built, before any
// allocation, naming the graph, the bytes and the heap.
TEST_F(VkTest, APlanAboveTheDeviceHeapIsRefusedBeforeAnythingIsAllocated) {
  auto ctx = make_context();
  const DeviceInfo& info = ctx->info();
  ASSERT_GT(info.device_heap_bytes, 0u);
  // Inputs as large as one binding allows, all alive for the whole program, one more than fits.
  const std::int64_t elements =
      static_cast<std::int64_t>(std::min<std::uint64_t>(info.max_storage_buffer_range, std::uint64_t{1} << 30) / 4);
  const std::uint64_t count = info.device_heap_bytes / (4 * static_cast<std::uint64_t>(elements)) + 1;
  GraphBuilder b("too_big");
  TracingScope scope(b);
  Tensor total = b.input("x0", {DType::f32, {elements}});
  for (std::uint64_t i = 1; i < count; ++i) total = total + b.input("x" + std::to_string(i), {DType::f32, {elements}});
  b.output("y", total);
  const Graph g = b.take();
  try {
    Program program(ctx, g);
    FAIL() << "expected the plan to be refused";
  } catch (const DeviceError& e) {
    FAIL() << "Vulkan was asked for the memory: " << e.what();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("graph 'too_big'"), std::string::npos) << m;
    EXPECT_NE(m.find("memory heap " + std::to_string(info.device_heap_index)), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(info.device_heap_bytes) + " bytes"), std::string::npos) << m;
  }
  EXPECT_TRUE(ctx->usable());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Session and Training report the plan: allocations, their total, and the unshared size.
TEST_F(VkTest, SessionAndTrainingReportTheirMemoryPlan) {
  auto ctx = make_context();
  const Training t = testing::compile_transformer(kSmall, 4, Backend::vulkan, ctx);
  const MemoryPlan plan = t.memory_plan();
  ASSERT_FALSE(plan.allocation_bytes.empty());
  std::uint64_t total = 0;
  for (std::uint64_t bytes : plan.allocation_bytes) total += bytes;
  EXPECT_EQ(plan.total_bytes, total);
  EXPECT_LT(plan.total_bytes, plan.unshared_bytes);
  EXPECT_NE(plan.to_string().find(std::to_string(plan.allocation_bytes.size()) + " allocation"), std::string::npos)
      << plan.to_string();
  std::cout << "W2_small training: " << plan.to_string() << "\n";
  // The interpreters allocate per value: no plan, only the unshared size.
  const Training cpu = testing::compile_transformer(kSmall, 4);
  EXPECT_TRUE(cpu.memory_plan().allocation_bytes.empty());
  EXPECT_EQ(cpu.memory_plan().total_bytes, 0u);
  EXPECT_GT(cpu.memory_plan().unshared_bytes, 0u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
