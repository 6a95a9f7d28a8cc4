// Context: instance (+ validation messenger), device selection, logical device with one compute
// queue, command pool, pipeline cache, and the usable/lost state.
#include "tensorgrad/vk/context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "vk/compute.h"
#include "vk/device_select.h"
#include "vk/pipeline_cache.h"

namespace tg::vk {

namespace {

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return false;
  const std::string v = value;
  return v == "1" || v == "true" || v == "on" || v == "yes";
}

std::string trim(std::string text) {
  const auto space = [](unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && space(text.back())) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && space(text[start])) ++start;
  return text.substr(start);
}

std::vector<VkExtensionProperties> device_extensions(VkPhysicalDevice device) {
  std::uint32_t count = 0;
  check(vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr), "counting device extensions");
  std::vector<VkExtensionProperties> extensions(count);
  check(vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data()), "listing device extensions");
  extensions.resize(count);
  return extensions;
}

bool has_extension(const std::vector<VkExtensionProperties>& extensions, const char* name) {
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

}  // namespace

std::shared_ptr<Context> Context::create(ContextOptions options) {
  const bool validation = options.validation.value_or(env_flag("TG_VK_VALIDATION"));
  std::string selector;
  std::string source = "ContextOptions::device";
  if (options.device) {
    selector = trim(*options.device);
  } else if (const char* env = std::getenv("TG_VK_DEVICE")) {
    selector = trim(env);
    source = "TG_VK_DEVICE";
  }

  // Not make_shared: the constructor is private. If a step below throws, the destructor releases
  // whatever was created so far.
  std::shared_ptr<Context> ctx(new Context);
  ctx->on_message_ = std::move(options.on_validation_message);
  ctx->max_cached_pipelines_ = options.max_cached_pipelines;
  ctx->create_instance(validation);

  const std::vector<VkPhysicalDevice> physical = detail::physical_devices(ctx->instance_);
  std::vector<DeviceInfo> devices;
  for (std::uint32_t i = 0; i < physical.size(); ++i)
    devices.push_back(detail::describe_device(ctx->instance_, physical[i], i));
  if (devices.empty()) {
    throw NoDeviceError("no Vulkan device found: a Vulkan driver is installed but reports no physical device. " +
                            detail::no_device_advice(),
                        {});
  }
  const std::size_t chosen = detail::select_device(devices, selector, source);
  ctx->info_ = devices[chosen];
  // A validation layer built before VK_KHR_cooperative_matrix (Vulkan headers 1.3.255) or
  // VK_KHR_shader_bfloat16 (1.4.311) cannot parse the matrix-unit kernel or its feature structs and
  // reports both as errors: under such a layer those units stay off and the portable kernels run.
  MatrixUnitFeatures& units = ctx->info_.matrix_units;
  if (validation && !units.shapes.empty()) {
    const std::uint32_t layer = detail::validation_layer_spec_version();
    if (layer < VK_MAKE_API_VERSION(0, 1, 3, 255)) {
      units.shapes.clear();
      units.bfloat16 = false;
      units.off_reason = "the validation layer (Vulkan " + std::to_string(VK_API_VERSION_MAJOR(layer)) + "." +
                         std::to_string(VK_API_VERSION_MINOR(layer)) + "." +
                         std::to_string(VK_API_VERSION_PATCH(layer)) + ") predates VK_KHR_cooperative_matrix";
    } else if (layer < VK_MAKE_API_VERSION(0, 1, 4, 311) && units.bfloat16) {
      units.bfloat16 = false;
      units.off_reason = "the validation layer predates VK_KHR_shader_bfloat16";
    }
  }
  if (options.max_storage_buffers_per_dispatch) {
    ctx->info_.max_per_stage_storage_buffers =
        std::min(ctx->info_.max_per_stage_storage_buffers, *options.max_storage_buffers_per_dispatch);
  }
  ctx->physical_device_ = physical[chosen];
  ctx->create_device(options.float_controls, options.buffer_device_address);
  ctx->load_pipeline_cache(options.pipeline_cache_dir ? *options.pipeline_cache_dir
                                                      : detail::default_pipeline_cache_dir());
  return ctx;
}

