// Recording a planned program: uploads, dispatches with barriers only on hazards, optional
// timestamps, index-check status words, writebacks and readbacks, all into one command buffer.
#include "vk/executor_recording.h"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/shader_table.h"
#include "vk/spirv_coopmat.h"

namespace tg::vk {

namespace {

// Bytes [begin, end) of one plan block.
struct Range {
  std::uint32_t block = 0;
  std::uint64_t begin = 0, end = 0;
  bool overlaps(const Range& o) const { return block == o.block && begin < o.end && o.begin < end; }
};

// Nodes [begin, end), in node order.
struct NodeRange {
  std::size_t begin = 0, end = 0;
};

// vkCmdCopyBuffer per block pair: `copies` holds (src block, dst block, region); staging buffers
// are passed as the only "block" of their side.
void copy_regions(VkCommandBuffer c, const std::vector<const Buffer*>& from, const std::vector<const Buffer*>& to,
                  std::vector<std::tuple<std::uint32_t, std::uint32_t, VkBufferCopy>> copies) {
  std::sort(copies.begin(), copies.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  for (std::size_t i = 0; i < copies.size();) {
    const std::uint32_t src = std::get<0>(copies[i]), dst = std::get<1>(copies[i]);
    std::vector<VkBufferCopy> regions;
    for (; i < copies.size() && std::get<0>(copies[i]) == src && std::get<1>(copies[i]) == dst; ++i)
      regions.push_back(std::get<2>(copies[i]));
    vkCmdCopyBuffer(c, from[src]->handle(), to[dst]->handle(), static_cast<std::uint32_t>(regions.size()),
                    regions.data());
  }
}

std::vector<const Buffer*> pointers(const std::vector<Buffer>& buffers) {
  std::vector<const Buffer*> out;
  for (const Buffer& b : buffers) out.push_back(&b);
  return out;
}

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

// Pipelines are shared by launches of the same shader, binding count, push-constant size and
// specialization constants.
std::string pipeline_key(const KernelLaunch& l, std::size_t bindings) {
  std::string key = l.shader + "#" + std::to_string(bindings) + "#" + std::to_string(l.push.size());
  for (std::uint32_t c : l.specialization) key += "," + std::to_string(c);
  return key;
}

// The most grid-stride iterations ProgramOptions::max_workgroups may add to one workgroup.
constexpr std::uint64_t kMaxTestGridIterations = 8;

// Per shader: whether a dispatch's workgroups covered its items in one pass or looped grid-stride
// past the cap. Declared for every embedded shader when the library loads.
struct GridPaths {
  std::map<std::string, std::pair<std::unique_ptr<LaunchPath>, std::unique_ptr<LaunchPath>>, std::less<>> by_shader;
  GridPaths() {
    for (std::size_t i = 0; i < detail::k_embedded_shader_count; ++i) {
      const std::string name = detail::k_embedded_shaders[i].name;
      if (name == "add") continue;  // the tests' probe shader (c = a + b): no kernel launches it
      // The matrix-unit kernels run as the pipelines made from their modules (vk/spirv_coopmat.h).
      const auto modules = coopmat_modules();
      const bool coopmat = std::find(modules.begin(), modules.end(), name) != modules.end();
      const std::vector<std::string> launched =
          coopmat ? std::vector<std::string>{name + "_f16", name + "_bf16"} : std::vector<std::string>{name};
      for (const std::string& shader : launched) {
        by_shader[shader] = {std::make_unique<LaunchPath>("vulkan", "grid." + shader, "one_pass"),
                             std::make_unique<LaunchPath>("vulkan", "grid." + shader, "grid_stride")};
      }
    }
  }
};
const GridPaths kGridPaths;

const LaunchPath& grid_path(const std::string& shader, bool strided) {
  const auto& paths = kGridPaths.by_shader.at(shader);
  return strided ? *paths.second : *paths.first;
}

// The value ranges a launch writes (its last `writes` bindings), scratch excluded.
template <class Visit>
void for_each_write(const KernelLaunch& launch, const std::vector<ValueSlot>& slots, Visit visit) {
  for (const KernelLaunch* step : launch_steps(launch)) {
    if (step->items == 0) continue;
    for (std::size_t b = step->bindings.size() - std::min<std::size_t>(step->writes, step->bindings.size());
         b < step->bindings.size(); ++b) {
      if (step->bindings[b] == kScratch) continue;
      const ValueSlot& s = slots[static_cast<std::size_t>(step->bindings[b])];
      visit(Range{s.block, s.offset, s.offset + s.bytes});
    }
  }
}

// Where the replay is cut for early readback. An output is final after the last replayed launch
// that writes any of its bytes (its producer, or a fused dispatch recorded at a later node; never
// anything after, since an output's range is held to the end of the run), in either recording;
// outputs no launch writes (inputs, constants) are final from the start. Each segment ends at the
// first node where at least `bytes` of outputs have become final since the previous cut.
struct Segments {
  std::vector<NodeRange> nodes;
  std::vector<std::vector<std::size_t>> outputs;  // graph output indices read back after each segment
};

Segments plan_segments(const RecordingRequest& request, const std::array<std::vector<ValueSlot>, 2>& slots,
                       std::size_t parities) {
  const Graph& graph = request.graph;
  const std::size_t node_count = request.launches.size();
  std::vector<std::size_t> read_back;  // graph output indices
  for (std::size_t i = 0; i < graph.outputs().size(); ++i) {
    const ValueId v = graph.outputs()[i].value;
    if (!request.unread_outputs.contains(v) && graph.type(v).size() > 0) read_back.push_back(i);
  }
  // Per read-back output: one past the node after which it is final (0: final from the start).
  std::vector<std::size_t> final_after(read_back.size(), 0);
  if (request.early_readback_bytes > 0) {
    for (std::size_t n = 0; n < node_count; ++n) {
      if (request.launches[n].items == 0 || request.constants[n]) continue;
      for (std::size_t p = 0; p < parities; ++p) {
        for_each_write(request.launches[n], slots[p], [&](const Range& written) {
          for (std::size_t o = 0; o < read_back.size(); ++o) {
            const ValueSlot& s = slots[p][static_cast<std::size_t>(graph.outputs()[read_back[o]].value)];
            if (written.overlaps(Range{s.block, s.offset, s.offset + s.bytes})) final_after[o] = n + 1;
          }
        });
      }
    }
  }
  Segments out;
  std::vector<std::size_t> cuts{0};
  if (request.early_readback_bytes > 0) {
    std::vector<std::uint64_t> bytes_final_at(node_count + 1, 0);
    for (std::size_t o = 0; o < read_back.size(); ++o) {
      bytes_final_at[final_after[o]] += slots[0][static_cast<std::size_t>(graph.outputs()[read_back[o]].value)].bytes;
    }
    std::uint64_t pending = bytes_final_at[0];
    for (std::size_t end = 1; end < node_count; ++end) {
      pending += bytes_final_at[end];
      if (pending >= request.early_readback_bytes) {
        cuts.push_back(end);
        pending = 0;
      }
    }
  }
  for (std::size_t s = 0; s < cuts.size(); ++s) {
    out.nodes.push_back({cuts[s], s + 1 < cuts.size() ? cuts[s + 1] : node_count});
  }
  out.outputs.resize(cuts.size());
  for (std::size_t o = 0; o < read_back.size(); ++o) {
    // The segment whose node range holds the last write (segment 0 for outputs final from the start).
    const std::size_t at = final_after[o] == 0 ? 0 : final_after[o] - 1;
    std::size_t s = 0;
    while (s + 1 < out.nodes.size() && out.nodes[s + 1].begin <= at) ++s;
    out.outputs[s].push_back(read_back[o]);
  }
  return out;
}

}  // namespace

TimestampPool::TimestampPool(std::shared_ptr<Context> context, std::uint32_t count)
    : context_(std::move(context)), count_(count) {
  VkQueryPoolCreateInfo info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  info.queryCount = std::max<std::uint32_t>(count, 1);
  context_->check(vkCreateQueryPool(context_->device(), &info, nullptr, &pool_), "vkCreateQueryPool (timestamps)");
}

TimestampPool::~TimestampPool() {
  if (pool_ != VK_NULL_HANDLE) {
    context_->drain_if_unusable();
    vkDestroyQueryPool(context_->device(), pool_, nullptr);
  }
}

// Records the dispatches of the nodes in `nodes` (constants = false: those not precomputed) or of
// the precomputed constant nodes only (constants = true: the one-time recording, no timestamps),
// with a barrier wherever a dispatch touches a range an earlier one wrote, or writes one it read.
// `dispatches` counts the recorded dispatches on (it numbers their timestamp queries).
void record_dispatches(VkCommandBuffer c, RecordedProgram& r, const RecordingRequest& request,
                       const std::vector<ValueSlot>& slots, const std::vector<std::uint64_t>& status_offsets,
                       ProgramStats* stats, bool constants, NodeRange nodes, std::size_t& dispatches) {
  const DeviceInfo& info = r.blocks.front().context()->info();
  const bool timestamps = r.timestamps && !constants;
  // Ranges written and read by dispatches since the last barrier.
  std::vector<Range> written, read;
  for (std::size_t n = nodes.begin; n < nodes.end; ++n) {
    if (request.launches[n].items == 0 || request.constants[n] != constants) continue;
    for (const KernelLaunch* step : launch_steps(request.launches[n])) {
      const KernelLaunch& l = *step;
      if (l.items == 0) continue;
      const ComputePipeline& pipeline = *r.pipelines.at(pipeline_key(l, binding_count(l)));
      std::vector<BufferBinding> bindings;
      std::vector<Range> reads, writes;
      for (std::size_t b = 0; b < l.bindings.size(); ++b) {
        const ValueId v = l.bindings[b];
        const ValueSlot& s = v == kScratch ? request.plan.scratch[n] : slots[static_cast<std::size_t>(v)];
        bindings.push_back({&r.block(s), s.offset, s.bytes});
        (b + l.writes >= l.bindings.size() ? writes : reads).push_back(Range{s.block, s.offset, s.offset + s.bytes});
      }
      // Each status word belongs to one dispatch: no hazard to track.
      if (l.index_check) bindings.push_back({&r.status, status_offsets[n], 4});
      bool hazard = false;
      for (const Range& rd : reads) hazard = hazard || overlaps_any(rd, written);
      for (const Range& w : writes) hazard = hazard || overlaps_any(w, written) || overlaps_any(w, read);
      if (hazard) {
        record_compute_barrier(c);
        if (stats) ++stats->barriers;
        written.clear();
        read.clear();
      }
      written.insert(written.end(), writes.begin(), writes.end());
      read.insert(read.end(), reads.begin(), reads.end());
      const VkDescriptorSet set = r.pool->allocate(pipeline, bindings);
      const std::uint64_t wanted = (l.items + l.group_size - 1) / l.group_size;
      // A test's max_workgroups never makes a workgroup loop more than kMaxTestGridIterations
      // times: the planners' loop_passes assume the 65535-group cap, and lavapipe's loop limit
      // counts every pass.
      const std::uint64_t requested =
          request.max_workgroups == 0
              ? kMaxGroups
              : std::max<std::uint64_t>(request.max_workgroups, ceil_div(wanted, kMaxTestGridIterations));
      const std::uint64_t cap = std::min<std::uint64_t>({info.max_compute_work_group_count[0], kMaxGroups, requested});
      const auto groups = static_cast<std::uint32_t>(std::min(wanted, cap));
      // Every kernel names the launch paths of its dispatches (kernels.h): one without is a kernel
      // that forgot, which the path coverage would then never see.
      if (l.paths.empty()) {
        const Node& node = request.graph.nodes()[n];
        throw Error("Vulkan dispatch of shader '" + l.shader + "' for '" + std::string(op_name(node.op)) +
                    "' (value %" + std::to_string(node.output) + " of graph '" + request.graph.name() +
                    "', created at " + node.loc.to_string() + ") names no launch path (KernelLaunch::paths)");
      }
      for (const LaunchPath* path : l.paths) path->hit();
      grid_path(l.shader, wanted > cap).hit();
      const auto query = static_cast<std::uint32_t>(2 * dispatches);
      if (timestamps) vkCmdWriteTimestamp(c, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r.timestamps->handle(), query);
      record_dispatch(c, pipeline, set, l.push, {groups, 1, 1});
      if (timestamps) vkCmdWriteTimestamp(c, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, r.timestamps->handle(), query + 1);
      if (stats && !constants) {
        r.dispatch_nodes.push_back(static_cast<NodeId>(n));
        r.dispatch_labels.push_back(l.label);
        ++stats->dispatches;
      }
      ++dispatches;
    }
  }
}

// Records the replayable command buffers of one recording over `slots` (the plan's, or with every
// writeback pair swapped): one per segment. Counts dispatches and barriers into `stats` when given.
std::vector<std::unique_ptr<CommandBuffer>> record_commands(RecordedProgram& r, const RecordingRequest& request,
                                                            const std::vector<ValueSlot>& slots,
                                                            const std::vector<std::uint64_t>& status_offsets,
                                                            const Segments& segments, ProgramStats* stats) {
  const Graph& graph = request.graph;
  const std::vector<const Buffer*> blocks = pointers(r.blocks);
  std::vector<std::unique_ptr<CommandBuffer>> out;
  std::size_t dispatches = 0;
  for (std::size_t segment = 0; segment < segments.nodes.size(); ++segment) {
    auto commands = std::make_unique<CommandBuffer>(r.blocks.front().context());
    commands->begin(/*one_time=*/false);
    VkCommandBuffer c = commands->handle();
    std::vector<std::tuple<std::uint32_t, std::uint32_t, VkBufferCopy>> copies;
    if (segment == 0) {
      // Order this replay's transfers and dispatches after everything the previous replay did (its
      // dispatches, writebacks and readback).
      memory_barrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                     VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                     VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                     VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_SHADER_READ_BIT |
                         VK_ACCESS_SHADER_WRITE_BIT);
      if (r.timestamps) vkCmdResetQueryPool(c, r.timestamps->handle(), 0, r.timestamps->count());
      for (std::size_t i = 0; i < graph.inputs().size(); ++i) {
        const ValueSlot& s = slots[static_cast<std::size_t>(graph.inputs()[i].value)];
        if (!request.resident[i] && graph.type(graph.inputs()[i].value).size() > 0) {
          copies.emplace_back(r.in_staged[i].buffer, s.block, VkBufferCopy{r.in_staged[i].offset, s.offset, s.bytes});
        }
      }
      copy_regions(c, pointers(r.staging_in), blocks, std::move(copies));
      if (!r.checks.empty()) vkCmdFillBuffer(c, r.status.handle(), 0, VK_WHOLE_SIZE, k_no_bad_element);
      memory_barrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    } else {
      // The hazard tracking starts afresh in each segment: everything before is ordered first. (A
      // barrier's first scope takes in the earlier submissions on the queue.)
      record_compute_barrier(c);
      if (stats) ++stats->barriers;
    }

    record_dispatches(c, r, request, slots, status_offsets, stats, /*constants=*/false, segments.nodes[segment],
                      dispatches);

    memory_barrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_TRANSFER_READ_BIT);
    copies.clear();
    for (const std::size_t i : segments.outputs[segment]) {
      const ValueSlot& s = slots[static_cast<std::size_t>(graph.outputs()[i].value)];
      copies.emplace_back(s.block, r.out_staged[i].buffer, VkBufferCopy{s.offset, r.out_staged[i].offset, s.bytes});
    }
    copy_regions(c, blocks, pointers(r.staging_out), std::move(copies));
    if (segment + 1 == segments.nodes.size()) {
      copies.clear();
      for (const RecordedCheck& check : r.checks) {
        copies.emplace_back(0, check.readback.buffer, VkBufferCopy{check.status_offset, check.readback.offset, 4});
      }
      copy_regions(c, {&r.status}, pointers(r.staging_out), std::move(copies));
    }
    memory_barrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                   VK_ACCESS_HOST_READ_BIT);
    commands->end();
    out.push_back(std::move(commands));
  }
  return out;
}

