#pragma once
// Internal: instance creation shared by list_devices() and Context, device description and the
// device-selection rule (pure, so tests can feed it made-up device lists).
#include <vulkan/vulkan.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/vk/device.h"

namespace tg::vk::detail {

// The Vulkan version tensorgrad needs from a device (subgroup and maintenance3 properties, SPIR-V 1.3).
inline constexpr std::uint32_t k_min_api_version = VK_API_VERSION_1_1;

// Creates an instance; `next` is chained to VkInstanceCreateInfo (debug messenger, validation
// features). With validation, enables VK_LAYER_KHRONOS_validation and VK_EXT_debug_utils, and throws
// tg::Error if the layer is missing. Returns vkCreateInstance's result (VK_ERROR_INCOMPATIBLE_DRIVER
// when there is no driver at all) without throwing, so callers can turn it into NoDeviceError.
VkResult create_instance(bool validation, const void* next, VkInstance* instance);
// Whether the validation layer offers VK_EXT_validation_features (for synchronization validation).
bool validation_features_available();

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance);
DeviceInfo describe_device(VkInstance instance, VkPhysicalDevice device, std::uint32_t index);
// Fills info.matrix_units (src/vk/matrix_units.cpp); a device below Vulkan 1.2 has none.
void describe_matrix_units(VkInstance instance, VkPhysicalDevice device, DeviceInfo& info);
// The installed VK_LAYER_KHRONOS_validation's specVersion (the Vulkan headers it was built
// against); 0 without one.
std::uint32_t validation_layer_spec_version();
// Room for the two feature structs the headers may not declare (see matrix_units.cpp).
struct MatrixUnitFeatureStorage {
  alignas(8) unsigned char cooperative[32];
  alignas(8) unsigned char bfloat16[32];
};
// Chains, in front of `next`, the features that enable what `units` found (cooperative matrices,
// bf16), built in `storage`; returns the new head. Nothing when the device has no shapes.
void* chain_matrix_unit_features(const MatrixUnitFeatures& units, void* next, MatrixUnitFeatureStorage& storage);

// Which device to use: `selector` is an index or a case-insensitive name substring (empty: the best
// type, discrete > integrated > virtual > CPU > other, first in enumeration order on ties). Only
// usable devices are picked. Throws NoDeviceError naming `selector_source` and listing `devices`.
std::size_t select_device(const std::vector<DeviceInfo>& devices, std::string_view selector,
                          std::string_view selector_source);

// The advice appended to NoDeviceError messages: what is looked for and how to get lavapipe.
std::string no_device_advice();

}  // namespace tg::vk::detail