void Context::create_instance(bool validation) {
  // Chained into instance creation too, so messages from vkCreateInstance/vkDestroyInstance arrive.
  VkDebugUtilsMessengerCreateInfoEXT messenger_info{};
  messenger_info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  messenger_info.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = &Context::on_debug_message;
  messenger_info.pUserData = this;
  // Synchronization validation catches missing barriers, the executor's most likely bug.
  const VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{};
  features.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT;
  features.pNext = &messenger_info;
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;

  const void* next = nullptr;
  if (validation)
    next = detail::validation_features_available() ? static_cast<const void*>(&features) : &messenger_info;
  const VkResult result = detail::create_instance(validation, next, &instance_);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER) {
    instance_ = VK_NULL_HANDLE;
    throw NoDeviceError(
        "no Vulkan driver found (vkCreateInstance returned VK_ERROR_INCOMPATIBLE_DRIVER: the loader found no "
        "installable client driver, or none supporting Vulkan 1.1). " +
            detail::no_device_advice(),
        {});
  }
  check(result, "creating the Vulkan instance");
  if (!validation) return;
  const auto create_messenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
  if (!create_messenger) check(VK_ERROR_EXTENSION_NOT_PRESENT, "loading vkCreateDebugUtilsMessengerEXT");
  check(create_messenger(instance_, &messenger_info, nullptr, &messenger_), "creating the validation messenger");
}

void Context::create_device(bool float_controls, bool buffer_device_address) {
  const std::vector<VkExtensionProperties> available = device_extensions(physical_device_);
  std::vector<const char*> extensions;
  // The spec requires enabling the portability subset wherever a device offers it (MoltenVK).
  if (has_extension(available, "VK_KHR_portability_subset")) extensions.push_back("VK_KHR_portability_subset");
  // Creation feedback tells whether a pipeline came from the cache; core in 1.3, an extension before.
  if (has_extension(available, VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME)) {
    extensions.push_back(VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME);
    creation_feedback_ = true;
  }
  std::uint32_t instance_version = VK_API_VERSION_1_0;
  check(vkEnumerateInstanceVersion(&instance_version), "querying the Vulkan loader version");
  // The instance asks for min(loader, 1.3) (device.cpp), so the version in use is the lower of the
  // loader's and the device's.
  const std::uint32_t version = std::min(instance_version, info_.api_version);
  if (!creation_feedback_) creation_feedback_ = version >= VK_API_VERSION_1_3;
  // Float controls are core in 1.2 (their properties were read only there).
  if (float_controls && version >= VK_API_VERSION_1_2) {
    preserve_nan_inf_signed_zero_ = info_.can_preserve_nan_inf_signed_zero;
    preserve_denormals_ = info_.can_preserve_denormals;
  }

  // The matrix-unit matmul (src/vk/kernels/matmul_units.cpp) needs the cooperative matrix
  // extension, bf16 where the device has it, 16-bit shader floats and the Vulkan memory model: all
  // enabled wherever the device reports cooperative matrix shapes (Vulkan 1.2 and later).
  const bool matrix_units = version >= VK_API_VERSION_1_2 && !info_.matrix_units.shapes.empty();
  if (matrix_units) {
    extensions.push_back("VK_KHR_cooperative_matrix");
    if (info_.matrix_units.bfloat16) extensions.push_back("VK_KHR_shader_bfloat16");
  }

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{};
  queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue_info.queueFamilyIndex = info_.compute_queue_family;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkDeviceCreateInfo device_info{};
  device_info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  device_info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  device_info.ppEnabledExtensionNames = extensions.data();
  // Features are enabled only on request, except 16-bit storage, which f16 and bf16 values need
  // (their buffers hold 2 bytes per element) and which changes nothing for other graphs.
  // VkPhysicalDeviceVulkan12Features may be chained only on a 1.2 device (float controls above need
  // no feature: they are properties the shaders' execution modes rely on).
  VkPhysicalDeviceVulkan12Features features12{};
  features12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  storage16.storageBuffer16BitAccess = info_.storage_buffer_16bit_access ? VK_TRUE : VK_FALSE;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &storage16;
  if (info_.storage_buffer_16bit_access) device_info.pNext = &features;
  if (buffer_device_address && version >= VK_API_VERSION_1_2) {
    VkPhysicalDeviceVulkan12Features supported12{};
    supported12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    VkPhysicalDeviceFeatures2 supported{};
    supported.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    supported.pNext = &supported12;
    vkGetPhysicalDeviceFeatures2(physical_device_, &supported);
    buffer_device_address_ = supported12.bufferDeviceAddress == VK_TRUE;
    shader_int64_ = buffer_device_address_ && supported.features.shaderInt64 == VK_TRUE;
    features12.bufferDeviceAddress = buffer_device_address_ ? VK_TRUE : VK_FALSE;
    features.features.shaderInt64 = shader_int64_ ? VK_TRUE : VK_FALSE;
    // With pNext set, pEnabledFeatures must stay null: VkPhysicalDeviceFeatures2 replaces it.
    if (buffer_device_address_) {
      storage16.pNext = &features12;
      device_info.pNext = &features;
    }
  }
  detail::MatrixUnitFeatureStorage unit_features;
  if (matrix_units) {
    features12.shaderFloat16 = info_.matrix_units.shader_float16 ? VK_TRUE : VK_FALSE;
    features12.vulkanMemoryModel = info_.matrix_units.vulkan_memory_model ? VK_TRUE : VK_FALSE;
    features12.pNext = detail::chain_matrix_unit_features(info_.matrix_units, features12.pNext, unit_features);
    storage16.pNext = &features12;
    device_info.pNext = &features;
  }
  check(vkCreateDevice(physical_device_, &device_info, nullptr, &device_),
        "creating the logical device on " + info_.name);
  vkGetDeviceQueue(device_, info_.compute_queue_family, 0, &queue_);
  vkGetPhysicalDeviceMemoryProperties(physical_device_, &memory_properties_);

  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = info_.compute_queue_family;
  check(vkCreateCommandPool(device_, &pool_info, nullptr, &command_pool_), "creating the command pool");
}

