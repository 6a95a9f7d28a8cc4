#pragma once
// Internal: command buffers, fences and submit-and-wait. Every submission waits on a fence with a
// timeout, so a hung device becomes a DeviceError (VK_TIMEOUT) instead of a hung process.
#include <vulkan/vulkan.h>

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "tensorgrad/vk/context.h"

namespace tg::vk {

// Long enough for any single step of a real model on lavapipe, short enough to notice a hang.
inline constexpr std::chrono::nanoseconds k_default_submit_timeout = std::chrono::seconds(120);

// A primary command buffer from the context's pool; freed on destruction.
class CommandBuffer {
 public:
  explicit CommandBuffer(std::shared_ptr<Context> context);
  CommandBuffer(CommandBuffer&& other) noexcept;
  CommandBuffer& operator=(CommandBuffer&& other) noexcept;
  CommandBuffer(const CommandBuffer&) = delete;
  CommandBuffer& operator=(const CommandBuffer&) = delete;
  ~CommandBuffer();

  VkCommandBuffer handle() const { return handle_; }
  // Starts recording (resetting anything recorded before); `one_time` lets the driver skip work
  // that only pays off for replays.
  void begin(bool one_time = true);
  void end();

 private:
  void release() noexcept;
  std::shared_ptr<Context> context_;
  VkCommandBuffer handle_ = VK_NULL_HANDLE;
};

// A fence leased from the context's pool (Context::take_fence): returned to it on destruction when
// its submission completed or never happened; destroyed otherwise (a submission that timed out or
// failed may still signal it).
class Fence {
 public:
  explicit Fence(std::shared_ptr<Context> context);
  Fence(const Fence&) = delete;
  Fence& operator=(const Fence&) = delete;
  ~Fence();

  VkFence handle() const { return handle_; }
  // Call after a successful vkQueueSubmit with this fence.
  void mark_submitted() { pending_ = true; }
  // Waits until signaled; VK_TIMEOUT after `timeout` becomes a DeviceError naming `operation`.
  void wait(std::chrono::nanoseconds timeout, std::string_view operation);

 private:
  std::shared_ptr<Context> context_;
  VkFence handle_ = VK_NULL_HANDLE;
  bool pending_ = false;  // submitted and not yet seen signaled
};

// Submits one recorded command buffer to the context's queue and waits for it. A timeout makes the
// context unusable (the submission may still be running) and throws DeviceError with VK_TIMEOUT.
void submit_and_wait(const std::shared_ptr<Context>& context, VkCommandBuffer commands, std::string_view operation,
                     std::chrono::nanoseconds timeout = k_default_submit_timeout);

// Submits `commands` to the context's queue in order, one submission (and fence) each, then waits
// for them in order and calls `completed(i)` once the i-th is done, while the device runs the later
// ones. Whatever fails first (a submission, a wait, `completed`) propagates after every submitted
// buffer has completed (or the context became unusable), so nothing they use is freed early.
// Timeouts as submit_and_wait.
void submit_in_order(const std::shared_ptr<Context>& context, std::span<const VkCommandBuffer> commands,
                     std::string_view operation, const std::function<void(std::size_t)>& completed,
                     std::chrono::nanoseconds timeout = k_default_submit_timeout);

}  // namespace tg::vk
