#pragma once
// tg::vk::Context: one Vulkan device ready for compute. It owns the instance (with the Khronos
// validation layer and a message collector when validation is on), the chosen physical device, a
// logical device with one compute queue, a command pool and the on-disk pipeline cache.
//
// A Context is shared (std::shared_ptr) by everything created on it, so buffers and programs keep
// the device alive. It also keeps the compute pipelines programs compiled (pipeline()), so a
// second program reuses them instead of compiling again. It is not thread-safe, except
// validation_messages(), clear_validation_messages(), pipeline() and pipeline_stats(): use one
// Context from one thread at a time.
#include <vulkan/vulkan.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/vk/device.h"
#include "tensorgrad/vk/error.h"

namespace tg::vk {

class ComputePipeline;  // src/vk/compute.h (internal)

struct ContextOptions {
  // Enable VK_LAYER_KHRONOS_validation (and its synchronization checks). Unset: on when the
  // environment has TG_VK_VALIDATION=1. When on and the layer is not installed, create() throws.
  std::optional<bool> validation;
  // Which device: an index into list_devices() or a case-insensitive substring of its name. Unset:
  // the environment's TG_VK_DEVICE; empty or unset there: discrete GPU > integrated > virtual > CPU.
  std::optional<std::string> device;
  // Directory of the pipeline cache file. Unset: $XDG_CACHE_HOME/tensorgrad, else
  // ~/.cache/tensorgrad. Empty: no file (the cache lives only as long as the Context).
  std::optional<std::string> pipeline_cache_dir;
  // Also called with each validation message as it arrives, including those reported while the
  // Context is being destroyed (leaked objects), which validation_messages() can no longer show.
  std::function<void(const std::string&)> on_validation_message;
  // Bind at most this many storage buffers per dispatch, when below the device's
  // maxPerStageDescriptorStorageBuffers: info() then reports this limit, and programs are built
  // as for a device that has it (to check that a graph runs on smaller devices). Unset: the
  // device's own limit.
  std::optional<std::uint32_t> max_storage_buffers_per_dispatch;
  // Ask the driver, through float controls (Vulkan 1.2), to keep NaN, ±Inf and -0 and denormals in
  // every shader, as far as the device supports it (DeviceInfo::can_preserve_*): without them a
  // driver may assume there are none (NVIDIA's drops NaN through minimum, maximum and relu and
  // flushes denormals). False: the driver's defaults.
  bool float_controls = true;
  // Enable buffer device addresses (the Vulkan 1.2 feature bufferDeviceAddress) where the device
  // has them, and shaderInt64 with them where it has that too: a shader computes an address as
  // base + index * size, which needs 64-bit integers once a value passes 4 GiB. Device buffers
  // (MemoryUse::device) then carry VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT and memory allocated
  // for device addresses, and Buffer::device_address() works. Off by default: the executor binds
  // every value through a descriptor and needs neither; this is for measuring the alternative
  // (bench/vk_stream_probe.cpp).
  bool buffer_device_address = false;
  // The most compute pipelines the context keeps for reuse (pipeline()). Past it, creating one
  // destroys the least recently requested pipelines that no Program holds; one in use is never
  // destroyed (0: keep only those in use). Random graphs fuse elementwise runs into pipelines whose specialization
  // constants differ per graph, so without a bound a long run would keep every one (lavapipe's take tens of KiB of JIT
  // code each).
  std::size_t max_cached_pipelines = 1024;
};

// Compute pipelines asked of a Context (Context::pipeline) since it was created.
struct PipelineStats {
  std::size_t created = 0;  // compiled (shader module, layouts, vkCreateComputePipelines)
  std::size_t reused = 0;   // served by a pipeline the context already held
  std::size_t evicted = 0;  // destroyed to stay within ContextOptions::max_cached_pipelines
  std::size_t held = 0;     // held now
};

// What happened to the on-disk pipeline cache.
struct PipelineCacheStatus {
  std::string path;     // empty: no file
  bool loaded = false;  // a file was found and its contents handed to the driver
  std::size_t loaded_bytes = 0;
  std::string ignored_reason;  // why an existing file was not used (corrupt, another device, ...)
  std::string save_error;      // why the last save failed; empty if it did not
};

class Context {
 public:
  // Picks a device (see ContextOptions) and brings it up. Throws NoDeviceError when no usable device
  // exists or the selector matches none, DeviceError when a Vulkan call fails.
  static std::shared_ptr<Context> create(ContextOptions options = {});

  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();  // waits for the device to go idle and saves the pipeline cache

  const DeviceInfo& info() const { return info_; }

  bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }
  // Every warning and error the validation layer reported so far, as "[severity] id: message".
  std::vector<std::string> validation_messages() const;
  void clear_validation_messages();

