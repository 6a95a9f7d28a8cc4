// Launches of the reduce family (shaders/reduce.comp): sum, mean, max, min over a set of axes and
// argmax, argmin over one axis. Size-1 axes are dropped and adjacent axes of the same kind (kept or
// reduced) merged, as the interpreter does; the shader gets extents and input strides of each kind
// and addresses every output element's slice directly, so no permute is ever materialized.
// Long reductions get one 256-invocation workgroup per output element (strided fp32 partials, then
// a fixed-shape shared-memory tree), many medium ones 32 invocations each (the same with a 32-lane
// tree), short ones one invocation per output element.
#include <string>

#include "tensorgrad/ir/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

constexpr std::size_t kMaxRank = 6;
constexpr std::uint32_t kGroupSize = 256;
// cover_rows(): rows at most kSerialLength long run one invocation each; longer ones up to
// kSegmentLength, at least kSegmentRows of them, kSegmentsPerGroup per workgroup (fewer rows keep
// a workgroup's 256 lanes each).
constexpr std::int64_t kSerialLength = 32;
constexpr std::int64_t kSegmentLength = 1024;
constexpr std::int64_t kSegmentRows = 128;
constexpr std::uint64_t kSegmentsPerGroup = 8;  // = WG / SEG in the shaders

struct ReducePush {
  std::uint32_t op = 0;
  std::uint32_t mode = 0;
  std::uint32_t rows = 0;
  std::uint32_t count = 0;
  std::uint32_t kept_rank = 0;
  std::uint32_t red_rank = 0;
  std::uint32_t pad[2] = {};
  std::uint32_t kept_dims[kMaxRank] = {};
  std::uint32_t kept_strides[kMaxRank] = {};
  std::uint32_t red_dims[kMaxRank] = {};
  std::uint32_t red_strides[kMaxRank] = {};
};
static_assert(sizeof(ReducePush) == 128);

enum ReduceOp : std::uint32_t { sum, mean, max, min, argmax, argmin };

[[noreturn]] void refuse(const Graph& graph, const Node& node, const std::string& why) {
  throw Error("Vulkan kernel for '" + std::string(op_name(node.op)) + "' on " + graph.type(node.inputs[0]).to_string() +
              ": " + why);
}

std::uint32_t u32(const Graph& graph, const Node& node, std::int64_t v) {
  if (v < 0 || v > 0xffffffffll) refuse(graph, node, "an extent or stride does not fit 32 bits");
  return static_cast<std::uint32_t>(v);
}

KernelLaunch plan_reduce(const Graph& graph, const Node& node, ReduceOp op) {
  const Shape& shape = graph.type(node.inputs[0]).shape;
  std::vector<bool> reduced(shape.size(), false);
  if (op == argmax || op == argmin) {
    reduced[static_cast<std::size_t>(node.attrs.integer("axis"))] = true;
  } else {
    for (auto a : node.attrs.ints("axes")) reduced[static_cast<std::size_t>(a)] = true;
  }
  if (num_elements(shape) > 0xffffffffll) refuse(graph, node, "more than 2^32-1 elements");

  // Groups of adjacent same-kind axes (size-1 axes dropped); row-major, so a merged group keeps the
  // innermost stride. Argmax's single reduced axis stays one group, so the reduced linear index is
  // the index along the axis.
  struct Group {
    std::int64_t dim, stride;
    bool reduced;
  };
  std::vector<Group> groups;
  const std::vector<std::int64_t> strides = row_major_strides(shape);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[i]) {
      groups.back().dim *= shape[i];
      groups.back().stride = strides[i];
    } else {
      groups.push_back({shape[i], strides[i], reduced[i]});
    }
  }

  ReducePush push;
  push.op = op;
  std::int64_t rows = 1, count = 1;
  for (const Group& g : groups) {
    std::uint32_t& rank = g.reduced ? push.red_rank : push.kept_rank;
    if (rank >= kMaxRank) refuse(graph, node, "more than 6 alternating kept/reduced axis groups");
    (g.reduced ? push.red_dims : push.kept_dims)[rank] = u32(graph, node, g.dim);
    (g.reduced ? push.red_strides : push.kept_strides)[rank] = u32(graph, node, g.stride);
    ++rank;
    (g.reduced ? count : rows) *= g.dim;
  }
  push.rows = u32(graph, node, rows);
  push.count = u32(graph, node, count);

  KernelLaunch launch;
  launch.shader = "reduce";
  launch.bindings = {node.inputs[0], node.output};
  push.mode = cover_rows(launch, op_name(node.op), count, rows);
  if (graph.type(node.output).size() == 0) launch.items = 0;
  append_pod(launch.push, push);
  return launch;
}

template <ReduceOp Op>
KernelLaunch plan(const Graph& graph, const Node& node) {
  return plan_reduce(graph, node, Op);
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

std::uint32_t cover_rows(KernelLaunch& launch, std::string_view op, std::int64_t length, std::int64_t rows) {
  const auto count = static_cast<std::uint64_t>(rows);
  launch.group_size = kGroupSize;
  if (length <= kSerialLength) {
    launch.items = count;
    return 1;
  }
  if (length <= kSegmentLength && rows >= kSegmentRows) {
    launch.items = (count + kSegmentsPerGroup - 1) / kSegmentsPerGroup * kGroupSize;
    launch.label = std::string(op) + " (row segments)";
    return 2;
  }
  launch.items = count * kGroupSize;
  return 0;
}

void register_reduce_kernels(KernelPlanTable& table) {
  table[slot(OpId::Sum)] = plan<sum>;
  table[slot(OpId::Mean)] = plan<mean>;
  table[slot(OpId::Max)] = plan<max>;
  table[slot(OpId::Min)] = plan<min>;
  table[slot(OpId::Argmax)] = plan<argmax>;
  table[slot(OpId::Argmin)] = plan<argmin>;
}

}  // namespace tg::vk
