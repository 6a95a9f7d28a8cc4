// The parts of the Vulkan layer that need no device: error types and names, the device-selection
// rule, memory-type selection, the "no driver" error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tensorgrad/vk/context.h"
#include "vk/buffer.h"
#include "vk/device_select.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::ScopedEnv;

TEST(VkErrors, DeviceErrorNamesTheResultAndTheOperation) {
  const DeviceError e(VK_ERROR_OUT_OF_DEVICE_MEMORY, "allocating 4 GiB");
  EXPECT_EQ(e.result(), VK_ERROR_OUT_OF_DEVICE_MEMORY);
  EXPECT_EQ(e.result_name(), "VK_ERROR_OUT_OF_DEVICE_MEMORY");
  EXPECT_EQ(std::string(e.what()), "Vulkan: allocating 4 GiB failed: VK_ERROR_OUT_OF_DEVICE_MEMORY (-2)");
  EXPECT_EQ(result_name(VK_ERROR_DEVICE_LOST), "VK_ERROR_DEVICE_LOST");
  EXPECT_EQ(result_name(static_cast<VkResult>(-123456)), "VkResult(unknown)");
  EXPECT_NO_THROW(check(VK_SUCCESS, "nothing"));
  EXPECT_THROW(check(VK_TIMEOUT, "waiting"), DeviceError);  // success codes other than VK_SUCCESS too
  try {
    check(VK_ERROR_INITIALIZATION_FAILED, "creating the instance");
  } catch (const Error& caught_as_base) {  // everything derives from tg::Error
    EXPECT_NE(std::string(caught_as_base.what()).find("creating the instance"), std::string::npos);
  }
}

DeviceInfo device(std::uint32_t index, std::string name, DeviceType type, bool usable = true) {
  DeviceInfo d;
  d.index = index;
  d.name = std::move(name);
  d.type = type;
  d.usable = usable;
  d.api_version = VK_API_VERSION_1_3;
  if (!usable) d.unusable_reason = "has no compute queue";
  return d;
}

TEST(VkDeviceSelection, PrefersDiscreteThenIntegratedThenVirtualThenCpu) {
  const std::vector<DeviceInfo> all = {
      device(0, "llvmpipe (LLVM 15)", DeviceType::cpu), device(1, "Virtio GPU", DeviceType::virtual_gpu),
      device(2, "Intel(R) UHD 770", DeviceType::integrated_gpu), device(3, "NVIDIA H200", DeviceType::discrete_gpu)};
  EXPECT_EQ(detail::select_device(all, "", "TG_VK_DEVICE"), 3u);
  EXPECT_EQ(detail::select_device({all[0], all[1], all[2]}, "", "TG_VK_DEVICE"), 2u);
  EXPECT_EQ(detail::select_device({all[0], all[1]}, "", "TG_VK_DEVICE"), 1u);
  EXPECT_EQ(detail::select_device({all[0]}, "", "TG_VK_DEVICE"), 0u);
  // Unusable devices are never picked, whatever their type.
  std::vector<DeviceInfo> broken_gpu = all;
  broken_gpu[3].usable = false;
  EXPECT_EQ(detail::select_device(broken_gpu, "", "TG_VK_DEVICE"), 2u);
}

