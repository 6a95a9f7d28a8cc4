// tg_vk_stream_probe's device side: buffers, pipelines, the chains of dispatches (or copies, or
// fills) with their timestamps, and the check of each variant's result against the host.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "vk/commands.h"
#include "vk_stream_probe.h"

namespace tg_probe {

namespace {

constexpr std::uint32_t k_guard_word = 0x5EA1AB1Eu;
constexpr std::uint32_t k_poison = 0xFFFFFFFFu;  // a NaN: no variant can pass on stale data

}  // namespace

// A device-local VkBuffer with its own memory; `dedicated` asks the driver for a dedicated
// allocation, the layout a driver is most free to place well.
class DeviceBuffer {
 public:
  DeviceBuffer(Ctx ctx, VkDeviceSize size, bool dedicated) : ctx_(std::move(ctx)) {
    const VkDevice dev = ctx_->device();
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = size;
    info.usage =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    ctx_->check(vkCreateBuffer(dev, &info, nullptr, &buffer_), "creating a probe buffer");
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(dev, buffer_, &req);
    // The library's choice for device buffers (src/vk/buffer.cpp), so the probe sees the same memory.
    const auto type =
        tg::vk::find_memory_type(ctx_->memory_properties(), req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                 VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
    if (!type) throw tg::Error("no memory type for a probe buffer");
    memory_type_ = *type;
    VkMemoryDedicatedAllocateInfo dedicated_info{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO};
    dedicated_info.buffer = buffer_;
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.pNext = dedicated ? &dedicated_info : nullptr;
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = memory_type_;
    ctx_->check(vkAllocateMemory(dev, &alloc, nullptr, &memory_), "allocating " + std::to_string(size) + " bytes");
    ctx_->check(vkBindBufferMemory(dev, buffer_, memory_, 0), "binding a probe buffer");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    vkDestroyBuffer(ctx_->device(), buffer_, nullptr);
    if (memory_ != VK_NULL_HANDLE) vkFreeMemory(ctx_->device(), memory_, nullptr);
  }
  VkBuffer handle() const { return buffer_; }
  std::uint32_t memory_type() const { return memory_type_; }

 private:
  Ctx ctx_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  std::uint32_t memory_type_ = 0;
};

namespace {

// The repo kernel's push block (src/vk/kernels/elementwise_binary.cpp); the probe kernels read
// only its first two words.
struct Push {
  std::uint32_t op = 0, n = 0, rank = 1, flags = 15;  // add, contiguous, all operands same-shape
  std::uint32_t shape[6] = {}, strides[3][6] = {};
};
static_assert(sizeof(Push) == 112);

// probe_addr.comp's push block: the operands' addresses and n, inside the same push range.
struct AddressPush {
  VkDeviceAddress a = 0, b = 0, c = 0;
  std::uint32_t n = 0, unused = 0;
};
static_assert(sizeof(AddressPush) == 32 && sizeof(AddressPush) <= sizeof(Push));

// Orders everything before against everything after (and, with `to_host`, makes writes visible to
// host reads); recorded at both ends of each command buffer, so no submission relies on the host's
// fence wait for memory visibility.
void full_barrier(VkCommandBuffer cmd, bool to_host = false) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                    VK_ACCESS_TRANSFER_WRITE_BIT | (to_host ? VK_ACCESS_HOST_READ_BIT : 0);
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(cmd, stages, stages | (to_host ? VK_PIPELINE_STAGE_HOST_BIT : 0), 0, 1, &b, 0, nullptr, 0,
                       nullptr);
}

// The barrier between two links of the chain: the executor's compute->compute one for shaders.
void chain_barrier(VkCommandBuffer cmd, Kind kind) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  if (kind == Kind::shader) {
    b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &b, 0, nullptr, 0,
                         nullptr);
  } else {
    b.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    b.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &b, 0, nullptr, 0,
                         nullptr);
  }
}

}  // namespace

