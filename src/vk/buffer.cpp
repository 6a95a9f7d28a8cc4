// Buffers, memory-type selection, staged upload and download.
#include "vk/buffer.h"

#include <bit>
#include <cstring>
#include <string>
#include <utility>

#include "vk/commands.h"

namespace tg::vk {

namespace {

// Flags whose memory needs a device feature we do not enable; selecting such a type is invalid.
constexpr VkMemoryPropertyFlags k_never = VK_MEMORY_PROPERTY_PROTECTED_BIT |
                                          VK_MEMORY_PROPERTY_DEVICE_COHERENT_BIT_AMD |
                                          VK_MEMORY_PROPERTY_DEVICE_UNCACHED_BIT_AMD;

std::string bytes_text(VkDeviceSize bytes) {
  std::string text = std::to_string(bytes) + " bytes";
  if (bytes >= (VkDeviceSize{1} << 20)) text += " (" + std::to_string(bytes >> 20) + " MiB)";
  return text;
}

const char* use_name(MemoryUse use) {
  switch (use) {
    case MemoryUse::device:
      return "device";
    case MemoryUse::upload:
      return "upload";
    case MemoryUse::readback:
      return "readback";
  }
  return "?";
}

// Records copy `from` -> `to` between barriers that order it after every earlier compute or
// transfer access and make its writes visible to later dispatches, transfers and host reads.
void record_copy(VkCommandBuffer cmd, VkBuffer from, VkDeviceSize from_offset, VkBuffer to, VkDeviceSize to_offset,
                 VkDeviceSize size) {
  VkMemoryBarrier before{};
  before.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  before.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, nullptr, 0, nullptr);
  VkBufferCopy region{from_offset, to_offset, size};
  vkCmdCopyBuffer(cmd, from, to, 1, &region);
  VkMemoryBarrier after{};
  after.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  after.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  after.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                        VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(
      cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after,
      0, nullptr, 0, nullptr);
}

void check_range(const Buffer& buffer, VkDeviceSize offset, VkDeviceSize size, const char* what) {
  if (offset > buffer.size() || size > buffer.size() - offset) {
    throw Error(std::string(what) + " of " + bytes_text(size) + " at offset " + std::to_string(offset) +
                " does not fit a buffer of " + bytes_text(buffer.size()));
  }
}

}  // namespace

