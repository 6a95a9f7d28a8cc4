#pragma once
// What tensorgrad knows about a Vulkan physical device: identity, the limits the executor must
// respect, and whether it can run tensorgrad at all. list_devices() works without a Context, so a
// user can see what TG_VK_DEVICE can pick.
#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tg::vk {

enum class DeviceType { other, integrated_gpu, discrete_gpu, virtual_gpu, cpu };
std::string_view to_string(DeviceType type);

// One shape of multiply-add the device's matrix units do (VkCooperativeMatrixPropertiesKHR):
// C[m x n] += A[m x k] B[k x n] over a subgroup (or another scope), with these element types.
enum class MatrixElement : std::uint8_t { f16, bf16, f32, other };
std::string_view to_string(MatrixElement element);
struct CooperativeMatrixShape {
  std::uint32_t m = 0, n = 0, k = 0;
  MatrixElement a = MatrixElement::other, b = MatrixElement::other;
  MatrixElement c = MatrixElement::other, result = MatrixElement::other;
  bool subgroup_scope = false;  // VK_SCOPE_SUBGROUP_KHR (the only scope the kernels use)
  bool saturating = false;      // saturatingAccumulation (integer shapes only)
};

// What the device offers the matrix-unit matmul (src/vk/kernels/matmul_units.cpp decides from it).
struct MatrixUnitFeatures {
  // VK_KHR_cooperative_matrix with its cooperativeMatrix feature: the shapes the device reports
  // (empty without the extension or the feature).
  std::vector<CooperativeMatrixShape> shapes;
  // VK_KHR_shader_bfloat16 with shaderBFloat16Type and shaderBFloat16CooperativeMatrix.
  bool bfloat16 = false;
  // Vulkan 1.2 features the kernel's SPIR-V declares: 16-bit floats in shaders (shaderFloat16)
  // and the Vulkan memory model (vulkanMemoryModel, which GL_NV_cooperative_matrix implies).
  bool shader_float16 = false;
  bool vulkan_memory_model = false;
  // Why a Context turned units the device has off (an old validation layer), else empty.
  std::string off_reason;
};

struct DeviceInfo {
  std::uint32_t index = 0;  // position in vkEnumeratePhysicalDevices; what a numeric TG_VK_DEVICE names
  std::string name;
  DeviceType type = DeviceType::other;
  std::uint32_t vendor_id = 0;
  std::uint32_t device_id = 0;
  std::uint32_t driver_version = 0;  // raw, vendor-encoded; driver_version_string() decodes it
  std::uint32_t api_version = 0;     // what the device supports (VK_MAKE_API_VERSION)
  std::string driver_name;           // VkPhysicalDeviceDriverProperties (Vulkan 1.2), else empty
  std::string driver_info;
  std::array<std::uint8_t, VK_UUID_SIZE> pipeline_cache_uuid{};

  std::uint64_t max_storage_buffer_range = 0;    // largest range one storage-buffer binding may cover
  std::uint64_t max_memory_allocation_size = 0;  // VkPhysicalDeviceMaintenance3Properties
  std::uint64_t min_storage_buffer_offset_alignment = 0;
  // The memory heap device buffers come from (the largest device-local heap; on a CPU device its
  // only heap): its index and size in bytes. A plan larger than this cannot be allocated.
  std::uint32_t device_heap_index = 0;
  std::uint64_t device_heap_bytes = 0;
  std::uint32_t max_push_constants_size = 0;
  std::uint32_t max_compute_shared_memory_size = 0;
  std::array<std::uint32_t, 3> max_compute_work_group_count{};
  std::array<std::uint32_t, 3> max_compute_work_group_size{};
  std::uint32_t max_compute_work_group_invocations = 0;
  // maxPerStageDescriptorStorageBuffers: the storage buffers one dispatch may bind (Vulkan
  // guarantees 4; the fused elementwise kernel binds 16, concat up to 9, so Program turns fusion
  // off below 16 and refuses a launch that needs more than this, naming it).
  std::uint32_t max_per_stage_storage_buffers = 0;
  // VkPhysicalDeviceFloatControlsProperties (Vulkan 1.2), for 32-bit floats: whether shaders may
  // ask the driver to keep NaN, ±Inf and -0 (SignedZeroInfNanPreserve), and denormals
  // (DenormPreserve). Context enables what is supported (ContextOptions::float_controls).
  bool can_preserve_nan_inf_signed_zero = false;
  bool can_preserve_denormals = false;
  // VkPhysicalDevice16BitStorageFeatures::storageBuffer16BitAccess (core in Vulkan 1.1, optional):
  // shaders may load and store 16-bit words in storage buffers. The f16 and bf16 values live on the
  // device at 2 bytes per element, which needs it; Context enables it wherever it is supported, and
  // a Program refuses a graph with a 16-bit value on a device without it (LimitError).
  bool storage_buffer_16bit_access = false;
  // Cooperative matrices, 16-bit shader types and the memory model (see MatrixUnitFeatures).
  MatrixUnitFeatures matrix_units;
  std::uint32_t subgroup_size = 0;  // VkPhysicalDeviceSubgroupProperties
  // subgroupBroadcast in compute shaders (the ballot operations in the compute stage).
  bool compute_subgroup_broadcast = false;
  float timestamp_period = 0;         // nanoseconds per timestamp tick
  bool timestamps_supported = false;  // timestamp queries work on the compute queue family below

  // The queue family Context uses; meaningful only when usable.
  std::uint32_t compute_queue_family = 0;
  // Whether tensorgrad can use the device (Vulkan 1.1 and a compute queue); if not, why.
  bool usable = false;
  std::string unusable_reason;

  std::string driver_version_string() const;
  // One line for error messages and logs: "0: llvmpipe (LLVM 15.0.6, 256 bits) [cpu, Vulkan 1.3.230, ...]".
  std::string summary() const;
};

// Every physical device the Vulkan loader reports, usable or not, in enumeration order. Empty when
// there is no Vulkan driver at all. Throws DeviceError if the loader itself fails.
std::vector<DeviceInfo> list_devices();

}  // namespace tg::vk
