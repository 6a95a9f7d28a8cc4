// The record-once executor: plan, pipelines, descriptor sets, one command buffer, replay.
#include "tensorgrad/vk/executor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "vk/buffer.h"
#include "vk/commands.h"
#include "vk/compute.h"
#include "vk/kernels/kernels.h"
#include "vk/plan.h"

namespace tg::vk {

namespace {

struct Range {
  std::uint64_t begin = 0, end = 0;
  bool overlaps(const Range& o) const { return begin < o.end && o.begin < end; }
};

bool overlaps_any(const Range& r, const std::vector<Range>& set) {
  return std::any_of(set.begin(), set.end(), [&](const Range& o) { return r.overlaps(o); });
}

void memory_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = src_access;
  barrier.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace

bool has_kernel(OpId op) { return kernel_plan_table()[static_cast<std::size_t>(op)] != nullptr; }

struct Program::Impl {
  std::shared_ptr<Context> ctx;
  Graph graph;
  BufferPlan plan;
  ProgramStats stats;
  Buffer device;
  Buffer staging_in, staging_out;
  std::vector<std::uint64_t> in_offsets;   // staging offset per graph input
  std::vector<std::uint64_t> out_offsets;  // readback offset per graph output
  std::map<std::string, std::unique_ptr<ComputePipeline>> pipelines;
  std::unique_ptr<DescriptorPool> pool;
  std::unique_ptr<CommandBuffer> cmd;

  Impl(std::shared_ptr<Context> context, const Graph& g, const ProgramOptions& options)
      : ctx(std::move(context)), graph(g) {
    // Every node needs a kernel: refuse before touching the device.
    std::vector<KernelLaunch> launches;
    launches.reserve(graph.nodes().size());
    for (const Node& node : graph.nodes()) {
      const KernelPlanFn fn = kernel_plan_table()[static_cast<std::size_t>(node.op)];
      if (!fn) {
        throw Error("the Vulkan executor has no kernel for op '" + std::string(op_name(node.op)) + "' (value %" +
                    std::to_string(node.output) + " of graph '" + graph.name() + "')");
      }
      launches.push_back(fn(graph, node));
    }

    const DeviceInfo& info = ctx->info();
    PlanLimits limits;
    limits.alignment = info.min_storage_buffer_offset_alignment;
    limits.max_storage_buffer_range = info.max_storage_buffer_range;
    limits.max_memory_allocation_size = info.max_memory_allocation_size;
    limits.device = info.summary();
    plan = plan_buffers(graph, limits, PlanOptions{options.guard_bytes});
    stats.device_bytes = plan.total_bytes;
    stats.unshared_bytes = plan.naive_bytes;

    device = Buffer(ctx, plan.total_bytes, MemoryUse::device);
    if (plan.guard_bytes > 0) {
      // The whole buffer starts as sentinel words, guards included.
      std::vector<std::uint32_t> words(plan.total_bytes / 4, k_guard_word);
      upload(device, std::as_bytes(std::span(words)));
    }

    std::uint64_t in_bytes = 0, out_bytes = 0;
    for (const GraphInput& in : graph.inputs()) {
      in_offsets.push_back(in_bytes);
      in_bytes += plan.slots[static_cast<std::size_t>(in.value)].bytes;
    }
    for (const GraphOutput& out : graph.outputs()) {
      out_offsets.push_back(out_bytes);
      out_bytes += plan.slots[static_cast<std::size_t>(out.value)].bytes;
    }
    staging_in = Buffer(ctx, std::max<std::uint64_t>(in_bytes, 4), MemoryUse::upload);
    staging_out = Buffer(ctx, std::max<std::uint64_t>(out_bytes, 4), MemoryUse::readback);

    // Pipelines (one per shader) and one descriptor set per dispatch.
    std::uint32_t total_bindings = 0, sets = 0;
    for (const KernelLaunch& l : launches) {
      if (l.items == 0) continue;
      auto& p = pipelines[l.shader];
      if (!p) {
        p = std::make_unique<ComputePipeline>(ctx, l.shader, static_cast<std::uint32_t>(l.bindings.size()),
                                              static_cast<std::uint32_t>(l.push.size()));
      }
      total_bindings += static_cast<std::uint32_t>(l.bindings.size());
      ++sets;
    }
    if (sets > 0) pool = std::make_unique<DescriptorPool>(ctx, sets, total_bindings);

    cmd = std::make_unique<CommandBuffer>(ctx);
    cmd->begin(/*one_time=*/false);
    VkCommandBuffer c = cmd->handle();
    // Order this replay's upload after the previous replay's dispatches and readback.
    memory_barrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_TRANSFER_WRITE_BIT);
    std::vector<VkBufferCopy> copies;
    for (std::size_t i = 0; i < graph.inputs().size(); ++i) {
      const ValueSlot& s = plan.slots[static_cast<std::size_t>(graph.inputs()[i].value)];
      if (graph.type(graph.inputs()[i].value).size() > 0) copies.push_back({in_offsets[i], s.offset, s.bytes});
    }
    if (!copies.empty()) {
      vkCmdCopyBuffer(c, staging_in.handle(), device.handle(), static_cast<std::uint32_t>(copies.size()),
                      copies.data());
    }
    memory_barrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);

