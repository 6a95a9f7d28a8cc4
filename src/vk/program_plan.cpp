// Planning a Program without the device: launches, fusion, absorbed transposes, aliases,
// constants, writebacks and the buffer plan (see program_plan.h).
#include "vk/program_plan.h"

#include <algorithm>
#include <utility>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/ir/ops/ids/precision.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/vk/error.h"
#include "vk/fusion.h"
#include "vk/kernels/attention_units.h"
#include "vk/kernels/conv_gemm.h"
#include "vk/kernels/conv_units.h"
#include "vk/kernels/matmul_units.h"
#include "vk/low_precision_lowering.h"
#include "vk/transpose_absorb.h"

namespace tg::vk {

namespace {

constexpr std::uint64_t kMaxConstantBytes = std::uint64_t{64} << 20;

// Throws tg::Error naming the first launch that binds more storage buffers than the device allows
// per dispatch (maxPerStageDescriptorStorageBuffers), or that may loop past the device's
// per-invocation loop limit (lavapipe's, check_loop_limit), before any Vulkan object is created.
void refuse_launches_above(const DeviceInfo& device, std::uint32_t max_buffers,
                           const std::vector<KernelLaunch>& launches, const Graph& graph) {
  for (std::size_t n = 0; n < launches.size(); ++n) {
    if (launches[n].items == 0) continue;
    check_loop_limit(launches[n], device, graph, graph.nodes()[n]);
    for (const KernelLaunch* step : launch_steps(launches[n])) {
      const std::size_t bindings = binding_count(*step);
      if (step->items == 0 || bindings <= max_buffers) continue;
      const Node& node = graph.nodes()[n];
      throw LimitError("Vulkan kernel '" + step->shader + "' for '" + std::string(op_name(node.op)) + "' (value %" +
                       std::to_string(node.output) + " of graph '" + graph.name() + "', created at " +
                       node.loc.to_string() + ") binds " + std::to_string(bindings) +
                       " storage buffers; the device allows " + std::to_string(max_buffers) +
                       " per dispatch (maxPerStageDescriptorStorageBuffers)");
    }
  }
}

}  // namespace

ProgramPlan plan_program(const Graph& graph, const DeviceInfo& info, const ProgramOptions& options) {
  ProgramPlan p;
  // Every node needs a kernel: refuse before touching the device.

  p.launches.reserve(graph.nodes().size());
  PlanOptions plan_options{options.guard_bytes, {}, {}};
  for (const Node& node : graph.nodes()) {
    const auto slot = static_cast<std::size_t>(node.op);
    const KernelPlanFn fn = slot < kOpIdSpace ? kernel_plan_table()[slot] : nullptr;
    if (!fn) {
      throw CompileError("the Vulkan executor has no kernel for op '" + std::string(op_name(node.op)) + "' (value %" +
                         std::to_string(node.output) + " of graph '" + graph.name() + "', created at " +
                         node.loc.to_string() + ")");
    }
    p.launches.push_back(fn(graph, node));
    if (p.launches.back().index_check) plan_options.keep_alive.push_back(p.launches.back().index_check->input);
  }
  // The fused kernel binds kFusedStorageBuffers buffers: a device that allows fewer per dispatch
  // runs the per-op kernels (same bits).
  const std::uint32_t max_buffers = info.max_per_stage_storage_buffers;
  if (options.fuse_elementwise && max_buffers >= kFusedStorageBuffers) {
    p.launches = fuse_elementwise(graph, std::move(p.launches));
  }
  refuse_launches_above(info, max_buffers, p.launches, graph);
  // After fusion, which leaves matmul and layout launches alone; the rebound matmuls name the
  // values they now read in extra_reads (below), so the plan keeps those alive until them.
  std::vector<std::pair<ValueId, ValueId>> dropped_transposes;
  if (options.absorb_transposes) {
    dropped_transposes = absorb_transposes(graph, p.launches).dropped;
    p.stats.absorbed_transposes = dropped_transposes.size();
  }
  // The matmuls' kernels and part products (the matrix units, split and fast), keeping the
  // operands the absorbed transposes chose.
  route_matmuls(graph, info, options.matmul_precision, p.launches);
  route_convolutions_to_units(graph, info, options.matmul_precision, p.launches);
  route_attention(graph, info, p.launches);
  route_convolutions(graph, info, p.launches);
  route_matmuls_to_rows(graph, info, p.launches);
  route_long_sums(graph, info, p.launches);
  plan_options.scratch_bytes.resize(p.launches.size(), 0);
  for (std::size_t n = 0; n < p.launches.size(); ++n) {
    plan_options.scratch_bytes[n] = p.launches[n].scratch_bytes;
    for (ValueId v : p.launches[n].extra_reads) plan_options.extra_reads.emplace_back(v, static_cast<NodeId>(n));
  }

  p.resident.assign(graph.inputs().size(), false);
  for (std::size_t i = 0; i < graph.inputs().size(); ++i) {
    p.resident[i] = options.resident_params && graph.inputs()[i].kind != InputKind::data;
  }

  std::set<std::string> targets;
  for (const Writeback& w : options.writebacks) {
    const auto out = graph.find_output(w.output);
    const auto in = graph.find_input(w.input);
    const std::string what = "writeback '" + w.output + "' -> '" + w.input + "' of graph '" + graph.name() + "': ";
    if (!out) throw CompileError(what + "no output named '" + w.output + "'");
    if (!in) throw CompileError(what + "no input named '" + w.input + "'");
    const auto in_index = static_cast<std::size_t>(graph.input_of_value(*in) - graph.inputs().data());
    if (!p.resident[in_index])
      throw CompileError(what + "the input is not resident (a param or state with resident_params)");
    if (!(graph.type(*out) == graph.type(*in))) {
      throw CompileError(what + "the output is " + graph.type(*out).to_string() + " but the input is " +
                         graph.type(*in).to_string());
    }
    if (!targets.insert(w.input).second) throw CompileError(what + "the input is the target of another writeback");
    p.writebacks.emplace_back(*out, *in);
    p.writeback_sources.insert(*out);
    plan_options.whole_program.push_back(*out);
  }

  p.unread_outputs = p.writeback_sources;
  for (const std::string& name : options.device_outputs) {
    const std::string what = "device output '" + name + "' of graph '" + graph.name() + "': ";
    const auto out = graph.find_output(name);
    if (!out) throw CompileError(what + "no output has that name");
    if (p.writeback_sources.contains(*out))
      throw CompileError(what + "it is a writeback source (on the device already)");
    if (!p.device_outputs.emplace(name, *out).second) throw CompileError(what + "named twice");
    p.unread_outputs.insert(*out);
  }

  // Nodes without inputs (full, zeros, ones, arange) give the same values on every run: computed
  // once when the program is built, kept for its whole life instead of recomputed per run (a
  // training step's graph has dozens of them), up to kMaxConstantBytes in all. So do casts of
  // constants: a 16-bit graph's constants are f32 fills cast to their dtype (and back to f32 for the
  // ops that read them) by the lowering (vk/low_precision_lowering.h).
  p.constants.assign(p.launches.size(), false);
  std::uint64_t constant_bytes = 0;
  const auto cast_of_constant = [&](const Node& node) {
    if (node.op != op::Cast) return false;
    const NodeId producer = graph.value(node.inputs[0]).producer;
    return producer != kNoNode && p.constants[static_cast<std::size_t>(producer)];
  };
  for (std::size_t n = 0; n < p.launches.size(); ++n) {
    const Node& node = graph.nodes()[n];
    const std::uint64_t bytes = device_value_bytes(graph.type(node.output));
    if ((!node.inputs.empty() && !cast_of_constant(node)) || p.launches[n].items == 0 ||
        p.writeback_sources.contains(node.output) || constant_bytes + bytes > kMaxConstantBytes) {
      continue;
    }
    p.constants[n] = true;
    constant_bytes += bytes;
    ++p.stats.constants;
    plan_options.whole_program.push_back(node.output);
  }
  // A reshape moves no data: its output shares its input's range (no dispatch) when neither is a
  // graph input or output, whose ranges the recordings handle themselves (uploads, readbacks,
  // writeback swaps).
  const auto boundary = [&](ValueId v) {
    return graph.input_of_value(v) != nullptr || std::any_of(graph.outputs().begin(), graph.outputs().end(),
                                                             [&](const GraphOutput& o) { return o.value == v; });
  };
  for (std::size_t n = 0; n < p.launches.size(); ++n) {
    const Node& node = graph.nodes()[n];
    if (node.op != op::Reshape || p.launches[n].items == 0) continue;
    if (boundary(node.inputs[0]) || boundary(node.output)) continue;
    p.launches[n].items = 0;
    plan_options.aliases.emplace_back(node.output, node.inputs[0]);
    ++p.stats.aliases;
  }
  // A dropped transpose's output is never written or read: it takes its input's range instead of
  // a range of its own (the input then lives until the output's last reader, as extra_reads says
  // anyway). Not for an input that is a graph input or output, whose ranges the recordings handle.
  for (const auto& [out, in] : dropped_transposes) {
    if (!boundary(in)) plan_options.aliases.emplace_back(out, in);
  }

  if (options.timestamps && !info.timestamps_supported) {
    throw Error("Vulkan program '" + graph.name() + "': timestamps requested, but " + info.summary() +
                " has no timestamp queries on its compute queue");
  }
  PlanLimits limits;
  limits.alignment = info.min_storage_buffer_offset_alignment;
  limits.max_storage_buffer_range = info.max_storage_buffer_range;
  limits.max_memory_allocation_size = info.max_memory_allocation_size;
  limits.block_bytes = options.max_block_bytes;
  limits.heap_bytes = info.device_heap_bytes > 0 ? info.device_heap_bytes : ~0ull;
  limits.heap = "memory heap " + std::to_string(info.device_heap_index);
  limits.device = info.summary();
  p.plan = plan_buffers(graph, limits, plan_options);
  p.limits = std::move(limits);
  p.plan_options = std::move(plan_options);
  p.stats.device_bytes = p.plan.total_bytes;
  p.stats.unshared_bytes = p.plan.naive_bytes;
  p.stats.block_bytes = p.plan.blocks;
  p.stats.peak_live_bytes = p.plan.peak_live_bytes;

  return p;
}

ProgramStats plan_memory(const Graph& graph, const DeviceInfo& info, const ProgramOptions& options) {
  return plan_program(prepare_low_precision(graph, info), info, options).stats;
}

}  // namespace tg::vk
