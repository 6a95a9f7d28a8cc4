// What a device's matrix units offer (DeviceInfo::matrix_units): VK_KHR_cooperative_matrix's
// shapes and the features the matrix-unit matmul's SPIR-V needs. The structs are declared here in
// the layout of the Vulkan registry because the build's headers (Debian 12: Vulkan 1.3.239) predate
// VK_KHR_cooperative_matrix (1.3.255) and VK_KHR_shader_bfloat16 (1.4.311); the driver reads them by
// their sType.
#include <cstring>
#include <new>
#include <vector>

#include "vk/device_select.h"

namespace tg::vk {

std::string_view to_string(MatrixElement element) {
  switch (element) {
    case MatrixElement::f16:
      return "f16";
    case MatrixElement::bf16:
      return "bf16";
    case MatrixElement::f32:
      return "f32";
    case MatrixElement::other:
      break;
  }
  return "other";
}

namespace detail {

namespace {

constexpr auto kCooperativeMatrixFeaturesType = static_cast<VkStructureType>(1000506000);
constexpr auto kCooperativeMatrixPropertiesType = static_cast<VkStructureType>(1000506001);
constexpr auto kBfloat16FeaturesType = static_cast<VkStructureType>(1000141000);
constexpr std::uint32_t kComponentFloat16 = 0;
constexpr std::uint32_t kComponentFloat32 = 1;
constexpr std::uint32_t kComponentBfloat16 = 1000141000;
constexpr std::uint32_t kScopeSubgroup = 3;

struct CooperativeMatrixFeatures {  // VkPhysicalDeviceCooperativeMatrixFeaturesKHR
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
};
struct CooperativeMatrixProperties {  // VkCooperativeMatrixPropertiesKHR
  VkStructureType sType;
  void* pNext;
  std::uint32_t MSize, NSize, KSize;
  std::uint32_t AType, BType, CType, ResultType;  // VkComponentTypeKHR
  VkBool32 saturatingAccumulation;
  std::uint32_t scope;  // VkScopeKHR
};
struct Bfloat16Features {  // VkPhysicalDeviceShaderBfloat16FeaturesKHR
  VkStructureType sType;
  void* pNext;
  VkBool32 shaderBFloat16Type;
  VkBool32 shaderBFloat16DotProduct;
  VkBool32 shaderBFloat16CooperativeMatrix;
};
using GetCooperativeMatrixProperties = VkResult(VKAPI_PTR*)(VkPhysicalDevice, std::uint32_t*,
                                                            CooperativeMatrixProperties*);

MatrixElement element_of(std::uint32_t component) {
  switch (component) {
    case kComponentFloat16:
      return MatrixElement::f16;
    case kComponentFloat32:
      return MatrixElement::f32;
    case kComponentBfloat16:
      return MatrixElement::bf16;
    default:
      return MatrixElement::other;
  }
}

bool has_device_extension(VkPhysicalDevice device, const char* name) {
  std::uint32_t count = 0;
  if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> extensions(count);
  if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data()) != VK_SUCCESS) return false;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (std::strcmp(extensions[i].extensionName, name) == 0) return true;
  }
  return false;
}

}  // namespace

void describe_matrix_units(VkInstance instance, VkPhysicalDevice device, DeviceInfo& info) {
  if (info.api_version < VK_API_VERSION_1_2) return;
  const bool cooperative = has_device_extension(device, "VK_KHR_cooperative_matrix");
  const bool bfloat16 = has_device_extension(device, "VK_KHR_shader_bfloat16");
  VkPhysicalDeviceVulkan12Features features12{};
  features12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  CooperativeMatrixFeatures cooperative_features{kCooperativeMatrixFeaturesType, nullptr, VK_FALSE, VK_FALSE};
  Bfloat16Features bfloat16_features{kBfloat16FeaturesType, nullptr, VK_FALSE, VK_FALSE, VK_FALSE};
  void* chain = &features12;
  if (cooperative) {
    cooperative_features.pNext = chain;
    chain = &cooperative_features;
  }
  if (bfloat16) {
    bfloat16_features.pNext = chain;
    chain = &bfloat16_features;
  }
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = chain;
  vkGetPhysicalDeviceFeatures2(device, &features);
  MatrixUnitFeatures& units = info.matrix_units;
  units.shader_float16 = features12.shaderFloat16 == VK_TRUE;
  units.vulkan_memory_model = features12.vulkanMemoryModel == VK_TRUE;
  units.bfloat16 =
      bfloat16_features.shaderBFloat16Type == VK_TRUE && bfloat16_features.shaderBFloat16CooperativeMatrix == VK_TRUE;
  if (!cooperative || cooperative_features.cooperativeMatrix != VK_TRUE) return;
  const auto get = reinterpret_cast<GetCooperativeMatrixProperties>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (!get) return;
  std::uint32_t count = 0;
  if (get(device, &count, nullptr) != VK_SUCCESS || count == 0) return;
  std::vector<CooperativeMatrixProperties> properties(count);
  for (CooperativeMatrixProperties& p : properties) {
    std::memset(&p, 0, sizeof p);
    p.sType = kCooperativeMatrixPropertiesType;
  }
  if (get(device, &count, properties.data()) != VK_SUCCESS) return;
  properties.resize(count);
  for (const CooperativeMatrixProperties& p : properties) {
    units.shapes.push_back({.m = p.MSize,
                            .n = p.NSize,
                            .k = p.KSize,
                            .a = element_of(p.AType),
                            .b = element_of(p.BType),
                            .c = element_of(p.CType),
                            .result = element_of(p.ResultType),
                            .subgroup_scope = p.scope == kScopeSubgroup,
                            .saturating = p.saturatingAccumulation == VK_TRUE});
  }
}

// The KHR structs for Context::create_device, which enables what describe_matrix_units found.
void* chain_matrix_unit_features(const MatrixUnitFeatures& units, void* next, MatrixUnitFeatureStorage& storage) {
  if (units.shapes.empty()) return next;
  static_assert(sizeof(CooperativeMatrixFeatures) <= sizeof storage.cooperative);
  static_assert(sizeof(Bfloat16Features) <= sizeof storage.bfloat16);
  next = new (storage.cooperative) CooperativeMatrixFeatures{kCooperativeMatrixFeaturesType, next, VK_TRUE, VK_FALSE};
  if (units.bfloat16) {
    next = new (storage.bfloat16) Bfloat16Features{kBfloat16FeaturesType, next, VK_TRUE, VK_FALSE, VK_TRUE};
  }
  return next;
}

}  // namespace detail
}  // namespace tg::vk