Probe::Probe(Ctx ctx, const Options& opt) : ctx_(std::move(ctx)), opt_(opt) {
  bytes_ = opt.n * 4;
  slot_ = (bytes_ + 255) / 256 * 256;  // keeps every offset a multiple of minStorageBufferOffsetAlignment
  const VkDevice dev = ctx_->device();
  std::array<VkDescriptorSetLayoutBinding, 4> bindings{};
  for (std::uint32_t i = 0; i < 4; ++i)
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.bindingCount = 4;
  set_info.pBindings = bindings.data();
  ctx_->check(vkCreateDescriptorSetLayout(dev, &set_info, nullptr, &set_layout_), "creating the set layout");
  const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(Push)};
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &range;
  ctx_->check(vkCreatePipelineLayout(dev, &layout_info, nullptr, &pipeline_layout_), "creating the layout");
  const auto sets = static_cast<std::uint32_t>(5 + opt.dispatches);  // one per output of every layout
  const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 4 * sets};
  VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool_info.maxSets = sets;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &size;
  ctx_->check(vkCreateDescriptorPool(dev, &pool_info, nullptr, &pool_), "creating the descriptor pool");
  VkQueryPoolCreateInfo query_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  query_info.queryCount = static_cast<std::uint32_t>(2 * opt.dispatches);
  ctx_->check(vkCreateQueryPool(dev, &query_info, nullptr, &queries_), "creating the query pool");
  std::uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(ctx_->physical_device(), &families, nullptr);
  std::vector<VkQueueFamilyProperties> props(families);
  vkGetPhysicalDeviceQueueFamilyProperties(ctx_->physical_device(), &families, props.data());
  const std::uint32_t bits = props.at(ctx_->info().compute_queue_family).timestampValidBits;
  stamp_mask_ = bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

Probe::~Probe() {
  const VkDevice dev = ctx_->device();
  (void)vkDeviceWaitIdle(dev);
  for (VkPipeline p : pipelines_) vkDestroyPipeline(dev, p, nullptr);
  vkDestroyQueryPool(dev, queries_, nullptr);
  vkDestroyDescriptorPool(dev, pool_, nullptr);
  vkDestroyPipelineLayout(dev, pipeline_layout_, nullptr);
  vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
}

std::uint32_t Probe::memory_type() const {
  if (!buffers_.empty()) return buffers_.front()->memory_type();
  return addressable_.empty() ? 0 : addressable_.front().memory_type();
}

VkBuffer Probe::buffer(VkDeviceSize size, bool dedicated) {
  buffers_.push_back(std::make_unique<DeviceBuffer>(ctx_, size, dedicated));
  return buffers_.back()->handle();
}

Region Probe::addressable(VkDeviceSize size) {
  addressable_.emplace_back(ctx_, size, tg::vk::MemoryUse::device);
  return {addressable_.back().handle(), 0, addressable_.back().device_address()};
}

