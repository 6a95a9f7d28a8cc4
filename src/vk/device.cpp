// Instance creation, physical-device description, list_devices() and the device-selection rule.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <utility>

#include "tensorgrad/vk/error.h"
#include "vk/device_select.h"
#include "vk/leak_check_support.h"

namespace tg::vk {

std::string_view to_string(DeviceType type) {
  switch (type) {
    case DeviceType::discrete_gpu:
      return "discrete GPU";
    case DeviceType::integrated_gpu:
      return "integrated GPU";
    case DeviceType::virtual_gpu:
      return "virtual GPU";
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::other:
      break;
  }
  return "other";
}

namespace {

std::string version_string(std::uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

DeviceType device_type(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return DeviceType::discrete_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return DeviceType::integrated_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return DeviceType::virtual_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return DeviceType::cpu;
    default:
      return DeviceType::other;
  }
}

// Lower is preferred: what the design asks for when no selector is given.
int preference_rank(DeviceType type) {
  switch (type) {
    case DeviceType::discrete_gpu:
      return 0;
    case DeviceType::integrated_gpu:
      return 1;
    case DeviceType::virtual_gpu:
      return 2;
    case DeviceType::cpu:
      return 3;
    case DeviceType::other:
      break;
  }
  return 4;
}

std::vector<VkExtensionProperties> instance_extensions(const char* layer) {
  std::uint32_t count = 0;
  check(vkEnumerateInstanceExtensionProperties(layer, &count, nullptr), "counting instance extensions");
  std::vector<VkExtensionProperties> extensions(count);
  check(vkEnumerateInstanceExtensionProperties(layer, &count, extensions.data()), "listing instance extensions");
  extensions.resize(count);
  return extensions;
}

bool has_extension(const std::vector<VkExtensionProperties>& extensions, const char* name) {
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

constexpr const char* k_validation_layer = "VK_LAYER_KHRONOS_validation";

bool validation_layer_installed() {
  std::uint32_t count = 0;
  check(vkEnumerateInstanceLayerProperties(&count, nullptr), "counting instance layers");
  std::vector<VkLayerProperties> layers(count);
  check(vkEnumerateInstanceLayerProperties(&count, layers.data()), "listing instance layers");
  layers.resize(count);
  return std::any_of(layers.begin(), layers.end(),
                     [](const VkLayerProperties& l) { return std::strcmp(l.layerName, k_validation_layer) == 0; });
}

}  // namespace

std::uint32_t detail::validation_layer_spec_version() {
  std::uint32_t count = 0;
  if (vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS) return 0;
  std::vector<VkLayerProperties> layers(count);
  if (vkEnumerateInstanceLayerProperties(&count, layers.data()) != VK_SUCCESS) return 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (std::strcmp(layers[i].layerName, k_validation_layer) == 0) return layers[i].specVersion;
  }
  return 0;
}

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string device_list(const std::vector<DeviceInfo>& devices) {
  if (devices.empty()) return "  (none)\n";
  std::string out;
  for (const DeviceInfo& d : devices) out += "  " + d.summary() + "\n";
  return out;
}

}  // namespace

std::string DeviceInfo::driver_version_string() const {
  // NVIDIA packs 10.8.8.6 bits; Mesa and most others use the VK_MAKE_API_VERSION layout.
  if (vendor_id == 0x10DE) {
    return std::to_string(driver_version >> 22) + "." + std::to_string((driver_version >> 14) & 0xFF) + "." +
           std::to_string((driver_version >> 6) & 0xFF) + "." + std::to_string(driver_version & 0x3F);
  }
  return version_string(driver_version);
}

std::string DeviceInfo::summary() const {
  std::string s = std::to_string(index) + ": " + name + " [" + std::string(to_string(type)) + ", Vulkan " +
                  version_string(api_version) + ", driver " +
                  (driver_info.empty() ? driver_version_string() : driver_name + " " + driver_info) + "]";
  if (!usable) s += " (not usable: " + unusable_reason + ")";
  return s;
}

