// Launches of the softmax family (shaders/softmax.comp): softmax and log_softmax along any axis.
// A row is one (outer, inner) position; its elements sit `inner` apart, so no permute is needed.
// Long rows get one 256-invocation workgroup each (max, then sum of exp, each combined by a
// fixed-shape shared-memory tree), many medium rows 32 invocations each (a 32-lane tree), short
// rows one invocation each. Rows longer than kChunkLength, when few or very long (row_chunks()),
// are split across workgroups by shaders/softmax_split.comp in three dispatches (chunk maxima,
// chunk sums, outputs) through the node's scratch: a workgroup per row of 2^25 elements would
// loop 3 x 131072 times per invocation, past llvmpipe's loop limit (kernels.h).
#include "tensorgrad/ir/ops/ids/softmax.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
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

struct SplitPush {
  std::uint32_t op = 0;
  std::uint32_t mode = 0;  // 0 chunk maxima, 1 chunk sums, 2 outputs
  std::uint32_t rows = 0;
  std::uint32_t length = 0;
  std::uint32_t inner = 0;
  std::uint32_t span = 0;
  std::uint32_t parts = 0;
};
static_assert(sizeof(SplitPush) == 28);

constexpr std::uint32_t kGroupSize = 256;

// Per op: the row modes of one dispatch (cover_rows), or the split's three dispatches.
struct SoftmaxPaths {
  explicit SoftmaxPaths(std::string_view op)
      : rows(op),
        split{LaunchPath("vulkan", op, "split_maxima"), LaunchPath("vulkan", op, "split_sums"),
              LaunchPath("vulkan", op, "split_outputs")} {}
  RowModePaths rows;
  LaunchPath split[3];  // by SplitPush::mode
};
const SoftmaxPaths kSoftmaxPaths{"softmax"};
const SoftmaxPaths kLogSoftmaxPaths{"log_softmax"};
const SoftmaxPaths& paths_of(std::uint32_t op) { return op == 0 ? kSoftmaxPaths : kLogSoftmaxPaths; }

// The three dispatches of a split softmax over `rows` rows of `parts` chunks each.
KernelLaunch plan_split(const Node& node, const SoftmaxPush& rows_push, std::uint64_t parts) {
  const std::string name(op_name(node.op));
  SplitPush push;
  push.op = rows_push.op;
  push.rows = rows_push.rows;
  push.length = rows_push.length;
  push.inner = rows_push.inner;
  push.span = static_cast<std::uint32_t>(kChunkLength);
  push.parts = static_cast<std::uint32_t>(parts);
  const std::uint64_t items = std::uint64_t{push.rows} * parts * kGroupSize;
  // Per chunk: at most two loops over the chunk's elements or the row's partials, two trees.
  const std::uint64_t per_chunk = 2 * loop_passes(ceil_div(std::max<std::uint64_t>(kChunkLength, parts), kGroupSize)) +
                                  2 * loop_passes(8) + 2 * loop_passes(ceil_div(kChunkLength, kGroupSize));
  const char* labels[3] = {" (chunk maxima)", " (chunk sums)", " (chunk outputs)"};
  std::vector<KernelLaunch> steps;
  for (std::uint32_t mode = 0; mode < 3; ++mode) {
    KernelLaunch step;
    step.shader = "softmax_split";
    step.bindings = {node.inputs[0], kScratch, node.output};
    step.writes = 2;
    step.group_size = kGroupSize;
    step.items = items;
    step.label = name + labels[mode];
    step.paths = {&paths_of(rows_push.op).split[mode]};
    step.loop_passes = loop_passes(grid_iterations(items, kGroupSize), per_chunk, 7);
    push.mode = mode;
    append_pod(step.push, push);
    steps.push_back(std::move(step));
  }
  KernelLaunch launch = std::move(steps[0]);
  launch.scratch_bytes = 4 * 2 * std::uint64_t{push.rows} * parts;
  launch.then = {std::move(steps[1]), std::move(steps[2])};
  return launch;
}

KernelLaunch plan_softmax(const Graph& graph, const Node& node, std::uint32_t op) {
  const Shape& shape = graph.type(node.inputs[0]).shape;
  const auto axis = static_cast<std::size_t>(node.attrs.integer("axis"));
  const auto [outer, length, inner] = split_at_axis(shape, static_cast<std::int64_t>(axis));
  if (num_elements(shape) > 0xffffffffll) {
    throw LimitError("Vulkan kernel for '" + std::string(op_name(node.op)) + "' on " +
                     graph.type(node.inputs[0]).to_string() + ": more than 2^32-1 elements");
  }
  SoftmaxPush push;
  push.op = op;
  push.rows = static_cast<std::uint32_t>(outer * inner);
  push.length = static_cast<std::uint32_t>(length);
  push.inner = static_cast<std::uint32_t>(inner);

  const std::uint64_t parts = row_chunks(length, outer * inner);
  if (parts > 1) return plan_split(node, push, parts);
  KernelLaunch launch;
  launch.shader = "softmax";
  launch.bindings = {node.inputs[0], node.output};
  push.mode = cover_rows(launch, op_name(node.op), length, outer * inner, paths_of(op).rows);
  launch.loop_passes = row_mode_passes(push.mode, length, outer * inner, 3, 2);
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
  table[slot(op::Softmax)] = plan<0>;
  table[slot(op::LogSoftmax)] = plan<1>;
}

}  // namespace tg::vk
