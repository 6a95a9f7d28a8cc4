// Launches of the structure family. narrow is a strided copy (shaders/layout.comp: the input viewed
// as [outer, dim, inner], read from offset start*inner); pad and concat cut the output's axis into
// segments, each from one input, zero elsewhere (shaders/structure.comp). All copy raw 32-bit
// words, so they serve every dtype bit-exactly.
//
// concat binds every input to its own storage buffer in one dispatch; the shader has 8 input
// bindings (9 with the output: the per-stage storage-buffer limit of every desktop driver and of
// lavapipe is far above that, though the Vulkan minimum is 4). A concat of more than 8 inputs is
// refused with a tg::Error (the executor runs one dispatch per node, so it cannot be split here).
#include "tensorgrad/ir/ops/ids/structure.h"

#include <string>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

constexpr std::size_t kMaxInputs = 8;

// One form each (no size-dependent launch logic).
const LaunchPath kNarrow{"vulkan", "narrow", "kernel"};
const LaunchPath kPad{"vulkan", "pad", "kernel"};
const LaunchPath kConcat{"vulkan", "concat", "kernel"};

// Must match shaders/layout.comp (and GatherPush in layout.cpp).
struct GatherPush {
  std::uint32_t n = 0;
  std::uint32_t rank = 0;
  std::uint32_t base = 0;
  std::uint32_t pad0 = 0;
  std::uint32_t dims[6] = {};
  std::uint32_t strides[6] = {};
};
static_assert(sizeof(GatherPush) == 64);

KernelLaunch narrow(const Graph& graph, const Node& node) {
  const auto axis = node.attrs.integer("axis");
  const auto start = node.attrs.integer("start");
  const auto length = node.attrs.integer("length");
  const Shape& in = graph.type(node.inputs[0]).shape;
  const auto dim = in[static_cast<std::size_t>(axis)];
  const AxisSplit v = split_at_axis(in, axis);
  GatherPush push;
  push.n = static_cast<std::uint32_t>(graph.type(node.output).size());
  push.rank = 3;
  push.base = static_cast<std::uint32_t>(start * v.inner);
  const std::int64_t dims[3] = {v.outer, length, v.inner};
  const std::int64_t strides[3] = {dim * v.inner, v.inner, 1};
  for (std::size_t d = 0; d < 3; ++d) {
    push.dims[d] = static_cast<std::uint32_t>(dims[d]);
    push.strides[d] = static_cast<std::uint32_t>(strides[d]);
  }
  KernelLaunch launch;
  launch.shader = "layout";
  launch.bindings = {node.inputs[0], node.output};
  append_pod(launch.push, push);
  launch.items = push.n;
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.paths = {&kNarrow};
  return launch;
}

struct SegmentPush {
  std::uint32_t n = 0;
  std::uint32_t inner = 0;
  std::uint32_t total = 0;
  std::uint32_t count = 0;
  std::uint32_t lo[kMaxInputs + 1] = {};
  std::uint32_t dims[kMaxInputs] = {};
};
static_assert(sizeof(SegmentPush) == 84);

KernelLaunch segments(const Graph& graph, const Node& node, std::int64_t axis, std::int64_t first_lo) {
  const Shape& out = graph.type(node.output).shape;
  const AxisSplit v = split_at_axis(out, axis);
  SegmentPush push;
  push.n = static_cast<std::uint32_t>(graph.type(node.output).size());
  push.inner = static_cast<std::uint32_t>(v.inner);
  push.total = static_cast<std::uint32_t>(out[static_cast<std::size_t>(axis)]);
  push.count = static_cast<std::uint32_t>(node.inputs.size());
  std::int64_t lo = first_lo;
  for (std::size_t k = 0; k < node.inputs.size(); ++k) {
    const auto dim = graph.type(node.inputs[k]).shape[static_cast<std::size_t>(axis)];
    push.lo[k] = static_cast<std::uint32_t>(lo);
    push.dims[k] = static_cast<std::uint32_t>(dim);
    lo += dim;
  }
  push.lo[node.inputs.size()] = static_cast<std::uint32_t>(lo);
  KernelLaunch launch;
  launch.shader = "structure";
  launch.bindings.assign(node.inputs.begin(), node.inputs.end());
  while (launch.bindings.size() < kMaxInputs) launch.bindings.push_back(node.inputs[0]);  // unused slots
  launch.bindings.push_back(node.output);
  append_pod(launch.push, push);
  launch.items = push.n;
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.paths = {node.op == op::Pad ? &kPad : &kConcat};
  return launch;
}

KernelLaunch pad(const Graph& graph, const Node& node) {
  return segments(graph, node, node.attrs.integer("axis"), node.attrs.integer("before"));
}

KernelLaunch concat(const Graph& graph, const Node& node) {
  if (node.inputs.size() > kMaxInputs) {
    throw CompileError("Vulkan kernel for 'concat' (value %" + std::to_string(node.output) +
                       "): " + std::to_string(node.inputs.size()) + " inputs, above the " + std::to_string(kMaxInputs) +
                       " storage buffers one concat dispatch binds; concat at most " + std::to_string(kMaxInputs) +
                       " tensors at a time (e.g. concat groups, then concat the results)");
  }
  return segments(graph, node, node.attrs.integer("axis"), 0);
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

void register_structure_kernels(KernelPlanTable& table) {
  table[slot(op::Narrow)] = narrow;
  table[slot(op::Pad)] = pad;
  table[slot(op::Concat)] = concat;
}

}  // namespace tg::vk
