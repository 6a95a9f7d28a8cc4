// VkResult names and the typed Vulkan errors.
#include "tensorgrad/vk/error.h"

#include <string>

namespace tg::vk {

std::string_view result_name(VkResult result) {
  switch (result) {
#define TG_VK_RESULT(name) \
  case name:               \
    return #name;
    TG_VK_RESULT(VK_SUCCESS)
    TG_VK_RESULT(VK_NOT_READY)
    TG_VK_RESULT(VK_TIMEOUT)
    TG_VK_RESULT(VK_EVENT_SET)
    TG_VK_RESULT(VK_EVENT_RESET)
    TG_VK_RESULT(VK_INCOMPLETE)
    TG_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    TG_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    TG_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    TG_VK_RESULT(VK_ERROR_DEVICE_LOST)
    TG_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    TG_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    TG_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    TG_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    TG_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    TG_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    TG_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    TG_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    TG_VK_RESULT(VK_ERROR_UNKNOWN)
    TG_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    TG_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    TG_VK_RESULT(VK_ERROR_FRAGMENTATION)
    TG_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    TG_VK_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
    TG_VK_RESULT(VK_ERROR_VALIDATION_FAILED_EXT)
    TG_VK_RESULT(VK_ERROR_INVALID_SHADER_NV)
    TG_VK_RESULT(VK_ERROR_NOT_PERMITTED_KHR)
#undef TG_VK_RESULT
    default:
      break;
  }
  return "VkResult(unknown)";
}

namespace {
std::string describe(VkResult result, const std::string& operation) {
  std::string name(result_name(result));
  if (name == "VkResult(unknown)") name = "VkResult";
  return "Vulkan: " + operation + " failed: " + name + " (" + std::to_string(static_cast<int>(result)) + ")";
}
}  // namespace

DeviceError::DeviceError(VkResult result, std::string operation)
    : Error(describe(result, operation)), result_(result), operation_(std::move(operation)) {}

NoDeviceError::NoDeviceError(const std::string& message, std::vector<DeviceInfo> available)
    : Error(message), available_(std::move(available)) {}

void throw_device_error(VkResult result, std::string_view operation) {
  throw DeviceError(result, std::string(operation));
}

}  // namespace tg::vk