std::optional<std::uint32_t> find_memory_type(const VkPhysicalDeviceMemoryProperties& properties,
                                              std::uint32_t type_bits, VkMemoryPropertyFlags required,
                                              VkMemoryPropertyFlags preferred, VkMemoryPropertyFlags avoided) {
  std::optional<std::uint32_t> best;
  int best_score = 0;
  for (std::uint32_t i = 0; i < properties.memoryTypeCount && i < 32; ++i) {
    const VkMemoryPropertyFlags flags = properties.memoryTypes[i].propertyFlags;
    if (!(type_bits & (1u << i)) || (flags & required) != required || (flags & k_never)) continue;
    const int score = std::popcount(flags & preferred) - std::popcount(flags & avoided);
    if (!best || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

Buffer::Buffer(std::shared_ptr<Context> context, VkDeviceSize size, MemoryUse use)
    : context_(std::move(context)), size_(size), use_(use) {
  const DeviceInfo& info = context_->info();
  const std::string what = std::string(use_name(use)) + " buffer of " + bytes_text(size);
  // Checked here, before Vulkan sees the request: an oversize allocation is invalid usage, not an
  // error code, and drivers may crash or succeed and misbehave on it.
  if (size == 0) throw Error("cannot create an empty " + std::string(use_name(use)) + " buffer");
  if (size > info.max_memory_allocation_size) {
    throw Error("cannot create a " + what + ": it exceeds maxMemoryAllocationSize, " +
                bytes_text(info.max_memory_allocation_size) + " on " + info.name);
  }
  context_->require_usable("creating a " + what);

  VkBufferCreateInfo buffer_info{};
  buffer_info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  buffer_info.size = size;
  buffer_info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (use == MemoryUse::device) buffer_info.usage |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  // Only where the context enabled device addresses: the usage bit and the allocation flag are
  // invalid without the feature, and a default context's buffers stay exactly as they were.
  const bool addressable = use == MemoryUse::device && context_->has_buffer_device_address();
  if (addressable) buffer_info.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  buffer_info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  context_->check(vkCreateBuffer(context_->device(), &buffer_info, nullptr, &buffer_), "creating a " + what);

  VkMemoryRequirements requirements{};
  vkGetBufferMemoryRequirements(context_->device(), buffer_, &requirements);
  // Device buffers avoid host-visible types where there is a choice: on GPUs without resizable BAR
  // that memory is a small window better left for staging.
  VkMemoryPropertyFlags required = 0, preferred = 0, avoided = 0;
  switch (use) {
    case MemoryUse::device:
      preferred = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
      avoided = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
      break;
    case MemoryUse::upload:
      required = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
      avoided = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
      break;
    case MemoryUse::readback:
      required = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
      preferred = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
      avoided = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
      break;
  }
  const auto type =
      find_memory_type(context_->memory_properties(), requirements.memoryTypeBits, required, preferred, avoided);
  if (!type) {
    release();
    throw Error("cannot create a " + what + ": " + info.name + " has no suitable memory type");
  }
  memory_type_ = *type;
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = requirements.size;
  alloc.memoryTypeIndex = memory_type_;
  VkMemoryAllocateFlagsInfo alloc_flags{};
  alloc_flags.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO;
  alloc_flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  if (addressable) alloc.pNext = &alloc_flags;
  try {
    context_->check(vkAllocateMemory(context_->device(), &alloc, nullptr, &memory_), "allocating memory for a " + what);
    context_->check(vkBindBufferMemory(context_->device(), buffer_, memory_, 0), "binding memory to a " + what);
    if (use != MemoryUse::device) {
      void* pointer = nullptr;
      context_->check(vkMapMemory(context_->device(), memory_, 0, VK_WHOLE_SIZE, 0, &pointer), "mapping a " + what);
      mapped_ = static_cast<std::byte*>(pointer);
    }
  } catch (...) {
    release();
    throw;
  }
}

VkDeviceAddress Buffer::device_address() const {
  if (buffer_ == VK_NULL_HANDLE) throw Error("device_address() of an empty buffer");
  if (use_ != MemoryUse::device || !context_->has_buffer_device_address()) {
    throw Error(std::string("device_address() of a ") + use_name(use_) + " buffer on " + context_->info().name +
                ": only device buffers of a context created with ContextOptions::buffer_device_address on a device "
                "that supports it have one");
  }
  // Through vkGetDeviceProcAddr rather than the loader's export: the function is core only from
  // Vulkan 1.2, and linking against it would stop the library loading under an older loader.
  const auto get_address = reinterpret_cast<PFN_vkGetBufferDeviceAddress>(
      vkGetDeviceProcAddr(context_->device(), "vkGetBufferDeviceAddress"));
  if (!get_address) throw Error("vkGetBufferDeviceAddress is missing on " + context_->info().name);
  VkBufferDeviceAddressInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO;
  info.buffer = buffer_;
  return get_address(context_->device(), &info);
}

Buffer::Buffer(Buffer&& other) noexcept
    : context_(std::move(other.context_)),
      buffer_(std::exchange(other.buffer_, VK_NULL_HANDLE)),
      memory_(std::exchange(other.memory_, VK_NULL_HANDLE)),
      size_(std::exchange(other.size_, 0)),
      use_(other.use_),
      memory_type_(other.memory_type_),
      mapped_(std::exchange(other.mapped_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    context_ = std::move(other.context_);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(other.size_, 0);
    use_ = other.use_;
    memory_type_ = other.memory_type_;
    mapped_ = std::exchange(other.mapped_, nullptr);
  }
  return *this;
}

Buffer::~Buffer() { release(); }

void Buffer::release() noexcept {
  if (buffer_ == VK_NULL_HANDLE && memory_ == VK_NULL_HANDLE) return;
  context_->drain_if_unusable();
  // Freeing memory unmaps it implicitly.
  if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(context_->device(), buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) vkFreeMemory(context_->device(), memory_, nullptr);
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

void upload(Buffer& dst, std::span<const std::byte> data, VkDeviceSize offset) {
  check_range(dst, offset, data.size(), "an upload");
  if (data.empty()) return;
  const std::shared_ptr<Context>& context = dst.context();
  Buffer staging(context, data.size(), MemoryUse::upload);
  std::memcpy(staging.mapped(), data.data(), data.size());  // coherent: no flush needed
  CommandBuffer cmd(context);
  cmd.begin();
  record_copy(cmd.handle(), staging.handle(), 0, dst.handle(), offset, data.size());
  cmd.end();
  submit_and_wait(context, cmd.handle(), "an upload of " + bytes_text(data.size()));
}

void download(const Buffer& src, std::span<std::byte> out, VkDeviceSize offset) {
  check_range(src, offset, out.size(), "a download");
  if (out.empty()) return;
  const std::shared_ptr<Context>& context = src.context();
  Buffer staging(context, out.size(), MemoryUse::readback);
  CommandBuffer cmd(context);
  cmd.begin();
  record_copy(cmd.handle(), src.handle(), offset, staging.handle(), 0, out.size());
  cmd.end();
  submit_and_wait(context, cmd.handle(), "a download of " + bytes_text(out.size()));
  // The barrier made the copy visible to the host, and the fence wait ordered this read after it.
  std::memcpy(out.data(), staging.mapped(), out.size());
}

}  // namespace tg::vk