void Probe::add_sets(Layout& l) {
  for (const Region& out : l.outs) {
    VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    alloc.descriptorPool = pool_;
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &set_layout_;
    VkDescriptorSet set = VK_NULL_HANDLE;
    ctx_->check(vkAllocateDescriptorSets(ctx_->device(), &alloc, &set), "allocating a descriptor set");
    // Binding 2 is the repo kernel's unused third operand, bound to a as the executor does.
    const std::array<VkDescriptorBufferInfo, 4> infos{{{l.a.buffer, l.a.offset, bytes_},
                                                       {l.b.buffer, l.b.offset, bytes_},
                                                       {l.a.buffer, l.a.offset, bytes_},
                                                       {out.buffer, out.offset, bytes_}}};
    std::array<VkWriteDescriptorSet, 4> writes{};
    for (std::uint32_t i = 0; i < 4; ++i) {
      writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[i].dstSet = set;
      writes[i].dstBinding = i;
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(ctx_->device(), 4, writes.data(), 0, nullptr);
    l.sets.push_back(set);
  }
}

VkPipeline Probe::pipeline(std::span<const std::uint32_t> spirv, std::uint32_t wg, std::uint32_t vpi,
                           bool grid_stride) {
  const VkDevice dev = ctx_->device();
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = spirv.size_bytes();
  module_info.pCode = spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  ctx_->check(vkCreateShaderModule(dev, &module_info, nullptr, &module), "creating a shader module");
  // The repo kernel declares none of these constants; entries for absent IDs are ignored.
  const std::array<std::uint32_t, 3> data{wg, vpi, grid_stride ? VK_TRUE : VK_FALSE};
  const std::array<VkSpecializationMapEntry, 3> entries{{{0, 0, 4}, {1, 4, 4}, {2, 8, 4}}};
  const VkSpecializationInfo spec{3, entries.data(), sizeof(data), data.data()};
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = &spec;
  info.layout = pipeline_layout_;
  VkPipeline p = VK_NULL_HANDLE;
  const VkResult r = vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &info, nullptr, &p);
  vkDestroyShaderModule(dev, module, nullptr);
  ctx_->check(r, "creating a compute pipeline");
  pipelines_.push_back(p);
  return p;
}

// Runs `record` in a fresh command buffer between full barriers, and waits.
void Probe::submit(const char* what, const std::function<void(VkCommandBuffer)>& record) {
  tg::vk::CommandBuffer cmd(ctx_);
  cmd.begin();
  full_barrier(cmd.handle());
  record(cmd.handle());
  full_barrier(cmd.handle(), true);
  cmd.end();
  tg::vk::submit_and_wait(ctx_, cmd.handle(), what);
}

void Probe::upload(const std::vector<float>& host, const std::vector<Region>& to) {
  // In pieces of at most 256 MiB (one piece up to n = 2^26): past 4 GiB a tensor can exceed what
  // one host-visible allocation may hold.
  const VkDeviceSize piece = std::min<VkDeviceSize>(bytes_, VkDeviceSize{256} << 20);
  if (!staging_) staging_ = std::make_unique<tg::vk::Buffer>(ctx_, piece, tg::vk::MemoryUse::upload);
  const auto* source = reinterpret_cast<const std::byte*>(host.data());
  for (VkDeviceSize at = 0; at < bytes_; at += piece) {
    const VkDeviceSize size = std::min(piece, bytes_ - at);
    std::memcpy(staging_->mapped(), source + at, size);
    submit("uploading inputs", [&](VkCommandBuffer cmd) {
      for (const Region& r : to) {
        const VkBufferCopy copy{0, r.offset + at, size};
        vkCmdCopyBuffer(cmd, staging_->handle(), r.buffer, 1, &copy);
      }
    });
  }
}

void Probe::record_chain(VkCommandBuffer cmd, const Variant& v, Stamps stamps) {
  const auto d = static_cast<std::uint32_t>(opt_.dispatches);
  const Layout& l = *v.layout;
  if (stamps != Stamps::none) vkCmdResetQueryPool(cmd, queries_, 0, 2 * d);
  if (stamps == Stamps::ends) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 0);
  Push push;
  push.n = static_cast<std::uint32_t>(opt_.n);
  push.shape[0] = push.n;
  push.strides[0][0] = push.strides[1][0] = push.strides[2][0] = 1;
  if (v.kind == Kind::shader) {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, v.pipeline);
    if (!v.addressed) vkCmdPushConstants(cmd, pipeline_layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(Push), &push);
  }
  for (std::uint32_t i = 0; i < d; ++i) {
    const std::size_t k = i % l.outs.size();
    if (i > 0 && v.barriers) chain_barrier(cmd, v.kind);
    if (stamps == Stamps::pairs) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 2 * i);
    if (v.kind == Kind::shader && v.addressed) {
      // No descriptor set bound: the shader uses none.
      const AddressPush where{l.a.address, l.b.address, l.outs[k].address, push.n};
      vkCmdPushConstants(cmd, pipeline_layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(where), &where);
      vkCmdDispatch(cmd, v.groups[0], v.groups[1], v.groups[2]);
    } else if (v.kind == Kind::shader) {
      vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_, 0, 1, &l.sets[k], 0, nullptr);
      vkCmdDispatch(cmd, v.groups[0], v.groups[1], v.groups[2]);
    } else if (v.kind == Kind::copy) {
      const VkBufferCopy copy{l.a.offset, l.outs[k].offset, bytes_};
      vkCmdCopyBuffer(cmd, l.a.buffer, l.outs[k].buffer, 1, &copy);
    } else {
      vkCmdFillBuffer(cmd, l.outs[k].buffer, l.outs[k].offset, bytes_, std::bit_cast<std::uint32_t>(k_fill_value));
    }
    if (stamps == Stamps::pairs) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 2 * i + 1);
  }
  if (stamps == Stamps::ends) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 1);
}

