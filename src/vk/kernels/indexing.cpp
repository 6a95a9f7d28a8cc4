// Launches of the indexing family, one shader each (shaders/<op>.comp): one_hot, embedding,
// take_along_axis and scatter_add (the index ops, each with the executor's index check on its
// indices), softmax_causal and where_causal (the causal-mask pair on [..., T, T] matrices).
//
// The index ops run one invocation per output element and never address memory through an index
// they have not checked; a bad index is reported through IndexCheck (kernels.h), and the executor
// throws the interpreter's RuntimeError. Where the output can be empty while indices are not
// (embedding with D = 0, scatter_add with size = 0) the launch still covers the indices, because
// the interpreter rejects a bad index there too. scatter_add is a gather (see its shader): no
// float atomics, each output element summed in a fixed order. softmax_causal follows
// shaders/softmax.comp: one invocation per short row, one workgroup per long row.
#include "tensorgrad/ir/ops/ids/indexing.h"

#include <algorithm>
#include <bit>
#include <string>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

constexpr std::uint32_t kGroupSize = 256;
// scatter_add's terms per output element at most this long run one invocation each (mode 1): its
// serial mode also gives the f32 interpreter's exact summation order, so it is kept for longer
// columns than softmax's rows (cover_rows()); past this a workgroup per element keeps each invocation's
// loop well below llvmpipe's 65535-iteration cap.
constexpr std::int64_t kSerialScatterLength = 256;
const SizeThreshold kSerialScatterThreshold{"vulkan", "scatter_add", "serial_max_length", kSerialScatterLength};

// One form each: the index ops without modes and where_causal.
const LaunchPath kOneHot{"vulkan", "one_hot", "kernel"};
const LaunchPath kEmbedding{"vulkan", "embedding", "kernel"};
const LaunchPath kTakeAlongAxis{"vulkan", "take_along_axis", "kernel"};
const LaunchPath kWhereCausal{"vulkan", "where_causal", "kernel"};
// scatter_add's modes: serial columns (1), a workgroup per output (0), chunks across workgroups (2)
// and the chunk sum after them.
const LaunchPath kScatterSerial{"vulkan", "scatter_add", "serial"};
const LaunchPath kScatterWorkgroup{"vulkan", "scatter_add", "workgroup_per_output"};
const LaunchPath kScatterChunks{"vulkan", "scatter_add", "chunks"};
const LaunchPath kScatterChunkSum{"vulkan", "scatter_add", "chunk_sum"};
// softmax_causal's row modes (cover_rows).
const RowModePaths kCausalRows{"softmax_causal"};

// The shaders index every value with 32-bit unsigned arithmetic, and each flat offset they form
// is below some bound value's element count, so all counts must fit 32 bits.
void require_32_bit(const Graph& graph, const Node& node) {
  std::int64_t largest = graph.type(node.output).size();
  for (ValueId v : node.inputs) largest = std::max(largest, graph.type(v).size());
  if (largest <= 0xffffffffll) return;
  std::string types;
  for (ValueId v : node.inputs) types += (types.empty() ? "" : ", ") + graph.type(v).to_string();
  throw LimitError("Vulkan kernel for '" + std::string(op_name(node.op)) + "' on " + types + " -> " +
                   graph.type(node.output).to_string() + ": more than 2^32-1 elements in one value");
}

std::uint32_t u32(std::int64_t v) { return static_cast<std::uint32_t>(v); }

struct OneHotPush {
  std::uint32_t count = 0;
  std::uint32_t depth = 0;
};
static_assert(sizeof(OneHotPush) == 8);

KernelLaunch plan_one_hot(const Graph& graph, const Node& node) {
  require_32_bit(graph, node);
  const std::int64_t count = graph.type(node.inputs[0]).size();
  const std::int64_t depth = node.attrs.integer("depth");
  OneHotPush push;
  push.count = u32(count);
  push.depth = count == 0 ? 1u : u32(depth);  // depth <= output elements whenever count > 0
  KernelLaunch launch;
  launch.shader = "one_hot";
  launch.bindings = {node.inputs[0], node.output};
  launch.items = static_cast<std::uint64_t>(graph.type(node.output).size());  // >= count: depth >= 1
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.index_check = IndexCheck{node.inputs[0], depth, "index"};
  launch.paths = {&kOneHot};
  append_pod(launch.push, push);
  return launch;
}