std::vector<DeviceInfo> list_devices() {
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult result = detail::create_instance(false, nullptr, &instance);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER) return {};  // the loader found no driver
  check(result, "creating a Vulkan instance to list devices");
  std::vector<DeviceInfo> devices;
  try {
    const std::vector<VkPhysicalDevice> physical = detail::physical_devices(instance);
    for (std::uint32_t i = 0; i < physical.size(); ++i)
      devices.push_back(detail::describe_device(instance, physical[i], i));
  } catch (...) {
    vkDestroyInstance(instance, nullptr);
    throw;
  }
  vkDestroyInstance(instance, nullptr);
  return devices;
}

namespace detail {

VkResult create_instance(bool validation, const void* next, VkInstance* instance) {
  std::uint32_t loader_version = VK_API_VERSION_1_0;
  check(vkEnumerateInstanceVersion(&loader_version), "querying the Vulkan loader version");
  if (loader_version < k_min_api_version) return VK_ERROR_INCOMPATIBLE_DRIVER;

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  const std::vector<VkExtensionProperties> available = instance_extensions(nullptr);
  VkInstanceCreateFlags flags = 0;
  // Portability drivers (MoltenVK) are enumerated only when the application opts in.
  if (has_extension(available, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  if (validation) {
    if (!validation_layer_installed()) {
      throw Error(
          "Vulkan validation was requested (TG_VK_VALIDATION=1 or ContextOptions::validation) but "
          "VK_LAYER_KHRONOS_validation is not installed; on Debian: apt-get install vulkan-validationlayers");
    }
    layers.push_back(k_validation_layer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (validation_features_available()) extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
  }

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "tensorgrad";
  app.pEngineName = "tensorgrad";
  // The highest version we know, capped by the loader; each device is then used at its own version.
  app.apiVersion = std::min<std::uint32_t>(loader_version, VK_API_VERSION_1_3);

  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pNext = next;
  info.flags = flags;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<std::uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  const VkResult result = vkCreateInstance(&info, nullptr, instance);
  if (result == VK_SUCCESS) keep_vulkan_modules_loaded_for_leak_checks();  // ASan builds only
  return result;
}

bool validation_features_available() {
  return has_extension(instance_extensions(k_validation_layer), VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  std::uint32_t count = 0;
  check(vkEnumeratePhysicalDevices(instance, &count, nullptr), "counting physical devices");
  std::vector<VkPhysicalDevice> devices(count);
  check(vkEnumeratePhysicalDevices(instance, &count, devices.data()), "listing physical devices");
  devices.resize(count);
  return devices;
}

DeviceInfo describe_device(VkInstance instance, VkPhysicalDevice device, std::uint32_t index) {
  DeviceInfo info;
  info.index = index;
  VkPhysicalDeviceProperties base{};
  vkGetPhysicalDeviceProperties(device, &base);
  info.api_version = base.apiVersion;
  info.name = base.deviceName;
  info.type = device_type(base.deviceType);
  info.vendor_id = base.vendorID;
  info.device_id = base.deviceID;
  info.driver_version = base.driverVersion;
  std::copy(std::begin(base.pipelineCacheUUID), std::end(base.pipelineCacheUUID), info.pipeline_cache_uuid.begin());
  const VkPhysicalDeviceLimits& limits = base.limits;
  info.max_storage_buffer_range = limits.maxStorageBufferRange;
  info.min_storage_buffer_offset_alignment = limits.minStorageBufferOffsetAlignment;
  info.max_push_constants_size = limits.maxPushConstantsSize;
  info.max_compute_shared_memory_size = limits.maxComputeSharedMemorySize;
  for (int i = 0; i < 3; ++i) {
    info.max_compute_work_group_count[i] = limits.maxComputeWorkGroupCount[i];
    info.max_compute_work_group_size[i] = limits.maxComputeWorkGroupSize[i];
  }
  info.max_compute_work_group_invocations = limits.maxComputeWorkGroupInvocations;
  info.max_per_stage_storage_buffers = limits.maxPerStageDescriptorStorageBuffers;
  info.timestamp_period = limits.timestampPeriod;
  // The largest device-local heap, or the largest heap where none is device-local.
  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(device, &memory);
  const auto rank = [&](std::uint32_t h) {
    const bool local = (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
    return std::pair(local, memory.memoryHeaps[h].size);
  };
  for (std::uint32_t h = 0; h < memory.memoryHeapCount && h < VK_MAX_MEMORY_HEAPS; ++h) {
    if (h == 0 || rank(h) > rank(info.device_heap_index)) info.device_heap_index = h;
  }
  if (memory.memoryHeapCount > 0) info.device_heap_bytes = memory.memoryHeaps[info.device_heap_index].size;

  if (base.apiVersion < k_min_api_version) {
    info.unusable_reason = "supports only Vulkan " + version_string(base.apiVersion) + "; tensorgrad needs 1.1";
    return info;
  }
  // The 1.1 property structs are valid on any 1.1 device; the driver properties need 1.2.
  VkPhysicalDeviceMaintenance3Properties maintenance3{};
  maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  subgroup.pNext = &maintenance3;
  VkPhysicalDeviceFloatControlsProperties float_controls{};
  float_controls.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES;
  float_controls.pNext = &subgroup;
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  driver.pNext = &float_controls;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = base.apiVersion >= VK_API_VERSION_1_2 ? static_cast<void*>(&driver) : &subgroup;
  vkGetPhysicalDeviceProperties2(device, &props);
  info.max_memory_allocation_size = maintenance3.maxMemoryAllocationSize;
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &storage16;
  vkGetPhysicalDeviceFeatures2(device, &features);
  info.storage_buffer_16bit_access = storage16.storageBuffer16BitAccess == VK_TRUE;
  info.subgroup_size = subgroup.subgroupSize;
  info.compute_subgroup_broadcast = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                                    (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT) != 0;
  if (base.apiVersion >= VK_API_VERSION_1_2) {
    info.driver_name = driver.driverName;
    info.driver_info = driver.driverInfo;
    info.can_preserve_nan_inf_signed_zero = float_controls.shaderSignedZeroInfNanPreserveFloat32 == VK_TRUE;
    info.can_preserve_denormals = float_controls.shaderDenormPreserveFloat32 == VK_TRUE;
  }
  describe_matrix_units(instance, device, info);

  std::uint32_t family_count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &family_count, families.data());
  // Any compute family works; one with timestamps lets the profiler time dispatches.
  std::optional<std::uint32_t> chosen;
  for (std::uint32_t i = 0; i < family_count; ++i) {
    if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || families[i].queueCount == 0) continue;
    if (!chosen || (families[i].timestampValidBits > 0 && families[*chosen].timestampValidBits == 0)) chosen = i;
  }
  if (!chosen) {
    info.unusable_reason = "has no compute queue";
    return info;
  }
  info.compute_queue_family = *chosen;
  info.timestamps_supported = families[*chosen].timestampValidBits > 0 && info.timestamp_period > 0;
  info.usable = true;
  return info;
}

std::size_t select_device(const std::vector<DeviceInfo>& devices, std::string_view selector,
                          std::string_view selector_source) {
  const auto usable = [](const DeviceInfo& d) { return d.usable; };
  if (std::none_of(devices.begin(), devices.end(), usable)) {
    throw NoDeviceError(std::string("no usable Vulkan device found; devices the Vulkan loader reported:\n") +
                            device_list(devices) + no_device_advice(),
                        devices);
  }
  std::optional<std::size_t> best;
  const bool numeric =
      !selector.empty() && std::all_of(selector.begin(), selector.end(), [](char c) { return c >= '0' && c <= '9'; });
  const std::string needle = lower(selector);
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    if (!d.usable) continue;
    if (numeric) {
      if (std::to_string(d.index) != selector) continue;
    } else if (!needle.empty() && lower(d.name).find(needle) == std::string::npos) {
      continue;
    }
    if (!best || preference_rank(d.type) < preference_rank(devices[*best].type)) best = i;
  }
  if (!best) {
    throw NoDeviceError(std::string(selector_source) + "='" + std::string(selector) +
                            "' matches no usable Vulkan device (it takes an index or a case-insensitive "
                            "substring of the device name); available devices:\n" +
                            device_list(devices),
                        devices);
  }
  return *best;
}

std::string no_device_advice() {
  return "tensorgrad looks for a Vulkan 1.1 device with a compute queue (any GPU driver, or Mesa's lavapipe "
         "on the CPU). To run on the CPU, install lavapipe: apt-get install mesa-vulkan-drivers";
}

}  // namespace detail
}  // namespace tg::vk