// Poisons every output and its guard, runs the chain once, and checks each output: "PASS" or what
// is wrong.
std::string Probe::verify(const Variant& v, const std::vector<float>& a, const std::vector<float>& b) {
  const Layout& l = *v.layout;
  submit("running the chain for its check", [&](VkCommandBuffer cmd) {
    for (const Region& out : l.outs) {
      vkCmdFillBuffer(cmd, out.buffer, out.offset, bytes_, k_poison);
      vkCmdFillBuffer(cmd, out.buffer, out.offset + bytes_, slot_ - bytes_ + k_guard, k_guard_word);
    }
    full_barrier(cmd);
    record_chain(cmd, v, Stamps::none);
  });
  std::vector<std::uint64_t> samples;
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int s = 0; s < 4096; ++s) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    samples.push_back((state >> 33) % opt_.n);
  }
  for (std::uint64_t i = 0; i < 16 && i < opt_.n; ++i) samples.push_back(i), samples.push_back(opt_.n - 1 - i);
  // Only the sampled elements and the guard are read back, packed in that order: the check needs
  // little host-visible memory whatever the size of an output.
  const VkDeviceSize sample_bytes = 4 * samples.size(), guard_bytes = slot_ - bytes_ + k_guard;
  if (!samples_) {
    samples_ = std::make_unique<tg::vk::Buffer>(ctx_, sample_bytes + guard_bytes, tg::vk::MemoryUse::readback);
  }
  for (std::size_t k = 0; k < l.outs.size(); ++k) {
    std::vector<VkBufferCopy> copies;
    for (std::size_t j = 0; j < samples.size(); ++j) copies.push_back({l.outs[k].offset + 4 * samples[j], 4 * j, 4});
    copies.push_back({l.outs[k].offset + bytes_, sample_bytes, guard_bytes});
    submit("reading an output back", [&](VkCommandBuffer cmd) {
      vkCmdCopyBuffer(cmd, l.outs[k].buffer, samples_->handle(), static_cast<std::uint32_t>(copies.size()),
                      copies.data());
    });
    const std::byte* base = samples_->mapped();
    for (std::size_t j = 0; j < samples.size(); ++j) {
      const std::uint64_t i = samples[j];
      float got = 0;
      std::memcpy(&got, base + 4 * j, 4);
      const float want = v.expect == Expect::sum ? a[i] + b[i] : v.expect == Expect::copy_a ? a[i] : k_fill_value;
      if (std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(want)) {
        return "FAIL output " + std::to_string(k) + " element " + std::to_string(i) + ": got " + std::to_string(got) +
               ", want " + std::to_string(want);
      }
    }
    for (VkDeviceSize g = 0; g < guard_bytes; g += 4) {
      std::uint32_t word = 0;
      std::memcpy(&word, base + sample_bytes + g, 4);
      if (word != k_guard_word) return "FAIL output " + std::to_string(k) + ": guard word overwritten";
    }
  }
  return "PASS";
}