struct EmbeddingPush {
  std::uint32_t count = 0;
  std::uint32_t rows = 0;
  std::uint32_t width = 0;
};
static_assert(sizeof(EmbeddingPush) == 12);

KernelLaunch plan_embedding(const Graph& graph, const Node& node) {
  require_32_bit(graph, node);
  const Shape& table = graph.type(node.inputs[0]).shape;
  const std::int64_t count = graph.type(node.inputs[1]).size();
  EmbeddingPush push;
  push.count = u32(count);
  push.rows = u32(table[0]);
  push.width = u32(table[1]);
  KernelLaunch launch;
  launch.shader = "embedding";
  launch.bindings = {node.inputs[0], node.inputs[1], node.output};
  launch.items = static_cast<std::uint64_t>(std::max(count, graph.type(node.output).size()));
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.index_check = IndexCheck{node.inputs[1], table[0], "index"};
  launch.paths = {&kEmbedding};
  append_pod(launch.push, push);
  return launch;
}

struct TakeAlongAxisPush {
  std::uint32_t count = 0;
  std::uint32_t x_extent = 0;
  std::uint32_t index_extent = 0;
  std::uint32_t inner = 0;
};
static_assert(sizeof(TakeAlongAxisPush) == 16);

KernelLaunch plan_take_along_axis(const Graph& graph, const Node& node) {
  require_32_bit(graph, node);
  const auto axis = node.attrs.integer("axis");
  const std::int64_t x_extent = graph.type(node.inputs[0]).shape[static_cast<std::size_t>(axis)];
  const Shape& index_shape = graph.type(node.inputs[1]).shape;
  const AxisSplit split = split_at_axis(index_shape, axis);
  const std::int64_t count = num_elements(index_shape);
  TakeAlongAxisPush push;
  push.count = u32(count);
  push.x_extent = u32(x_extent);
  push.index_extent = u32(split.length);
  push.inner = u32(std::max<std::int64_t>(split.inner, 1));  // 0 only when count == 0
  KernelLaunch launch;
  launch.shader = "take_along_axis";
  launch.bindings = {node.inputs[0], node.inputs[1], node.output};
  launch.items = static_cast<std::uint64_t>(count);  // the output has the indices' shape
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.index_check = IndexCheck{node.inputs[1], x_extent, "index"};
  launch.paths = {&kTakeAlongAxis};
  append_pod(launch.push, push);
  return launch;
}

struct ScatterAddPush {
  std::uint32_t mode = 0;
  std::uint32_t count = 0;
  std::uint32_t rows = 0;
  std::uint32_t size = 0;
  std::uint32_t updates = 0;
  std::uint32_t inner = 0;
  std::uint32_t span = 0;  // mode 2: K per chunk
};
static_assert(sizeof(ScatterAddPush) == 28);