void Context::load_pipeline_cache(const std::string& dir) {
  detail::LoadedPipelineCache loaded;
  if (!dir.empty()) {
    cache_status_.path = detail::pipeline_cache_path(dir, info_);
    loaded = detail::read_pipeline_cache(cache_status_.path, info_);
    cache_status_.ignored_reason = loaded.ignored_reason;
  }
  VkPipelineCacheCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  info.initialDataSize = loaded.blob.size();
  info.pInitialData = loaded.blob.empty() ? nullptr : loaded.blob.data();
  const VkResult result = vkCreatePipelineCache(device_, &info, nullptr, &pipeline_cache_);
  if (result != VK_SUCCESS && !loaded.blob.empty()) {
    // Drivers should ignore data they cannot use, but one that refuses it still gets an empty cache.
    cache_status_.ignored_reason =
        cache_status_.path + ": the driver refused it (" + std::string(result_name(result)) + ")";
    loaded.blob.clear();
    info.initialDataSize = 0;
    info.pInitialData = nullptr;
    check(vkCreatePipelineCache(device_, &info, nullptr, &pipeline_cache_), "creating an empty pipeline cache");
  } else {
    check(result, "creating the pipeline cache");
  }
  cache_status_.loaded = !loaded.blob.empty();
  cache_status_.loaded_bytes = loaded.blob.size();
  cache_saved_ = std::move(loaded.blob);
}

bool Context::save_pipeline_cache() {
  if (cache_status_.path.empty() || pipeline_cache_ == VK_NULL_HANDLE) return true;
  if (!usable()) {
    cache_status_.save_error = "not saved: the context is unusable";
    return false;
  }
  std::vector<std::byte> data;
  VkResult result = VK_INCOMPLETE;
  // The cache can grow between the size query and the copy (VK_INCOMPLETE): query again.
  while (result == VK_INCOMPLETE) {
    std::size_t size = 0;
    check(vkGetPipelineCacheData(device_, pipeline_cache_, &size, nullptr), "querying the pipeline cache size");
    data.resize(size);
    result = vkGetPipelineCacheData(device_, pipeline_cache_, &size, data.data());
    data.resize(size);
  }
  check(result, "reading the pipeline cache");
  if (data.empty() || data == cache_saved_) return true;
  if (auto error = detail::write_pipeline_cache(cache_status_.path, data)) {
    cache_status_.save_error = *error;
    return false;
  }
  cache_status_.save_error.clear();
  cache_saved_ = std::move(data);
  return true;
}