TEST(VkDeviceSelection, SelectorIsAnIndexOrCaseInsensitiveSubstring) {
  const std::vector<DeviceInfo> all = {device(0, "llvmpipe (LLVM 15)", DeviceType::cpu),
                                       device(1, "NVIDIA H200", DeviceType::discrete_gpu),
                                       device(2, "NVIDIA H100", DeviceType::discrete_gpu)};
  EXPECT_EQ(detail::select_device(all, "0", "TG_VK_DEVICE"), 0u);
  EXPECT_EQ(detail::select_device(all, "2", "TG_VK_DEVICE"), 2u);
  EXPECT_EQ(detail::select_device(all, "LLVMPIPE", "TG_VK_DEVICE"), 0u);
  EXPECT_EQ(detail::select_device(all, "h100", "TG_VK_DEVICE"), 2u);
  EXPECT_EQ(detail::select_device(all, "nvidia", "TG_VK_DEVICE"), 1u);  // first of equal rank
  try {
    detail::select_device(all, "7", "TG_VK_DEVICE");
    FAIL() << "index 7 does not exist";
  } catch (const NoDeviceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("TG_VK_DEVICE='7'"), std::string::npos) << message;
    EXPECT_NE(message.find("0: llvmpipe (LLVM 15) [cpu"), std::string::npos) << message;
    EXPECT_NE(message.find("2: NVIDIA H100 [discrete GPU"), std::string::npos) << message;
    EXPECT_EQ(e.available().size(), 3u);
  }
}

TEST(VkDeviceSelection, NoUsableDeviceExplainsHowToGetLavapipe) {
  const std::vector<DeviceInfo> none = {device(0, "Old GPU", DeviceType::discrete_gpu, false)};
  try {
    detail::select_device(none, "", "TG_VK_DEVICE");
    FAIL() << "expected NoDeviceError";
  } catch (const NoDeviceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("Old GPU"), std::string::npos) << message;
    EXPECT_NE(message.find("has no compute queue"), std::string::npos) << message;
    EXPECT_NE(message.find("apt-get install mesa-vulkan-drivers"), std::string::npos) << message;
  }
}

TEST(VkDeviceSelection, NoDriverAtAllThrowsNoDeviceError) {
  // Point the loader at a driver manifest that does not exist: the machine now has no Vulkan driver.
  ScopedEnv icd("VK_ICD_FILENAMES", "/nonexistent/tensorgrad_test_icd.json");
  ScopedEnv drivers("VK_DRIVER_FILES", "/nonexistent/tensorgrad_test_icd.json");
  EXPECT_TRUE(list_devices().empty());
  ContextOptions options;
  options.validation = false;
  try {
    Context::create(options);
    FAIL() << "expected NoDeviceError";
  } catch (const NoDeviceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no Vulkan driver"), std::string::npos) << message;
    EXPECT_NE(message.find("apt-get install mesa-vulkan-drivers"), std::string::npos) << message;
  }
}

// Memory types of a typical discrete GPU: VRAM, a small host-visible VRAM window (BAR), system
// memory write-combined and cached, and a protected type nothing may use.
VkPhysicalDeviceMemoryProperties discrete_gpu_memory() {
  VkPhysicalDeviceMemoryProperties p{};
  const VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags types[] = {VK_MEMORY_PROPERTY_PROTECTED_BIT | local, local, local | host, host,
                                         host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT};
  p.memoryTypeCount = 5;
  for (std::uint32_t i = 0; i < 5; ++i) p.memoryTypes[i].propertyFlags = types[i];
  return p;
}

TEST(VkMemoryTypes, DeviceBuffersGetVramStagingGetsSystemMemory) {
  const VkPhysicalDeviceMemoryProperties p = discrete_gpu_memory();
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  // device: VRAM, not the protected type and not the BAR window.
  EXPECT_EQ(find_memory_type(p, 0x1F, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT), 1u);
  // upload: host-visible system memory; readback: the cached one.
  EXPECT_EQ(find_memory_type(p, 0x1F, host, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT), 3u);
  EXPECT_EQ(find_memory_type(p, 0x1F, host, VK_MEMORY_PROPERTY_HOST_CACHED_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT),
            4u);
  // The buffer's memoryTypeBits restrict the choice; with only the BAR allowed, the BAR it is.
  EXPECT_EQ(find_memory_type(p, 1u << 2, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT),
            2u);
  EXPECT_FALSE(find_memory_type(p, 1u << 0, 0, 0, 0).has_value());  // protected only
  EXPECT_FALSE(find_memory_type(p, 1u << 1, host, 0, 0).has_value());
}

}  // namespace
}  // namespace tg::vk
