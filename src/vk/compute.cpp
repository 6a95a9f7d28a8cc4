// Compute pipelines from embedded SPIR-V, descriptor sets, dispatch recording.
#include "vk/compute.h"

#include <string>
#include <utility>
#include <vector>

#include "tensorgrad/vk/shaders.h"
#include "vk/spirv_coopmat.h"
#include "vk/spirv_float_controls.h"

namespace tg::vk {

ComputePipeline::ComputePipeline(std::shared_ptr<Context> context, std::string_view shader,
                                 std::uint32_t storage_buffers, std::uint32_t push_constant_bytes,
                                 std::span<const std::uint32_t> specialization)
    : owner_(std::move(context)),
      context_(owner_.get()),
      shader_(shader),
      storage_buffers_(storage_buffers),
      push_constant_bytes_(push_constant_bytes) {
  create(specialization);
}

ComputePipeline::ComputePipeline(Context& context, std::string_view shader, std::uint32_t storage_buffers,
                                 std::uint32_t push_constant_bytes, std::span<const std::uint32_t> specialization)
    : context_(&context),
      shader_(shader),
      storage_buffers_(storage_buffers),
      push_constant_bytes_(push_constant_bytes) {
  create(specialization);
}

void ComputePipeline::create(std::span<const std::uint32_t> specialization) {
  const std::uint32_t storage_buffers = storage_buffers_, push_constant_bytes = push_constant_bytes_;
  // Throws for unknown names; float controls where the context enables them (see
  // spirv_float_controls.h).
  // The matrix-unit matmul's pipelines are made from a rewrite of its embedded module
  // (spirv_coopmat.h); every other shader is embedded as it runs.
  const std::optional<std::vector<std::uint32_t>> derived = derived_shader_spirv(shader_);
  const std::vector<std::uint32_t> spirv =
      with_float_controls(derived ? std::span<const std::uint32_t>(*derived) : shader_spirv(shader_),
                          {.preserve_nan_inf_signed_zero = context_->preserves_nan_inf_signed_zero(),
                           .preserve_denormals = context_->preserves_denormals()});
  const std::string what = "the compute pipeline '" + shader_ + "'";
  if (push_constant_bytes % 4 != 0 || push_constant_bytes > context_->info().max_push_constants_size) {
    throw Error(what + ": " + std::to_string(push_constant_bytes) +
                " push-constant bytes must be a multiple of 4 and at most maxPushConstantsSize (" +
                std::to_string(context_->info().max_push_constants_size) + ")");
  }
  context_->require_usable("creating " + what);
  const VkDevice device = context_->device();
  VkShaderModule module = VK_NULL_HANDLE;
  try {
    std::vector<VkDescriptorSetLayoutBinding> bindings(storage_buffers);
    for (std::uint32_t i = 0; i < storage_buffers; ++i) {
      bindings[i].binding = i;
      bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bindings[i].descriptorCount = 1;
      bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo set_info{};
    set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    set_info.bindingCount = storage_buffers;
    set_info.pBindings = bindings.data();
    context_->check(vkCreateDescriptorSetLayout(device, &set_info, nullptr, &set_layout_),
                    "creating the descriptor set layout of " + what);

    VkPushConstantRange push_range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_constant_bytes};
    VkPipelineLayoutCreateInfo layout_info{};
    layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    layout_info.setLayoutCount = 1;
    layout_info.pSetLayouts = &set_layout_;
    layout_info.pushConstantRangeCount = push_constant_bytes ? 1 : 0;
    layout_info.pPushConstantRanges = push_constant_bytes ? &push_range : nullptr;
    context_->check(vkCreatePipelineLayout(device, &layout_info, nullptr, &layout_),
                    "creating the pipeline layout of " + what);

    VkShaderModuleCreateInfo module_info{};
    module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    module_info.codeSize = spirv.size() * sizeof(std::uint32_t);
    module_info.pCode = spirv.data();
    context_->check(vkCreateShaderModule(device, &module_info, nullptr, &module),
                    "creating the shader module of " + what);

    VkComputePipelineCreateInfo pipeline_info{};
    pipeline_info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    pipeline_info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    pipeline_info.stage.module = module;
    pipeline_info.stage.pName = "main";
    std::vector<VkSpecializationMapEntry> entries(specialization.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      entries[i] = {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(4 * i), 4};
    }
    VkSpecializationInfo spec_info{static_cast<std::uint32_t>(entries.size()), entries.data(),
                                   specialization.size_bytes(), specialization.data()};
    if (!specialization.empty()) pipeline_info.stage.pSpecializationInfo = &spec_info;
    pipeline_info.layout = layout_;
    VkPipelineCreationFeedback feedback{};
    VkPipelineCreationFeedback stage_feedback{};
    VkPipelineCreationFeedbackCreateInfo feedback_info{};
    if (context_->has_creation_feedback()) {
      feedback_info.sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO;
      feedback_info.pPipelineCreationFeedback = &feedback;
      feedback_info.pipelineStageCreationFeedbackCount = 1;
      feedback_info.pPipelineStageCreationFeedbacks = &stage_feedback;
      pipeline_info.pNext = &feedback_info;
    }
    context_->check(
        vkCreateComputePipelines(device, context_->pipeline_cache(), 1, &pipeline_info, nullptr, &pipeline_),
        "creating " + what);
    if (feedback.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) {
      cache_hit_ = (feedback.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT) != 0;
    }
  } catch (...) {
    if (module != VK_NULL_HANDLE) vkDestroyShaderModule(device, module, nullptr);
    release();
    throw;
  }
  // The pipeline holds the compiled code; the module is not needed after creation.
  vkDestroyShaderModule(device, module, nullptr);
}

ComputePipeline::~ComputePipeline() { release(); }

void ComputePipeline::release() noexcept {
  if (pipeline_ == VK_NULL_HANDLE && layout_ == VK_NULL_HANDLE && set_layout_ == VK_NULL_HANDLE) return;
  const VkDevice device = context_->device();
  context_->drain_if_unusable();
  if (pipeline_ != VK_NULL_HANDLE) vkDestroyPipeline(device, pipeline_, nullptr);
  if (layout_ != VK_NULL_HANDLE) vkDestroyPipelineLayout(device, layout_, nullptr);
  if (set_layout_ != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(device, set_layout_, nullptr);
  pipeline_ = VK_NULL_HANDLE;
  layout_ = VK_NULL_HANDLE;
  set_layout_ = VK_NULL_HANDLE;
}

DescriptorPool::DescriptorPool(std::shared_ptr<Context> context, std::uint32_t max_sets,
                               std::uint32_t max_storage_buffers)
    : context_(std::move(context)) {
  context_->require_usable("creating a descriptor pool");
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, max_storage_buffers};
  VkDescriptorPoolCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  info.maxSets = max_sets;
  info.poolSizeCount = 1;
  info.pPoolSizes = &size;
  context_->check(vkCreateDescriptorPool(context_->device(), &info, nullptr, &pool_), "creating a descriptor pool");
}

DescriptorPool::~DescriptorPool() {
  if (pool_ == VK_NULL_HANDLE) return;
  context_->drain_if_unusable();
  vkDestroyDescriptorPool(context_->device(), pool_, nullptr);
}

VkDescriptorSet DescriptorPool::allocate(const ComputePipeline& pipeline, std::span<const BufferBinding> bindings) {
  const DeviceInfo& info = context_->info();
  const std::string what = "binding buffers to '" + pipeline.shader() + "'";
  if (bindings.size() != pipeline.storage_buffers()) {
    throw Error(what + ": " + std::to_string(bindings.size()) + " buffers given, the pipeline has " +
                std::to_string(pipeline.storage_buffers()) + " bindings");
  }
  std::vector<VkDescriptorBufferInfo> buffer_infos(bindings.size());
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const BufferBinding& b = bindings[i];
    const std::string where = what + ", binding " + std::to_string(i) + ": ";
    if (!b.buffer || b.buffer->handle() == VK_NULL_HANDLE) throw Error(where + "no buffer");
    if (b.buffer->use() != MemoryUse::device) throw Error(where + "not a device (storage) buffer");
    if (b.offset % info.min_storage_buffer_offset_alignment != 0 || b.offset >= b.buffer->size()) {
      throw Error(where + "offset " + std::to_string(b.offset) +
                  " is outside the buffer or not a multiple of "
                  "minStorageBufferOffsetAlignment (" +
                  std::to_string(info.min_storage_buffer_offset_alignment) + ")");
    }
    const VkDeviceSize range = b.range == VK_WHOLE_SIZE ? b.buffer->size() - b.offset : b.range;
    if (range == 0 || range > b.buffer->size() - b.offset || range > info.max_storage_buffer_range) {
      throw Error(where + "range of " + std::to_string(range) + " bytes exceeds the buffer or maxStorageBufferRange (" +
                  std::to_string(info.max_storage_buffer_range) + ")");
    }
    buffer_infos[i] = {b.buffer->handle(), b.offset, range};
  }
  context_->require_usable(what);
  const VkDescriptorSetLayout layout = pipeline.set_layout();
  VkDescriptorSetAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  alloc.descriptorPool = pool_;
  alloc.descriptorSetCount = 1;
  alloc.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  context_->check(vkAllocateDescriptorSets(context_->device(), &alloc, &set),
                  "allocating a descriptor set for " + what);
  std::vector<VkWriteDescriptorSet> writes(bindings.size());
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<std::uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &buffer_infos[i];
  }
  vkUpdateDescriptorSets(context_->device(), static_cast<std::uint32_t>(writes.size()), writes.data(), 0, nullptr);
  return set;
}