RecordedProgram record_program(const std::shared_ptr<Context>& ctx, const RecordingRequest& request,
                               ProgramStats& stats) {
  const Graph& graph = request.graph;
  const BufferPlan& plan = request.plan;
  const DeviceInfo& info = ctx->info();
  RecordedProgram r;

  for (std::size_t b = 0; b < plan.blocks.size(); ++b) {
    try {
      r.blocks.emplace_back(ctx, plan.blocks[b], MemoryUse::device);
    } catch (const DeviceError& e) {
      if (e.result() != VK_ERROR_OUT_OF_DEVICE_MEMORY && e.result() != VK_ERROR_OUT_OF_HOST_MEMORY) throw;
      throw Error("Vulkan program '" + graph.name() + "': out of device memory allocating block " + std::to_string(b) +
                  " of " + std::to_string(plan.blocks.size()) + " (" + std::to_string(plan.blocks[b]) +
                  " bytes; the plan needs " + std::to_string(plan.total_bytes) + " bytes in all, heap " +
                  std::to_string(info.device_heap_index) + " holds " + std::to_string(info.device_heap_bytes) +
                  " bytes, some of it in use by other programs) on " + info.summary());
    }
    if (plan.guard_bytes > 0) {
      // The whole block starts as sentinel words, guards included.
      std::vector<std::uint32_t> words(plan.blocks[b] / 4, k_guard_word);
      upload(r.blocks[b], std::as_bytes(std::span(words)));
    }
  }

  // Staging: inputs, then outputs and status words, packed in order into buffers of at most the
  // plan's block cap each (at most one allocation, at least the largest value).
  const auto pack = [&](std::vector<std::uint64_t>& sizes, std::uint64_t bytes) {
    if (sizes.empty() || sizes.back() + bytes > plan.block_cap) sizes.push_back(0);
    const Staged at{static_cast<std::uint32_t>(sizes.size() - 1), sizes.back()};
    sizes.back() += bytes;
    return at;
  };
  std::vector<std::uint64_t> in_sizes, out_sizes;
  for (std::size_t i = 0; i < graph.inputs().size(); ++i) {
    const std::uint64_t bytes = plan.slots[static_cast<std::size_t>(graph.inputs()[i].value)].bytes;
    r.in_staged.push_back(request.resident[i] ? Staged{} : pack(in_sizes, bytes));
  }
  for (const GraphOutput& out : graph.outputs()) {
    const std::uint64_t bytes = plan.slots[static_cast<std::size_t>(out.value)].bytes;
    r.out_staged.push_back(request.unread_outputs.contains(out.value) ? Staged{} : pack(out_sizes, bytes));
  }

  // One status word per index check, each at a bindable offset; read back after the outputs.
  const std::uint64_t status_stride = std::max<std::uint64_t>(4, info.min_storage_buffer_offset_alignment);
  std::vector<std::uint64_t> status_offsets(request.launches.size(), 0);
  std::uint64_t status_bytes = 0;
  for (std::size_t n = 0; n < request.launches.size(); ++n) {
    const KernelLaunch& l = request.launches[n];
    if (l.items == 0 || !l.index_check) continue;
    status_offsets[n] = status_bytes;
    r.checks.push_back({static_cast<NodeId>(n), *l.index_check, status_bytes, pack(out_sizes, 4)});
    status_bytes += status_stride;
  }
  if (status_bytes > 0) r.status = Buffer(ctx, status_bytes, MemoryUse::device);
  if (in_sizes.empty()) in_sizes.push_back(4);
  if (out_sizes.empty()) out_sizes.push_back(4);
  for (std::uint64_t bytes : in_sizes)
    r.staging_in.emplace_back(ctx, std::max<std::uint64_t>(bytes, 4), MemoryUse::upload);
  for (std::uint64_t bytes : out_sizes)
    r.staging_out.emplace_back(ctx, std::max<std::uint64_t>(bytes, 4), MemoryUse::readback);
  stats.staging_buffers = r.staging_in.size() + r.staging_out.size();

  // Pipelines (one per shader, binding count, push-constant size and specialization constants,
  // from the Context, which keeps them for later programs) and one descriptor set per dispatch.
  std::uint32_t total_bindings = 0, sets = 0;
  for (const KernelLaunch& launch : request.launches) {
    if (launch.items == 0) continue;
    for (const KernelLaunch* step : launch_steps(launch)) {
      const KernelLaunch& l = *step;
      if (l.items == 0) continue;
      const std::size_t bindings = binding_count(l);
      auto& p = r.pipelines[pipeline_key(l, bindings)];
      if (!p) {
        bool created = false;
        p = ctx->pipeline(l.shader, static_cast<std::uint32_t>(bindings), static_cast<std::uint32_t>(l.push.size()),
                          l.specialization, &created);
        ++(created ? stats.pipelines_created : stats.pipelines_reused);
      }
      total_bindings += static_cast<std::uint32_t>(bindings);
      ++sets;
    }
  }
  const std::size_t parities = request.writebacks.empty() ? 1 : 2;
  if (sets > 0) r.pool = std::make_unique<DescriptorPool>(ctx, sets * parities, total_bindings * parities);
  if (request.timestamps) r.timestamps = std::make_unique<TimestampPool>(ctx, 2 * sets);
  for (std::size_t parity = 0; parity < parities; ++parity) {
    r.slots[parity] = plan.slots;
    if (parity == 1) {
      for (const auto& [from, to] : request.writebacks) {
        std::swap(r.slots[1][static_cast<std::size_t>(from)], r.slots[1][static_cast<std::size_t>(to)]);
      }
    }
  }
  const Segments segments = plan_segments(request, r.slots, parities);
  r.segment_outputs = segments.outputs;
  stats.segments = segments.nodes.size();
  for (std::size_t parity = 0; parity < parities; ++parity) {
    r.commands[parity] =
        record_commands(r, request, r.slots[parity], status_offsets, segments, parity == 0 ? &stats : nullptr);
  }
  // Constants are computed once, here: their values own their ranges for the whole program (the
  // plan's whole_program), and every replay's first barrier orders these writes before its reads.
  if (std::find(request.constants.begin(), request.constants.end(), true) != request.constants.end()) {
    CommandBuffer once(ctx);
    once.begin(/*one_time=*/true);
    std::size_t dispatches = 0;
    record_dispatches(once.handle(), r, request, r.slots[0], status_offsets, nullptr, /*constants=*/true,
                      NodeRange{0, request.launches.size()}, dispatches);
    once.end();
    submit_and_wait(ctx, once.handle(), "computing the constants of graph '" + graph.name() + "'");
  }
  return r;
}

std::vector<double> read_timestamps(const RecordedProgram& recorded, Context& ctx) {
  const DeviceInfo& info = ctx.info();
  const std::uint32_t count = static_cast<std::uint32_t>(2 * recorded.dispatch_nodes.size());
  std::vector<double> out;
  if (!recorded.timestamps || count == 0) return out;
  std::vector<std::uint64_t> ticks(count);
  const VkResult result = vkGetQueryPoolResults(ctx.device(), recorded.timestamps->handle(), 0, count, ticks.size() * 8,
                                                ticks.data(), 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  ctx.check(result, "vkGetQueryPoolResults (timestamps)");
  const std::uint64_t first = ticks[0];
  out.reserve(count);
  for (std::uint64_t t : ticks)
    out.push_back(static_cast<double>(static_cast<std::int64_t>(t - first)) * info.timestamp_period / 1000.0);
  return out;
}

}  // namespace tg::vk
