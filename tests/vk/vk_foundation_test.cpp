// The Vulkan foundation on a real device (lavapipe in CI): the context and its limits, the add
// shader end to end, device selection errors, buffer limits, the pipeline cache, device loss.
// Every test runs under the Khronos validation layer (TG_VK_VALIDATION=1 from CTest) and fails on
// any message it reports.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "tensorgrad/vk/context.h"
#include "tensorgrad/vk/shaders.h"
#include "vk/buffer.h"
#include "vk/commands.h"
#include "vk/compute.h"
#include "vk/pipeline_cache.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::ScopedEnv;
using testing::VkTest;

bool is_pow2(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

TEST_F(VkTest, ContextComesUpWithSaneLimits) {
  auto ctx = make_context();
  const DeviceInfo& info = ctx->info();
  std::cout << "device: " << info.summary() << "\n";
  EXPECT_TRUE(ctx->usable());
  EXPECT_TRUE(info.usable);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.api_version, VK_API_VERSION_1_1);
  // The spec's minimums for every Vulkan device.
  EXPECT_GE(info.max_storage_buffer_range, std::uint64_t{1} << 27);
  EXPECT_GE(info.max_memory_allocation_size, std::uint64_t{1} << 30);
  EXPECT_GE(info.max_compute_work_group_invocations, 128u);
  EXPECT_GE(info.max_compute_work_group_size[0], 128u);
  EXPECT_GE(info.max_compute_work_group_count[0], 65535u);
  EXPECT_GE(info.max_push_constants_size, 128u);
  EXPECT_TRUE(is_pow2(static_cast<std::uint32_t>(info.min_storage_buffer_offset_alignment)));
  EXPECT_TRUE(is_pow2(info.subgroup_size)) << info.subgroup_size;
  if (info.timestamps_supported) {
    EXPECT_GT(info.timestamp_period, 0.f);
  }
  EXPECT_NE(ctx->device(), VK_NULL_HANDLE);
  EXPECT_NE(ctx->queue(), VK_NULL_HANDLE);

  // With no selector, a machine without GPUs gets lavapipe ("llvmpipe" in the name), as in CI.
  const std::vector<DeviceInfo> devices = list_devices();
  ASSERT_LT(info.index, devices.size());
  EXPECT_EQ(devices[info.index].name, info.name);
  const bool any_gpu = std::any_of(devices.begin(), devices.end(), [](const DeviceInfo& d) {
    return d.usable && (d.type == DeviceType::discrete_gpu || d.type == DeviceType::integrated_gpu);
  });
  const bool any_llvmpipe = std::any_of(
      devices.begin(), devices.end(), [](const DeviceInfo& d) { return d.name.find("llvmpipe") != std::string::npos; });
  if (!std::getenv("TG_VK_DEVICE") && !any_gpu && any_llvmpipe) {
    EXPECT_NE(info.name.find("llvmpipe"), std::string::npos) << info.summary();
    EXPECT_EQ(info.type, DeviceType::cpu);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// c = a + b on the device, compared bit for bit with the CPU: an f32 add is correctly rounded.
void check_add(const std::shared_ptr<Context>& ctx, std::uint32_t n) {
  std::mt19937 rng(n);
  std::uniform_real_distribution<float> dist(-1000.f, 1000.f);
  std::vector<float> a(n), b(n), expected(n), got(n, -1.f);
  for (std::uint32_t i = 0; i < n; ++i) {
    a[i] = dist(rng);
    b[i] = dist(rng);
    expected[i] = a[i] + b[i];
  }
  const VkDeviceSize bytes = VkDeviceSize{n} * sizeof(float);
  Buffer da(ctx, bytes, MemoryUse::device), db(ctx, bytes, MemoryUse::device), dc(ctx, bytes, MemoryUse::device);
  upload(da, std::as_bytes(std::span(a)));
  upload(db, std::as_bytes(std::span(b)));

  ComputePipeline add(ctx, "add", 3, sizeof(std::uint32_t));
  DescriptorPool pool(ctx, 1, 3);
  const BufferBinding bindings[] = {{&da}, {&db}, {&dc}};
  const VkDescriptorSet set = pool.allocate(add, bindings);
  CommandBuffer cmd(ctx);
  cmd.begin();
  record_dispatch(cmd.handle(), add, set, std::as_bytes(std::span(&n, 1)), {group_count_x(*ctx, n, 256), 1, 1});
  record_compute_barrier(cmd.handle());
  cmd.end();
  submit_and_wait(ctx, cmd.handle(), "the add dispatch");
  download(dc, std::as_writable_bytes(std::span(got)));

  std::size_t mismatches = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(expected[i])) {
      if (++mismatches <= 5) ADD_FAILURE() << "c[" << i << "] = " << got[i] << ", expected " << expected[i];
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << n;
}

// The harness must be able to fail: misuse the API once and see the layer report it.
TEST_F(VkTest, ValidationLayerReportsMisuse) {
  auto ctx = make_context();
  if (!ctx->validation_enabled()) GTEST_SKIP() << "validation is off (set TG_VK_VALIDATION=1)";
  // A struct that does not belong in VkFenceCreateInfo's pNext chain: invalid usage that every
  // driver ignores, so the call itself is harmless.
  VkMemoryBarrier stray{};
  stray.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  VkFenceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  info.pNext = &stray;
  VkFence fence = VK_NULL_HANDLE;
  ctx->check(vkCreateFence(ctx->device(), &info, nullptr, &fence), "creating a fence with a stray pNext");
  vkDestroyFence(ctx->device(), fence, nullptr);
  const std::vector<std::string> messages = ctx->validation_messages();
  ASSERT_FALSE(messages.empty());
  EXPECT_NE(messages[0].find("[error] VUID-VkFenceCreateInfo-pNext"), std::string::npos) << messages[0];
  ctx->clear_validation_messages();
  forget_validation_messages();
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Synchronization validation is on too: a dispatch reading what the previous one wrote, with no
// barrier between them, is the bug a record-once executor is most likely to have.
TEST_F(VkTest, SynchronizationValidationReportsAMissingBarrier) {
  auto ctx = make_context();
  if (!ctx->validation_enabled()) GTEST_SKIP() << "validation is off (set TG_VK_VALIDATION=1)";
  Buffer x(ctx, 256, MemoryUse::device), y(ctx, 256, MemoryUse::device), z(ctx, 256, MemoryUse::device);
  ComputePipeline add(ctx, "add", 3, 4);
  DescriptorPool pool(ctx, 2, 6);
  const BufferBinding produce[] = {{&x}, {&y}, {&z}};  // z = x + y
  const BufferBinding consume[] = {{&z}, {&y}, {&x}};  // x = z + y
  const VkDescriptorSet first = pool.allocate(add, produce);
  const VkDescriptorSet second = pool.allocate(add, consume);
  const std::uint32_t n = 64;
  CommandBuffer cmd(ctx);
  cmd.begin();
  record_dispatch(cmd.handle(), add, first, std::as_bytes(std::span(&n, 1)), {1, 1, 1});
  record_dispatch(cmd.handle(), add, second, std::as_bytes(std::span(&n, 1)), {1, 1, 1});  // no barrier
  cmd.end();
  submit_and_wait(ctx, cmd.handle(), "two unsynchronized dispatches");
  const std::vector<std::string> messages = ctx->validation_messages();
  const std::string all = testing::join_lines(messages);
  EXPECT_NE(all.find("SYNC-HAZARD-READ-AFTER-WRITE"), std::string::npos) << all;
  ctx->clear_validation_messages();
  forget_validation_messages();
}

TEST_F(VkTest, AddMatchesCpuOn1000Elements) {
  auto ctx = make_context();
  check_add(ctx, 1000);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, AddMatchesCpuOn1000003Elements) {
  auto ctx = make_context();
  check_add(ctx, 1'000'003);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, UploadAndDownloadAtOffsets) {
  auto ctx = make_context();
  Buffer buffer(ctx, 64, MemoryUse::device);
  std::vector<std::uint8_t> zeros(64, 0), bytes(16), out(64);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i + 1);
  upload(buffer, std::as_bytes(std::span(zeros)));
  upload(buffer, std::as_bytes(std::span(bytes)), 20);
  download(buffer, std::as_writable_bytes(std::span(out)));
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i], (i >= 20 && i < 36) ? bytes[i - 20] : 0) << i;
  }
  std::vector<std::uint8_t> tail(8);
  download(buffer, std::as_writable_bytes(std::span(tail)), 28);
  EXPECT_EQ(tail[0], 9);
  EXPECT_THROW(upload(buffer, std::as_bytes(std::span(bytes)), 56), Error);
  EXPECT_THROW(download(buffer, std::as_writable_bytes(std::span(tail)), 60), Error);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, SelectorMatchingNothingThrowsNoDeviceErrorListingDevices) {
  ContextOptions options;
  options.device = "no-such-device-xyz";
  try {
    make_context(options);
    FAIL() << "expected NoDeviceError";
  } catch (const NoDeviceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("ContextOptions::device='no-such-device-xyz'"), std::string::npos) << message;
    ASSERT_FALSE(e.available().empty());
    for (const DeviceInfo& d : e.available()) EXPECT_NE(message.find(d.name), std::string::npos) << message;
  }
  // The environment variable is the default selector, and the message names it.
  ScopedEnv env("TG_VK_DEVICE", "also-no-such-device");
  try {
    make_context();
    FAIL() << "expected NoDeviceError";
  } catch (const NoDeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("TG_VK_DEVICE='also-no-such-device'"), std::string::npos) << e.what();
  }
}

