#pragma once
// Typed Vulkan errors. Every Vulkan call's VkResult goes through check() (or Context::check() for
// calls on a device), so a failure always names the result and what was being done.
#include <vulkan/vulkan.h>

#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/device.h"

namespace tg::vk {

// The symbolic name of a VkResult ("VK_ERROR_OUT_OF_DEVICE_MEMORY"), or "VkResult(unknown)".
std::string_view result_name(VkResult result);

// A Vulkan call failed (or a wait timed out: VK_TIMEOUT). what() reads
// "Vulkan: <operation> failed: VK_ERROR_DEVICE_LOST (-4)".
class DeviceError : public Error {
 public:
  DeviceError(VkResult result, std::string operation);
  VkResult result() const { return result_; }
  std::string_view result_name() const { return vk::result_name(result_); }
  const std::string& operation() const { return operation_; }

 private:
  VkResult result_;
  std::string operation_;
};

// No Vulkan device can be used: no driver, no device with what tensorgrad needs, or a device
// selector (TG_VK_DEVICE, ContextOptions::device) that matches none. The message says what was
// looked for and lists the devices found; available() holds them.
class NoDeviceError : public Error {
 public:
  NoDeviceError(const std::string& message, std::vector<DeviceInfo> available);
  const std::vector<DeviceInfo>& available() const { return available_; }

 private:
  std::vector<DeviceInfo> available_;
};

// A graph needs more than the device allows: a value above maxStorageBufferRange or
// maxMemoryAllocationSize, a plan above the memory heap, more storage buffers per dispatch than the
// device binds, or a loop past lavapipe's iteration limit. Thrown when a Program is built, before
// anything runs; the message names the value or op, what it needs and the limit, so a caller can
// retry with a smaller batch, another device or the interpreter.
class LimitError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void throw_device_error(VkResult result, std::string_view operation);

// Throws DeviceError unless result is VK_SUCCESS. Calls that may legitimately return another
// success code (VK_INCOMPLETE, VK_TIMEOUT) handle it before calling check().
inline void check(VkResult result, std::string_view operation) {
  if (result != VK_SUCCESS) [[unlikely]]
    throw_device_error(result, operation);
}

}  // namespace tg::vk