std::uint32_t group_count_x(const Context& context, std::uint64_t n, std::uint32_t group_size) {
  const std::uint64_t groups = (n + group_size - 1) / group_size;
  const std::uint32_t limit = context.info().max_compute_work_group_count[0];
  if (groups > limit) {
    throw Error("a dispatch over " + std::to_string(n) + " items in groups of " + std::to_string(group_size) +
                " needs " + std::to_string(groups) + " workgroups, above maxComputeWorkGroupCount[0] (" +
                std::to_string(limit) + ")");
  }
  return static_cast<std::uint32_t>(groups);
}

void record_dispatch(VkCommandBuffer cmd, const ComputePipeline& pipeline, VkDescriptorSet set,
                     std::span<const std::byte> push_constants, std::array<std::uint32_t, 3> groups) {
  if (push_constants.size() != pipeline.push_constant_bytes()) {
    throw Error("dispatching '" + pipeline.shader() + "': " + std::to_string(push_constants.size()) +
                " push-constant bytes given, the pipeline takes " + std::to_string(pipeline.push_constant_bytes()));
  }
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle());
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0, 1, &set, 0, nullptr);
  if (!push_constants.empty()) {
    vkCmdPushConstants(cmd, pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       static_cast<std::uint32_t>(push_constants.size()), push_constants.data());
  }
  vkCmdDispatch(cmd, groups[0], groups[1], groups[2]);
}

void record_compute_barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0,
                       nullptr, 0, nullptr);
}

}  // namespace tg::vk
