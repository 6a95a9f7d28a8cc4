// Launches of the constant fills (shaders/creation.comp): full, zeros, ones. The value is encoded
// on the host as the output's 32-bit word (float bits for f32, int32 for i32 and bool). arange
// fills out[i] = i (shaders/arange.comp).
#include "tensorgrad/ir/ops/ids/creation.h"

#include <bit>
#include <cstdint>

#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

// One form each (no size-dependent launch logic).
const LaunchPath kFull{"vulkan", "full", "kernel"};
const LaunchPath kZeros{"vulkan", "zeros", "kernel"};
const LaunchPath kOnes{"vulkan", "ones", "kernel"};
const LaunchPath kArange{"vulkan", "arange", "kernel"};

KernelLaunch fill(const Graph& graph, const Node& node, double value, const LaunchPath& path) {
  const TensorType& type = graph.type(node.output);
  struct {
    std::uint32_t n;
    std::uint32_t word;
  } push{static_cast<std::uint32_t>(type.size()), is_float(type.dtype)
                                                      ? std::bit_cast<std::uint32_t>(static_cast<float>(value))
                                                      : static_cast<std::uint32_t>(static_cast<std::int32_t>(value))};
  KernelLaunch launch;
  launch.shader = "creation";
  launch.bindings = {node.output};
  append_pod(launch.push, push);
  launch.items = push.n;
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.paths = {&path};
  return launch;
}

KernelLaunch full(const Graph& graph, const Node& node) { return fill(graph, node, node.attrs.real("value"), kFull); }
KernelLaunch zeros(const Graph& graph, const Node& node) { return fill(graph, node, 0.0, kZeros); }
KernelLaunch ones(const Graph& graph, const Node& node) { return fill(graph, node, 1.0, kOnes); }

KernelLaunch arange(const Graph& graph, const Node& node) {
  const TensorType& type = graph.type(node.output);
  struct {
    std::uint32_t n;
    std::uint32_t is_float;
  } push{static_cast<std::uint32_t>(type.size()), is_float(type.dtype) ? 1u : 0u};
  KernelLaunch launch;
  launch.shader = "arange";
  launch.bindings = {node.output};
  append_pod(launch.push, push);
  launch.items = push.n;
  launch.loop_passes = grid_stride_passes(launch.items, launch.group_size);
  launch.paths = {&kArange};
  return launch;
}

}  // namespace

void register_creation_kernels(KernelPlanTable& table) {
  table[static_cast<std::size_t>(op::Full)] = full;
  table[static_cast<std::size_t>(op::Zeros)] = zeros;
  table[static_cast<std::size_t>(op::Ones)] = ones;
  table[static_cast<std::size_t>(op::Arange)] = arange;
}

}  // namespace tg::vk