    // Ranges written and read by dispatches since the last barrier.
    std::vector<Range> written, read;
    const auto range_of = [&](ValueId v) {
      const ValueSlot& s = plan.slots[static_cast<std::size_t>(v)];
      return Range{s.offset, s.offset + s.bytes};
    };
    for (const KernelLaunch& l : launches) {
      if (l.items == 0) continue;
      const ComputePipeline& pipeline = *pipelines.at(l.shader);
      std::vector<BufferBinding> bindings;
      std::vector<Range> reads, writes;
      for (std::size_t b = 0; b < l.bindings.size(); ++b) {
        const ValueSlot& s = plan.slots[static_cast<std::size_t>(l.bindings[b])];
        bindings.push_back({&device, s.offset, s.bytes});
        (b + l.writes >= l.bindings.size() ? writes : reads).push_back(range_of(l.bindings[b]));
      }
      bool hazard = false;
      for (const Range& r : reads) hazard = hazard || overlaps_any(r, written);
      for (const Range& w : writes) hazard = hazard || overlaps_any(w, written) || overlaps_any(w, read);
      if (hazard) {
        record_compute_barrier(c);
        ++stats.barriers;
        written.clear();
        read.clear();
      }
      written.insert(written.end(), writes.begin(), writes.end());
      read.insert(read.end(), reads.begin(), reads.end());
      const VkDescriptorSet set = pool->allocate(pipeline, bindings);
      const std::uint64_t wanted = (l.items + l.group_size - 1) / l.group_size;
      const auto groups =
          static_cast<std::uint32_t>(std::min<std::uint64_t>({wanted, info.max_compute_work_group_count[0], 65535}));
      record_dispatch(c, pipeline, set, l.push, {groups, 1, 1});
      ++stats.dispatches;
    }

    memory_barrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_TRANSFER_READ_BIT);
    copies.clear();
    for (std::size_t i = 0; i < graph.outputs().size(); ++i) {
      const ValueSlot& s = plan.slots[static_cast<std::size_t>(graph.outputs()[i].value)];
      if (graph.type(graph.outputs()[i].value).size() > 0) copies.push_back({s.offset, out_offsets[i], s.bytes});
    }
    if (!copies.empty()) {
      vkCmdCopyBuffer(c, device.handle(), staging_out.handle(), static_cast<std::uint32_t>(copies.size()),
                      copies.data());
    }
    memory_barrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                   VK_ACCESS_HOST_READ_BIT);
    cmd->end();
  }

  TensorMap run(const TensorMap& inputs) {
    validate_inputs(graph, inputs);
    for (std::size_t i = 0; i < graph.inputs().size(); ++i) {
      const GraphInput& in = graph.inputs()[i];
      const HostTensor& t = inputs.find(in.name)->second;
      std::byte* dst = staging_in.mapped() + in_offsets[i];
      for (std::size_t e = 0; e < t.values.size(); ++e) {
        const std::uint32_t word = is_float(t.type.dtype)
                                       ? std::bit_cast<std::uint32_t>(static_cast<float>(t.values[e]))
                                       : static_cast<std::uint32_t>(static_cast<std::int32_t>(t.values[e]));
        std::memcpy(dst + 4 * e, &word, 4);
      }
    }
    submit_and_wait(ctx, cmd->handle(), "running graph '" + graph.name() + "'");
    TensorMap out;
    for (std::size_t i = 0; i < graph.outputs().size(); ++i) {
      const GraphOutput& o = graph.outputs()[i];
      const TensorType& type = graph.type(o.value);
      const std::byte* src = staging_out.mapped() + out_offsets[i];
      HostTensor t{type, std::vector<double>(static_cast<std::size_t>(type.size()))};
      for (std::size_t e = 0; e < t.values.size(); ++e) {
        std::uint32_t word;
        std::memcpy(&word, src + 4 * e, 4);
        t.values[e] = is_float(type.dtype) ? static_cast<double>(std::bit_cast<float>(word))
                                           : static_cast<double>(static_cast<std::int32_t>(word));
      }
      out[o.name] = std::move(t);
    }
    return out;
  }

  std::vector<std::string> check_guards() const {
    std::vector<std::string> problems;
    if (plan.guard_bytes == 0) return problems;
    std::vector<std::uint32_t> words(plan.total_bytes / 4);
    download(device, std::as_writable_bytes(std::span(words)));
    for (std::size_t v = 0; v < plan.slots.size(); ++v) {
      const ValueSlot& s = plan.slots[v];
      for (std::uint64_t b = s.guard_offset; b < s.guard_offset + s.guard_bytes; b += 4) {
        if (words[b / 4] != k_guard_word) {
          const NodeId producer = graph.value(static_cast<ValueId>(v)).producer;
          problems.push_back(
              "guard after value %" + std::to_string(v) + " (" + graph.type(static_cast<ValueId>(v)).to_string() +
              (producer == kNoNode ? std::string(", a graph input")
                                   : ", written by '" + std::string(op_name(graph.node(producer).op)) + "'") +
              ") overwritten at byte " + std::to_string(b - s.guard_offset));
          break;
        }
      }
    }
    return problems;
  }
};

Program::Program(std::shared_ptr<Context> context, const Graph& graph, ProgramOptions options)
    : impl_(std::make_unique<Impl>(std::move(context), graph, options)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

TensorMap Program::run(const TensorMap& inputs) { return impl_->run(inputs); }
std::vector<std::string> Program::check_guards() const { return impl_->check_guards(); }
const ProgramStats& Program::stats() const { return impl_->stats; }
const Graph& Program::graph() const { return impl_->graph; }

}  // namespace tg::vk