KernelLaunch plan_scatter_add(const Graph& graph, const Node& node) {
  require_32_bit(graph, node);
  const auto axis = node.attrs.integer("axis");
  const std::int64_t size = node.attrs.integer("size");
  const Shape& index_shape = graph.type(node.inputs[1]).shape;
  const AxisSplit split = split_at_axis(index_shape, axis);
  const std::int64_t count = num_elements(index_shape);
  const std::int64_t rows = graph.type(node.output).size();
  ScatterAddPush push;
  // Long columns split into chunks across workgroups (mode 2) as reductions do (row_chunks()).
  const bool serial = split.length <= kSerialScatterLength;
  const std::uint64_t parts = serial || rows == 0 ? 1 : row_chunks(split.length, rows);
  if (static_cast<std::uint64_t>(rows) * parts > 0xffffffffull) {
    throw LimitError("Vulkan kernel for 'scatter_add' on " + graph.type(node.inputs[0]).to_string() +
                     ": more than 2^32-1 (output, chunk) pairs for the shader's 32-bit indexing");
  }
  push.mode = serial ? 1u : parts > 1 ? 2u : 0u;
  push.span = static_cast<std::uint32_t>(parts > 1 ? kChunkLength : split.length);
  push.count = u32(count);
  push.rows = u32(rows);
  push.size = u32(size);
  push.updates = u32(split.length);
  push.inner = u32(split.inner);
  KernelLaunch launch;
  launch.shader = "scatter_add";
  launch.bindings = {node.inputs[0], node.inputs[1], node.output};
  const auto main_items = static_cast<std::uint64_t>(rows) * parts * (push.mode == 1u ? 1u : kGroupSize);
  launch.items = std::max(main_items, static_cast<std::uint64_t>(count));
  launch.group_size = kGroupSize;
  launch.index_check = IndexCheck{node.inputs[1], size, "index"};
  launch.paths = {push.mode == 1u ? &kScatterSerial : push.mode == 2u ? &kScatterChunks : &kScatterWorkgroup};
  // The index check's grid-stride loop, then the output loop around a column loop (serial: all of
  // K; workgroups: span / 256 and the tree); the other mode's loops once, masked.
  const std::uint64_t iterations = grid_iterations(launch.items, kGroupSize);
  const std::uint64_t column =
      serial ? loop_passes(split.length) : loop_passes(ceil_div(push.span, kGroupSize)) + loop_passes(8);
  launch.loop_passes = loop_passes(iterations) + loop_passes(iterations, column, 2) + 8;
  append_pod(launch.push, push);
  if (parts > 1) {
    launch.bindings.back() = kScratch;
    launch.scratch_bytes = 4 * static_cast<std::uint64_t>(rows) * parts;
    launch.label = "scatter_add (chunks)";
    launch.then.push_back(ordered_sum_of_partials(node.output, static_cast<std::uint64_t>(rows), parts,
                                                  "scatter_add (chunk sum)", kScatterChunkSum));
  }
  return launch;
}

struct SoftmaxCausalPush {
  std::uint32_t mode = 0;
  std::uint32_t rows = 0;
  std::uint32_t len = 0;
};
static_assert(sizeof(SoftmaxCausalPush) == 12);

KernelLaunch plan_softmax_causal(const Graph& graph, const Node& node) {
  require_32_bit(graph, node);
  const TensorType& type = graph.type(node.inputs[0]);
  const std::int64_t length = type.shape.back();
  const std::int64_t rows = length == 0 ? 0 : type.size() / length;
  SoftmaxCausalPush push;
  push.rows = u32(rows);
  push.len = u32(length);
  KernelLaunch launch;
  launch.shader = "softmax_causal";
  launch.bindings = {node.inputs[0], node.output};
  push.mode = cover_rows(launch, op_name(node.op), length, rows, kCausalRows);
  // Not split: a row is one of T rows of a [..., T, T] matrix, so at most 65536 long for 32-bit
  // element counts (3 x 256 passes per invocation in mode 0).
  launch.loop_passes = row_mode_passes(push.mode, length, rows, 3, 2);
  append_pod(launch.push, push);
  return launch;
}

struct WhereCausalPush {
  std::uint32_t count = 0;
  std::uint32_t len = 0;
  std::uint32_t value = 0;
};
static_assert(sizeof(WhereCausalPush) == 12);

KernelLaunch plan_where_causal(const Graph& graph, const Node& node) {
  require_32_bit(graph, node);
  const TensorType& type = graph.type(node.inputs[0]);
  WhereCausalPush push;
  push.count = u32(type.size());
  push.len = u32(std::max<std::int64_t>(type.shape.back(), 1));  // 0 only when count == 0
  // The front-end already rounded the fill to f32, so this cast is exact.
  push.value = std::bit_cast<std::uint32_t>(static_cast<float>(node.attrs.real("value")));
  KernelLaunch launch;
  launch.shader = "where_causal";
  launch.bindings = {node.inputs[0], node.output};
  launch.items = push.count;
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.paths = {&kWhereCausal};
  append_pod(launch.push, push);
  return launch;
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

void register_indexing_kernels(KernelPlanTable& table) {
  table[slot(op::OneHot)] = plan_one_hot;
  table[slot(op::Embedding)] = plan_embedding;
  table[slot(op::TakeAlongAxis)] = plan_take_along_axis;
  table[slot(op::ScatterAdd)] = plan_scatter_add;
  table[slot(op::SoftmaxCausal)] = plan_softmax_causal;
  table[slot(op::WhereCausal)] = plan_where_causal;
}

}  // namespace tg::vk