  // False once the device was lost (or a submission timed out); then every further use throws.
  bool usable() const { return usable_.load(); }
  // Throws DeviceError (the result that made the context unusable) if usable() is false.
  void require_usable(std::string_view operation) const;
  // check() for calls on this device: a VK_ERROR_DEVICE_LOST also makes the context unusable.
  void check(VkResult result, std::string_view operation);
  // Marks the context unusable with `result` as the reason (device lost, submission timeout).
  void mark_unusable(VkResult result, std::string_view operation);
  // Once unusable, waits (once) for the device to go idle, so destructors do not free objects a
  // hung submission may still use. A no-op while usable.
  void drain_if_unusable();

  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical_device() const { return physical_device_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  VkCommandPool command_pool() const { return command_pool_; }
  VkPipelineCache pipeline_cache() const { return pipeline_cache_; }
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return memory_properties_; }
  // VkPipelineCreationFeedback is available (Vulkan 1.3 or VK_EXT_pipeline_creation_feedback).
  bool has_creation_feedback() const { return creation_feedback_; }
  // What every pipeline of this context asks of 32-bit floats (ContextOptions::float_controls):
  // NaN, ±Inf and -0 kept; denormals kept.
  bool preserves_nan_inf_signed_zero() const { return preserve_nan_inf_signed_zero_; }
  bool preserves_denormals() const { return preserve_denormals_; }
  // bufferDeviceAddress was asked for (ContextOptions::buffer_device_address), is supported and is
  // enabled; shaderInt64 likewise (enabled only together with device addresses).
  bool has_buffer_device_address() const { return buffer_device_address_; }
  bool has_shader_int64() const { return shader_int64_; }

  // Fences for submissions, reused: creating and destroying a fence for every submission cost
  // about 0.5 ms on NVIDIA's Linux driver (H200, driver 580), 50x a tiny submission's round trip.
  // take_fence() gives an unsignaled fence (a pooled one, or a new one); give_back_fence() takes
  // back one whose submission has completed (or that was never submitted) and resets it. Both are
  // thread-safe; the context destroys the pooled fences.
  VkFence take_fence();
  void give_back_fence(VkFence fence);

  // The compute pipeline of `shader` with this many storage-buffer bindings, push-constant bytes
  // and specialization constants (see ComputePipeline): the one the context holds for that key, or
  // a new one that it keeps from then on (up to ContextOptions::max_cached_pipelines). Programs
  // share them: compiling is most of a Program's build time (lavapipe compiles every pipeline with
  // LLVM). `created`, when given, says whether this call compiled it. Thread-safe; a compile holds
  // the lock, so two threads never compile the same key twice. The context destroys what it holds
  // before its device: a caller keeps the context alive while it uses the pipeline.
  std::shared_ptr<const ComputePipeline> pipeline(std::string_view shader, std::uint32_t storage_buffers,
                                                  std::uint32_t push_constant_bytes,
                                                  std::span<const std::uint32_t> specialization = {},
                                                  bool* created = nullptr);
  PipelineStats pipeline_stats() const;

  const PipelineCacheStatus& pipeline_cache_status() const { return cache_status_; }
  // Writes the pipeline cache file now if its contents changed; false (and save_error) on failure.
  // The destructor saves too.
  bool save_pipeline_cache();

 private:
  Context() = default;
  void create_instance(bool validation);
  void create_device(bool float_controls, bool buffer_device_address);
  void load_pipeline_cache(const std::string& dir);
  void record_message(std::string message);
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                         VkDebugUtilsMessageTypeFlagsEXT types,
                                                         const VkDebugUtilsMessengerCallbackDataEXT* data, void* user);

  DeviceInfo info_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory_properties_{};
  bool creation_feedback_ = false;
  bool preserve_nan_inf_signed_zero_ = false;
  bool preserve_denormals_ = false;
  bool buffer_device_address_ = false;
  bool shader_int64_ = false;

  std::atomic<bool> usable_{true};
  VkResult unusable_result_ = VK_SUCCESS;
  std::string unusable_operation_;
  bool drained_ = false;

  PipelineCacheStatus cache_status_;
  std::vector<std::byte> cache_saved_;  // what the file holds, to skip rewriting unchanged data

  struct HeldPipeline {
    std::shared_ptr<ComputePipeline> pipeline;
    std::uint64_t last_use = 0;  // the request count when it was last requested
  };
  mutable std::mutex pipelines_mutex_;
  std::map<std::string, HeldPipeline, std::less<>> pipelines_;  // by shader, bindings, push bytes, constants
  std::size_t max_cached_pipelines_ = 0;
  PipelineStats pipeline_stats_;

  std::mutex fences_mutex_;
  std::vector<VkFence> idle_fences_;  // unsignaled, ready for take_fence()

  mutable std::mutex messages_mutex_;
  std::vector<std::string> messages_;
  std::function<void(const std::string&)> on_message_;
};

}  // namespace tg::vk
