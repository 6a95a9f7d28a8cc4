// Launches of the softmax family (shaders/softmax.comp): softmax and log_softmax along any axis.
// A row is one (outer, inner) position; its elements sit `inner` apart, so no permute is needed.
// Long rows get one 256-invocation workgroup each (max, then sum of exp, each combined by a
// fixed-shape shared-memory tree), many medium rows 32 invocations each (a 32-lane tree), short
// rows one invocation each.
#include <string>

#include "tensorgrad/ir/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

constexpr std::uint32_t kGroupSize = 256;
constexpr std::int64_t kSerialLength = 32;
// Medium rows, many of them: 32 invocations per row, 8 rows per workgroup (mode 2).
constexpr std::int64_t kSegmentLength = 1024;
constexpr std::int64_t kSegmentRows = 128;
constexpr std::uint64_t kSegmentsPerGroup = 8;  // = WG / SEG in shaders/softmax.comp

struct SoftmaxPush {
  std::uint32_t op = 0;
  std::uint32_t mode = 0;
  std::uint32_t rows = 0;
  std::uint32_t length = 0;
  std::uint32_t inner = 0;
};
static_assert(sizeof(SoftmaxPush) == 20);

KernelLaunch plan_softmax(const Graph& graph, const Node& node, std::uint32_t op) {
  const Shape& shape = graph.type(node.inputs[0]).shape;
  const auto axis = static_cast<std::size_t>(node.attrs.integer("axis"));
  const auto [outer, length, inner] = split_at_axis(shape, static_cast<std::int64_t>(axis));
  if (num_elements(shape) > 0xffffffffll) {
    throw Error("Vulkan kernel for '" + std::string(op_name(node.op)) + "' on " +
                graph.type(node.inputs[0]).to_string() + ": more than 2^32-1 elements");
  }
  SoftmaxPush push;
  push.op = op;
  push.mode = length <= kSerialLength ? 1 : length <= kSegmentLength && outer * inner >= kSegmentRows ? 2 : 0;
  push.rows = static_cast<std::uint32_t>(outer * inner);
  push.length = static_cast<std::uint32_t>(length);
  push.inner = static_cast<std::uint32_t>(inner);

  KernelLaunch launch;
  launch.shader = "softmax";
  launch.bindings = {node.inputs[0], node.output};
  launch.group_size = kGroupSize;
  const auto rows = static_cast<std::uint64_t>(outer * inner);
  launch.items = num_elements(shape) == 0 ? 0
                 : push.mode == 1         ? rows
                 : push.mode == 2         ? (rows + kSegmentsPerGroup - 1) / kSegmentsPerGroup * kGroupSize
                                          : rows * kGroupSize;
  if (push.mode == 2) launch.label = std::string(op_name(node.op)) + " (row segments)";
  append_pod(launch.push, push);
  return launch;
}

template <std::uint32_t Op>
KernelLaunch plan(const Graph& graph, const Node& node) {
  return plan_softmax(graph, node, Op);
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

void register_softmax_kernels(KernelPlanTable& table) {
  table[slot(OpId::Softmax)] = plan<0>;
  table[slot(OpId::LogSoftmax)] = plan<1>;
}

}  // namespace tg::vk
