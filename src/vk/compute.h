#pragma once
// Internal: a compute pipeline built from an embedded shader, descriptor sets for its storage
// buffers, and recording one dispatch. The model follows Kompute: an algorithm is SPIR-V + buffer
// bindings + push constants; the executor will record many dispatches into one command buffer.
#include <vulkan/vulkan.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tensorgrad/vk/context.h"
#include "vk/buffer.h"

namespace tg::vk {

class ComputePipeline {
 public:
  // The shader's bindings 0..storage_buffers-1 in set 0 are storage buffers; push constants are
  // `push_constant_bytes` (a multiple of 4) at offset 0. Compiled through the context's pipeline cache.
  // `specialization` gives the shader's specialization constants 0..k-1 (32-bit values). Keeps the
  // context alive.
  ComputePipeline(std::shared_ptr<Context> context, std::string_view shader, std::uint32_t storage_buffers,
                  std::uint32_t push_constant_bytes, std::span<const std::uint32_t> specialization = {});
  // The same, without keeping the context alive: for the context's own set of shared pipelines
  // (Context::pipeline), which would otherwise own the context that owns them. The context
  // destroys their handles before its device (see ~Context), so a pipeline outliving its context
  // holds none.
  ComputePipeline(Context& context, std::string_view shader, std::uint32_t storage_buffers,
                  std::uint32_t push_constant_bytes, std::span<const std::uint32_t> specialization = {});
  ComputePipeline(const ComputePipeline&) = delete;
  ComputePipeline& operator=(const ComputePipeline&) = delete;
  ~ComputePipeline();

  const std::string& shader() const { return shader_; }
  std::uint32_t storage_buffers() const { return storage_buffers_; }
  std::uint32_t push_constant_bytes() const { return push_constant_bytes_; }
  VkPipeline handle() const { return pipeline_; }
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  // Whether the driver found the pipeline in the cache (VkPipelineCreationFeedback); unknown when
  // the device has no creation feedback or did not say.
  std::optional<bool> cache_hit() const { return cache_hit_; }

 private:
  friend class Context;  // releases its shared pipelines before destroying the device
  void create(std::span<const std::uint32_t> specialization);
  void release() noexcept;

  std::shared_ptr<Context> owner_;  // null for the context's shared pipelines
  Context* context_;
  std::string shader_;
  std::uint32_t storage_buffers_;
  std::uint32_t push_constant_bytes_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  std::optional<bool> cache_hit_;
};

// A range of a buffer bound to one storage-buffer binding.
struct BufferBinding {
  const Buffer* buffer = nullptr;
  VkDeviceSize offset = 0;
  VkDeviceSize range = VK_WHOLE_SIZE;  // to the end of the buffer
};

// Descriptor sets for storage buffers; all are freed with the pool.
class DescriptorPool {
 public:
  DescriptorPool(std::shared_ptr<Context> context, std::uint32_t max_sets, std::uint32_t max_storage_buffers);
  DescriptorPool(const DescriptorPool&) = delete;
  DescriptorPool& operator=(const DescriptorPool&) = delete;
  ~DescriptorPool();

  // A set for `pipeline` with bindings[i] at binding i. Throws tg::Error if the count does not match
  // the pipeline, an offset is misaligned or a range exceeds the buffer or maxStorageBufferRange.
  VkDescriptorSet allocate(const ComputePipeline& pipeline, std::span<const BufferBinding> bindings);

 private:
  std::shared_ptr<Context> context_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
};

// Workgroups needed to cover n items with groups of `group_size`; throws tg::Error if that exceeds
// maxComputeWorkGroupCount[0] (larger launches must be split or made 2-D by the kernel).
std::uint32_t group_count_x(const Context& context, std::uint64_t n, std::uint32_t group_size);

// Records bind pipeline, bind set, push constants and vkCmdDispatch. `push_constants` must be
// exactly the pipeline's push-constant size.
void record_dispatch(VkCommandBuffer cmd, const ComputePipeline& pipeline, VkDescriptorSet set,
                     std::span<const std::byte> push_constants, std::array<std::uint32_t, 3> groups);

// Makes earlier dispatches' writes visible to later dispatches and transfers (and orders their
// reads before later writes): what goes between two dispatches that share a buffer.
void record_compute_barrier(VkCommandBuffer cmd);

}  // namespace tg::vk