TEST_F(VkTest, SelectorTakesAnIndexOrACaseInsensitiveNameSubstring) {
  const std::vector<DeviceInfo> devices = list_devices();
  const auto usable = std::find_if(devices.begin(), devices.end(), [](const DeviceInfo& d) { return d.usable; });
  ASSERT_NE(usable, devices.end());
  ContextOptions by_index;
  by_index.device = std::to_string(usable->index);
  auto ctx = make_context(by_index);
  EXPECT_EQ(ctx->info().index, usable->index);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);

  ContextOptions by_name;
  std::string upper = usable->name.substr(0, 4);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  by_name.device = upper;
  auto ctx2 = make_context(by_name);
  EXPECT_NE(ctx2->info().name.find(usable->name.substr(0, 4)), std::string::npos);
  EXPECT_NO_VALIDATION_MESSAGES(ctx2);
}

TEST_F(VkTest, OversizeBuffersThrowNamingTheLimitBeforeCallingVulkan) {
  auto ctx = make_context();
  const DeviceInfo& info = ctx->info();
  // A storage buffer one byte above what one allocation can hold. (A buffer larger than
  // maxStorageBufferRange is fine: each binding's range is checked, by DispatchArgumentsAreChecked.)
  const std::uint64_t limit = info.max_memory_allocation_size;
  try {
    Buffer buffer(ctx, limit + 1, MemoryUse::device);
    FAIL() << "expected an error";
  } catch (const DeviceError& e) {
    FAIL() << "Vulkan was called: " << e.what();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("maxMemoryAllocationSize"), std::string::npos);
    EXPECT_NE(message.find(std::to_string(limit) + " bytes"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(limit + 1) + " bytes"), std::string::npos) << message;
  }
  // Staging buffers are not storage buffers, but still one allocation each.
  try {
    Buffer staging(ctx, info.max_memory_allocation_size + 1, MemoryUse::readback);
    FAIL() << "expected an error";
  } catch (const DeviceError& e) {
    FAIL() << "Vulkan was called: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("maxMemoryAllocationSize, " + std::to_string(info.max_memory_allocation_size)),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Buffer(ctx, 0, MemoryUse::device), Error);
  EXPECT_TRUE(ctx->usable());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, UnknownShaderThrows) {
  EXPECT_THROW(shader_spirv("no_such_shader"), Error);
  try {
    shader_spirv("no_such_shader");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add"), std::string::npos) << "lists the known shaders: " << e.what();
  }
  const std::vector<std::string_view> names = shader_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "add"), names.end());
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  ASSERT_GE(shader_spirv("add").size(), 5u);
  EXPECT_EQ(shader_spirv("add")[0], 0x07230203u);  // the SPIR-V magic number

  auto ctx = make_context();
  EXPECT_THROW(ComputePipeline(ctx, "no_such_shader", 1, 0), Error);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, DispatchArgumentsAreChecked) {
  auto ctx = make_context();
  ComputePipeline add(ctx, "add", 3, 4);
  EXPECT_THROW(ComputePipeline(ctx, "add", 3, 6), Error);  // not a multiple of 4
  Buffer buffer(ctx, 1024, MemoryUse::device);
  Buffer staging(ctx, 1024, MemoryUse::upload);
  DescriptorPool pool(ctx, 4, 12);
  const BufferBinding two[] = {{&buffer}, {&buffer}};
  EXPECT_THROW(pool.allocate(add, two), Error);
  const BufferBinding misaligned[] = {{&buffer}, {&buffer, 1}, {&buffer}};
  EXPECT_THROW(pool.allocate(add, misaligned), Error);
  const BufferBinding host[] = {{&buffer}, {&staging}, {&buffer}};
  EXPECT_THROW(pool.allocate(add, host), Error);
  const BufferBinding ok[] = {{&buffer}, {&buffer, 0, 512}, {&buffer}};
  const VkDescriptorSet set = pool.allocate(add, ok);
  // A buffer may exceed maxStorageBufferRange (the plan's blocks do); a binding's range may not.
  const std::uint64_t range = ctx->info().max_storage_buffer_range;
  if (range + 8 <= ctx->info().max_memory_allocation_size && range <= (std::uint64_t{1} << 30)) {
    Buffer large(ctx, range + 8, MemoryUse::device);
    const BufferBinding at_limit[] = {{&large, 0, range}, {&large, 0, range}, {&large, 0, range}};
    EXPECT_NO_THROW(pool.allocate(add, at_limit));
    const BufferBinding past_limit[] = {{&large, 0, range}, {&large, 0, range + 4}, {&large, 0, range}};
    EXPECT_THROW(pool.allocate(add, past_limit), Error);
  }
  CommandBuffer cmd(ctx);
  cmd.begin();
  const std::uint64_t eight = 8;
  EXPECT_THROW(record_dispatch(cmd.handle(), add, set, std::as_bytes(std::span(&eight, 1)), {1, 1, 1}), Error);
  cmd.end();
  const std::uint64_t too_many = std::uint64_t{ctx->info().max_compute_work_group_count[0]} * 256 + 1;
  EXPECT_THROW(group_count_x(*ctx, too_many, 256), Error);
  EXPECT_EQ(group_count_x(*ctx, 257, 256), 2u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, FenceWaitTimesOutWithDeviceError) {
  auto ctx = make_context();
  Fence fence(ctx);  // never submitted, so never signaled
  try {
    fence.wait(std::chrono::milliseconds(1), "a fence nobody signals");
    FAIL() << "expected a timeout";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.result(), VK_TIMEOUT);
    EXPECT_NE(std::string(e.what()).find("VK_TIMEOUT"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(ctx->usable());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Submissions reuse pooled fences (creating one per submission cost ~0.5 ms on NVIDIA's driver). A
// fence must come back unsignaled, or the next submission's wait would return before its work ran.
TEST_F(VkTest, SubmissionsReuseUnsignaledFences) {
  auto ctx = make_context();
  Buffer buffer(ctx, 256, MemoryUse::device);
  VkFence first = VK_NULL_HANDLE;
  {
    Fence fence(ctx);
    first = fence.handle();
  }
  for (std::uint32_t round = 0; round < 3; ++round) {
    CommandBuffer cmd(ctx);
    cmd.begin();
    vkCmdFillBuffer(cmd.handle(), buffer.handle(), 0, 256, round);
    cmd.end();
    submit_and_wait(ctx, cmd.handle(), "a fill");
    std::vector<std::byte> bytes(4);
    download(buffer, bytes);
    std::uint32_t word = 0;
    std::memcpy(&word, bytes.data(), 4);
    EXPECT_EQ(word, round) << "the wait returned before the fill ran";
    // The pool hands back the same fence, reset.
    Fence next(ctx);
    EXPECT_EQ(next.handle(), first);
    EXPECT_EQ(vkGetFenceStatus(ctx->device(), next.handle()), VK_NOT_READY);
  }
  // Two fences at once are two fences.
  Fence a(ctx), b(ctx);
  EXPECT_NE(a.handle(), b.handle());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, DeviceLostMakesTheContextUnusable) {
  auto ctx = make_context();
  ComputePipeline add(ctx, "add", 3, 4);  // created before the loss, destroyed after it
  Buffer before(ctx, 256, MemoryUse::device);
  // Lavapipe cannot lose its device; the same path a real VK_ERROR_DEVICE_LOST takes is driven here.
  try {
    ctx->check(VK_ERROR_DEVICE_LOST, "a simulated submission");
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.result(), VK_ERROR_DEVICE_LOST);
    EXPECT_EQ(e.result_name(), "VK_ERROR_DEVICE_LOST");
  }
  EXPECT_FALSE(ctx->usable());
  try {
    Buffer after(ctx, 256, MemoryUse::device);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.result(), VK_ERROR_DEVICE_LOST);
    EXPECT_NE(std::string(e.what()).find("a simulated submission"), std::string::npos) << e.what();
  }
  std::vector<std::byte> bytes(16);
  EXPECT_THROW(upload(before, bytes), DeviceError);
  EXPECT_THROW(ComputePipeline(ctx, "add", 3, 4), DeviceError);
  EXPECT_THROW(CommandBuffer{ctx}, DeviceError);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
