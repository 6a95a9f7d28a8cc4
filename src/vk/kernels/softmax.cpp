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
  push.rows = static_cast<std::uint32_t>(outer * inner);
  push.length = static_cast<std::uint32_t>(length);
  push.inner = static_cast<std::uint32_t>(inner);

  KernelLaunch launch;
  launch.shader = "softmax";
  launch.bindings = {node.inputs[0], node.output};
  push.mode = cover_rows(launch, op_name(node.op), length, outer * inner);
  if (num_elements(shape) == 0) launch.items = 0;
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