Context::~Context() {
  if (device_ != VK_NULL_HANDLE) {
    // Errors cannot leave a destructor; a lost device reports them here and is torn down anyway.
    (void)vkDeviceWaitIdle(device_);
    try {
      save_pipeline_cache();
    } catch (const Error&) {
    }
    // Nothing else can use the shared pipelines now (their users keep the context alive); a
    // shared_ptr still held elsewhere is left without handles, so its destructor does nothing.
    for (auto& [key, held] : pipelines_) held.pipeline->release();
    pipelines_.clear();
    for (VkFence fence : idle_fences_) vkDestroyFence(device_, fence, nullptr);
    if (pipeline_cache_ != VK_NULL_HANDLE) vkDestroyPipelineCache(device_, pipeline_cache_, nullptr);
    if (command_pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_, command_pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
  if (messenger_ != VK_NULL_HANDLE) {
    const auto destroy_messenger = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy_messenger) destroy_messenger(instance_, messenger_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

std::vector<std::string> Context::validation_messages() const {
  std::lock_guard lock(messages_mutex_);
  return messages_;
}

void Context::clear_validation_messages() {
  std::lock_guard lock(messages_mutex_);
  messages_.clear();
}

void Context::record_message(std::string message) {
  {
    std::lock_guard lock(messages_mutex_);
    messages_.push_back(message);
  }
  if (on_message_) on_message_(message);
}

VKAPI_ATTR VkBool32 VKAPI_CALL Context::on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                         VkDebugUtilsMessageTypeFlagsEXT types,
                                                         const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  std::string message = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "[error" : "[warning";
  if (types & VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT) message += ", performance";
  message += "] ";
  if (data->pMessageIdName) message += std::string(data->pMessageIdName) + ": ";
  if (data->pMessage) message += data->pMessage;
  // Exceptions must not unwind through the driver; a failing user callback loses only its message.
  try {
    static_cast<Context*>(user)->record_message(std::move(message));
  } catch (...) {
  }
  return VK_FALSE;  // never abort the Vulkan call that triggered the message
}

void Context::require_usable(std::string_view operation) const {
  if (usable()) return;
  throw DeviceError(unusable_result_, std::string(operation) + " (the context is unusable since " +
                                          unusable_operation_ + " failed with " +
                                          std::string(result_name(unusable_result_)) + ")");
}

void Context::check(VkResult result, std::string_view operation) {
  if (result == VK_SUCCESS) [[likely]]
    return;
  if (result == VK_ERROR_DEVICE_LOST) mark_unusable(result, operation);
  throw_device_error(result, operation);
}

void Context::mark_unusable(VkResult result, std::string_view operation) {
  if (!usable_.exchange(false)) return;  // keep the first cause
  unusable_result_ = result;
  unusable_operation_ = operation;
}

VkFence Context::take_fence() {
  {
    std::lock_guard lock(fences_mutex_);
    if (!idle_fences_.empty()) {
      const VkFence fence = idle_fences_.back();
      idle_fences_.pop_back();
      return fence;
    }
  }
  VkFenceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkFence fence = VK_NULL_HANDLE;
  check(vkCreateFence(device_, &info, nullptr, &fence), "creating a fence");
  return fence;
}

void Context::give_back_fence(VkFence fence) {
  if (fence == VK_NULL_HANDLE) return;
  if (vkResetFences(device_, 1, &fence) != VK_SUCCESS) {
    vkDestroyFence(device_, fence, nullptr);
    return;
  }
  std::lock_guard lock(fences_mutex_);
  idle_fences_.push_back(fence);
}

std::shared_ptr<const ComputePipeline> Context::pipeline(std::string_view shader, std::uint32_t storage_buffers,
                                                         std::uint32_t push_constant_bytes,
                                                         std::span<const std::uint32_t> specialization, bool* created) {
  std::string key =
      std::string(shader) + "#" + std::to_string(storage_buffers) + "#" + std::to_string(push_constant_bytes);
  for (std::uint32_t c : specialization) key += "," + std::to_string(c);
  std::lock_guard lock(pipelines_mutex_);
  const std::uint64_t now = pipeline_stats_.created + pipeline_stats_.reused;
  if (auto it = pipelines_.find(key); it != pipelines_.end()) {
    it->second.last_use = now;
    ++pipeline_stats_.reused;
    if (created) *created = false;
    return it->second.pipeline;
  }
  auto made = std::make_shared<ComputePipeline>(*this, shader, storage_buffers, push_constant_bytes, specialization);
  ++pipeline_stats_.created;
  if (created) *created = true;
  // Every pipeline handed out stays in the set while it is in use, so that ~Context can release
  // it before the device. Past the bound, the least recently requested unused ones go; use_count()
  // is exact here, since only this lock hands out copies and holders can only drop theirs.
  pipelines_.emplace(std::move(key), HeldPipeline{made, now});
  while (pipelines_.size() > max_cached_pipelines_) {
    auto oldest = pipelines_.end();
    for (auto it = pipelines_.begin(); it != pipelines_.end(); ++it) {
      if (it->second.pipeline.use_count() == 1 &&
          (oldest == pipelines_.end() || it->second.last_use < oldest->second.last_use))
        oldest = it;
    }
    if (oldest == pipelines_.end()) break;  // all in use
    pipelines_.erase(oldest);
    ++pipeline_stats_.evicted;
  }
  return made;
}

PipelineStats Context::pipeline_stats() const {
  std::lock_guard lock(pipelines_mutex_);
  PipelineStats stats = pipeline_stats_;
  stats.held = pipelines_.size();
  return stats;
}

void Context::drain_if_unusable() {
  if (usable() || drained_ || device_ == VK_NULL_HANDLE) return;
  drained_ = true;
  (void)vkDeviceWaitIdle(device_);
}

}  // namespace tg::vk