Result Probe::run(const Variant& v, const std::vector<float>& a, const std::vector<float>& b) {
  Result r;
  r.check = verify(v, a, b);
  if (r.check != "PASS") return r;
  const auto d = static_cast<std::size_t>(opt_.dispatches);
  std::vector<double> first, rest, chain, ends;
  std::vector<std::uint64_t> ts(2 * d);
  const double period_us = ctx_->info().timestamp_period * 1e-3;
  auto span_us = [&](std::size_t from, std::size_t to) {
    return double((ts[to] - ts[from]) & stamp_mask_) * period_us;
  };
  if (v.upload && !inputs_staging_) {
    inputs_staging_ = std::make_unique<tg::vk::Buffer>(ctx_, 2 * bytes_, tg::vk::MemoryUse::upload);
    std::memcpy(inputs_staging_->mapped(), a.data(), bytes_);
    std::memcpy(inputs_staging_->mapped() + bytes_, b.data(), bytes_);
  }
  if (v.readback && !readback_) {
    readback_ = std::make_unique<tg::vk::Buffer>(ctx_, bytes_, tg::vk::MemoryUse::readback);
  }
  const Layout& l = *v.layout;
  for (const Stamps mode : {Stamps::pairs, Stamps::ends}) {
    tg::vk::CommandBuffer cmd(ctx_);
    cmd.begin(false);
    full_barrier(cmd.handle());
    if (v.upload) {
      // The same values a and b already hold, so the chain's result (checked above) is unchanged.
      const VkBufferCopy to_a{0, l.a.offset, bytes_}, to_b{bytes_, l.b.offset, bytes_};
      vkCmdCopyBuffer(cmd.handle(), inputs_staging_->handle(), l.a.buffer, 1, &to_a);
      vkCmdCopyBuffer(cmd.handle(), inputs_staging_->handle(), l.b.buffer, 1, &to_b);
      full_barrier(cmd.handle());
    }
    record_chain(cmd.handle(), v, mode);
    full_barrier(cmd.handle(), v.readback);
    if (v.readback) {
      const Region& last = l.outs[static_cast<std::size_t>(opt_.dispatches - 1) % l.outs.size()];
      const VkBufferCopy copy{last.offset, 0, bytes_};
      vkCmdCopyBuffer(cmd.handle(), last.buffer, readback_->handle(), 1, &copy);
      full_barrier(cmd.handle(), true);
    }
    cmd.end();
    for (int rep = 0; rep < opt_.repeats; ++rep) {
      if (v.idle_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(v.idle_ms));
      tg::vk::submit_and_wait(ctx_, cmd.handle(), "the timed chain");
      const std::uint32_t count = mode == Stamps::pairs ? static_cast<std::uint32_t>(2 * d) : 2;
      ctx_->check(vkGetQueryPoolResults(ctx_->device(), queries_, 0, count, count * 8, ts.data(), 8,
                                        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
                  "reading timestamps");
      if (mode == Stamps::ends) {
        ends.push_back(span_us(0, 1) / double(d));
        continue;
      }
      first.push_back(span_us(0, 1));
      for (std::size_t i = 1; i < d; ++i) rest.push_back(span_us(2 * i, 2 * i + 1));
      chain.push_back(span_us(0, 2 * d - 1) / double(d));
    }
  }
  if (rest.empty()) rest = first;
  auto median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x.size() % 2 ? x[x.size() / 2] : 0.5 * (x[x.size() / 2 - 1] + x[x.size() / 2]);
  };
  r.first_us = median(first);
  r.median_us = median(rest);
  r.min_us = *std::min_element(rest.begin(), rest.end());
  for (double t : rest) r.mean_us += t / double(rest.size());
  r.chain_us = median(chain);
  r.ends_us = median(ends);
  return r;
}

}  // namespace tg_probe
