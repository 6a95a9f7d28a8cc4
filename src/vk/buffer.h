#pragma once
// Internal: a VkBuffer with its own VkDeviceMemory, and upload/download through a staging buffer.
// The executor's buffer plan puts many values into a few such buffers ("blocks"), each value bound
// at its own offset and range (see docs/vulkan.md, "Memory").
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "tensorgrad/vk/context.h"

namespace tg::vk {

enum class MemoryUse {
  device,    // storage buffer for kernels: device-local memory
  upload,    // host-visible staging the host writes and a transfer reads
  readback,  // host-visible staging a transfer writes and the host reads (cached where possible)
};

// The memory type for a buffer: among the types allowed by `type_bits` that have every `required`
// flag, the one with the most `preferred` and fewest `avoided` flags (lowest index on ties). Types
// needing features we never enable (protected, AMD device-coherent) are skipped.
std::optional<std::uint32_t> find_memory_type(const VkPhysicalDeviceMemoryProperties& properties,
                                              std::uint32_t type_bits, VkMemoryPropertyFlags required,
                                              VkMemoryPropertyFlags preferred, VkMemoryPropertyFlags avoided);

class Buffer {
 public:
  Buffer() = default;
  // Throws tg::Error before any Vulkan call if `size` is 0 or above maxMemoryAllocationSize. A device
  // buffer may exceed maxStorageBufferRange: that limit applies to each binding's range (checked
  // when a descriptor set is written).
  Buffer(std::shared_ptr<Context> context, VkDeviceSize size, MemoryUse use);
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  VkBuffer handle() const { return buffer_; }
  VkDeviceSize size() const { return size_; }
  MemoryUse use() const { return use_; }
  std::uint32_t memory_type() const { return memory_type_; }
  // The buffer's address for shaders (GL_EXT_buffer_reference), valid while the buffer lives.
  // Throws tg::Error unless this is a device buffer on a context with has_buffer_device_address().
  VkDeviceAddress device_address() const;
  // Persistently mapped host pointer of an upload/readback buffer; nullptr for device buffers.
  std::byte* mapped() const { return mapped_; }
  const std::shared_ptr<Context>& context() const { return context_; }

 private:
  void release() noexcept;

  std::shared_ptr<Context> context_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize size_ = 0;
  MemoryUse use_ = MemoryUse::device;
  std::uint32_t memory_type_ = 0;
  std::byte* mapped_ = nullptr;
};

// Copies `data` into `dst` at `offset` through a staging buffer and a one-shot command buffer, and
// waits. Barriers on both sides order the copy after earlier dispatches and transfers and make it
// visible to later ones, so callers need none.
void upload(Buffer& dst, std::span<const std::byte> data, VkDeviceSize offset = 0);
// Copies `out.size()` bytes from `src` at `offset` into `out`, after earlier dispatches and transfers.
void download(const Buffer& src, std::span<std::byte> out, VkDeviceSize offset = 0);

}  // namespace tg::vk
