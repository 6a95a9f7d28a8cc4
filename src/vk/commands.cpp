// Command buffers, fences, submit-and-wait.
#include "vk/commands.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tg::vk {

CommandBuffer::CommandBuffer(std::shared_ptr<Context> context) : context_(std::move(context)) {
  context_->require_usable("allocating a command buffer");
  VkCommandBufferAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  info.commandPool = context_->command_pool();
  info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  info.commandBufferCount = 1;
  context_->check(vkAllocateCommandBuffers(context_->device(), &info, &handle_), "allocating a command buffer");
}

CommandBuffer::CommandBuffer(CommandBuffer&& other) noexcept
    : context_(std::move(other.context_)), handle_(std::exchange(other.handle_, VK_NULL_HANDLE)) {}

CommandBuffer& CommandBuffer::operator=(CommandBuffer&& other) noexcept {
  if (this != &other) {
    release();
    context_ = std::move(other.context_);
    handle_ = std::exchange(other.handle_, VK_NULL_HANDLE);
  }
  return *this;
}

CommandBuffer::~CommandBuffer() { release(); }

void CommandBuffer::release() noexcept {
  if (handle_ == VK_NULL_HANDLE) return;
  context_->drain_if_unusable();
  vkFreeCommandBuffers(context_->device(), context_->command_pool(), 1, &handle_);
  handle_ = VK_NULL_HANDLE;
}

void CommandBuffer::begin(bool one_time) {
  context_->require_usable("recording a command buffer");
  VkCommandBufferBeginInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  info.flags = one_time ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0;
  context_->check(vkBeginCommandBuffer(handle_, &info), "beginning a command buffer");
}

void CommandBuffer::end() { context_->check(vkEndCommandBuffer(handle_), "ending a command buffer"); }

Fence::Fence(std::shared_ptr<Context> context) : context_(std::move(context)) {
  context_->require_usable("creating a fence");
  handle_ = context_->take_fence();
}

Fence::~Fence() {
  if (handle_ == VK_NULL_HANDLE) return;
  if (!pending_ && context_->usable()) {
    context_->give_back_fence(handle_);
    return;
  }
  context_->drain_if_unusable();
  vkDestroyFence(context_->device(), handle_, nullptr);
}

void Fence::wait(std::chrono::nanoseconds timeout, std::string_view operation) {
  // Poll first: on an H200 (NVIDIA's Linux driver 580) a tiny submission's round trip is ~10 us
  // when polled and ~30 us through a blocking vkWaitForFences (tg_vk_stream_probe --mode submit).
  // Past kSpinFor the wait blocks, so long runs do not keep a core busy.
  constexpr std::chrono::microseconds kSpinFor{2000};
  const auto spin_end = std::chrono::steady_clock::now() + std::min<std::chrono::nanoseconds>(kSpinFor, timeout);
  while (std::chrono::steady_clock::now() < spin_end) {
    const VkResult status = vkGetFenceStatus(context_->device(), handle_);
    if (status == VK_SUCCESS) {
      pending_ = false;
      return;
    }
    if (status != VK_NOT_READY) {
      context_->check(status, "waiting for " + std::string(operation));
      return;
    }
  }
  const VkResult result = vkWaitForFences(context_->device(), 1, &handle_, VK_TRUE,
                                          static_cast<std::uint64_t>(std::max<std::int64_t>(timeout.count(), 0)));
  if (result == VK_TIMEOUT) {
    throw DeviceError(result, "waiting for " + std::string(operation) + " (timed out after " +
                                  std::to_string(timeout.count() / 1'000'000) + " ms)");
  }
  context_->check(result, "waiting for " + std::string(operation));
  pending_ = false;
}

void submit_and_wait(const std::shared_ptr<Context>& context_ptr, VkCommandBuffer commands, std::string_view operation,
                     std::chrono::nanoseconds timeout) {
  Context& context = *context_ptr;
  context.require_usable(operation);
  Fence fence(context_ptr);
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands;
  context.check(vkQueueSubmit(context.queue(), 1, &submit, fence.handle()), "submitting " + std::string(operation));
  fence.mark_submitted();
  try {
    fence.wait(timeout, operation);
  } catch (const DeviceError& e) {
    // The work may still be running: nothing it uses may be freed or reused until the device idles.
    if (e.result() == VK_TIMEOUT) context.mark_unusable(VK_TIMEOUT, "waiting for " + std::string(operation));
    throw;
  }
}

void submit_in_order(const std::shared_ptr<Context>& context_ptr, std::span<const VkCommandBuffer> commands,
                     std::string_view operation, const std::function<void(std::size_t)>& completed,
                     std::chrono::nanoseconds timeout) {
  Context& context = *context_ptr;
  context.require_usable(operation);
  std::vector<std::unique_ptr<Fence>> fences;
  std::exception_ptr failure;
  std::size_t submitted = 0;
  try {
    for (const VkCommandBuffer& commands_i : commands) {
      fences.push_back(std::make_unique<Fence>(context_ptr));
      VkSubmitInfo submit{};
      submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
      submit.commandBufferCount = 1;
      submit.pCommandBuffers = &commands_i;
      context.check(vkQueueSubmit(context.queue(), 1, &submit, fences.back()->handle()),
                    "submitting " + std::string(operation));
      fences.back()->mark_submitted();
      ++submitted;
    }
  } catch (...) {
    failure = std::current_exception();
  }
  const auto wait = [&](Fence& fence) {
    try {
      fence.wait(timeout, operation);
    } catch (const DeviceError& e) {
      if (e.result() == VK_TIMEOUT) context.mark_unusable(VK_TIMEOUT, "waiting for " + std::string(operation));
      throw;
    }
  };
  // A fence that never got its submission is simply returned by its destructor.
  for (std::size_t i = 0; i < submitted; ++i) {
    if (failure) {
      if (!context.usable()) break;  // the destructors drain the device
      try {
        wait(*fences[i]);
      } catch (...) {  // the first failure is the one reported
      }
      continue;
    }
    try {
      wait(*fences[i]);
      if (completed) completed(i);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tg::vk
